"""Database errors never carry bound values (a sealed key, a key hash) into a log line."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from paysign.store.database import Database
from paysign.store.schema import accounts


def test_errors_hide_bound_parameters(db: Database) -> None:
    secret = b"sealed-secret-that-must-not-be-logged"
    row = {
        "id": "a1",
        "email": "x@example.com",
        "password_hash": "h",
        "sealed_totp_secret": secret,
        "created_at": 1,
    }
    with db.write() as conn:
        conn.execute(accounts.insert().values(**row))
    with pytest.raises(sa.exc.IntegrityError) as failed, db.write() as conn:
        conn.execute(accounts.insert().values(**row))
    message = str(failed.value)
    assert "sealed-secret" not in message and "x@example.com" not in message
