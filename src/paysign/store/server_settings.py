"""A PostgreSQL server's settings as this service's own connections see them: the server's
configuration, then whatever the role, the database or the connection URL's ``options`` set
(``paysign check``, and the warnings ``paysign serve`` gives at start)."""

from __future__ import annotations

from sqlalchemy.engine import Connection

#: What decides whether a commit survives a crash of the server, of its host, or a power loss.
DURABILITY_SETTINGS = ("fsync", "synchronous_commit", "full_page_writes")

# current_setting, not SHOW: all three in one statement, a plain SELECT that PgBouncer in
# transaction pooling passes through like any other.
_DURABILITY_SQL = "SELECT " + ", ".join(
    f"current_setting('{name}')" for name in DURABILITY_SETTINGS
)


def max_connections(conn: Connection) -> int:
    """How many connections the server accepts in all (``SHOW max_connections``)."""
    return int(conn.exec_driver_sql("SHOW max_connections").scalar_one())


def durability_settings(conn: Connection) -> dict[str, str]:
    """``{"fsync": "on", "synchronous_commit": "on", "full_page_writes": "on"}`` on a server
    left at PostgreSQL's defaults."""
    row = conn.exec_driver_sql(_DURABILITY_SQL).one()
    return dict(zip(DURABILITY_SETTINGS, (str(value) for value in row), strict=True))
