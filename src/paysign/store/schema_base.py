"""The metadata every table is declared on (with the constraint naming Alembic relies on) and
the integer key type both databases auto-increment."""

from __future__ import annotations

import sqlalchemy as sa

metadata = sa.MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
    }
)

# SQLite only auto-increments an INTEGER PRIMARY KEY; PostgreSQL gets a 64-bit identity.
BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
