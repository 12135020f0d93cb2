"""OAuth clients keep their secret as its SHA-256 only: each stored ``client_secret`` becomes
``client_secret_sha256``, so a copy of the database holds no secret that authenticates. The
clients go on authenticating with the secrets they hold.

The downgrade cannot bring the secrets back: it drops the digests, and such clients must
register again.

Revision ID: 0020
Revises: 0019
"""

import hashlib
import json
from collections.abc import Callable

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None

_clients = sa.table(
    "oauth_clients", sa.column("client_id", sa.String), sa.column("metadata", sa.Text)
)


def _rewrite(change: Callable[[dict[str, object]], bool]) -> None:
    """Apply ``change`` to each client's metadata; store those it changed."""
    conn = op.get_bind()
    rows = conn.execute(sa.select(_clients.c.client_id, _clients.c.metadata)).all()
    for client_id, text in rows:
        metadata = json.loads(text)
        if change(metadata):
            conn.execute(
                _clients.update()
                .where(_clients.c.client_id == client_id)
                .values(metadata=json.dumps(metadata))
            )


def _to_digest(metadata: dict[str, object]) -> bool:
    secret = metadata.pop("client_secret", None)
    if not isinstance(secret, str):
        return False
    metadata["client_secret_sha256"] = hashlib.sha256(secret.encode()).hexdigest()
    return True


def _drop_digest(metadata: dict[str, object]) -> bool:
    return metadata.pop("client_secret_sha256", None) is not None


def upgrade() -> None:
    _rewrite(_to_digest)


def downgrade() -> None:
    _rewrite(_drop_digest)
