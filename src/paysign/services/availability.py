"""Whether a failure means the database is unavailable for now (``store.unavailable``), for the
entry points, which answer it ``503`` with ``Retry-After`` instead of ``500``."""

from __future__ import annotations

from paysign.store.unavailable import database_unavailable

__all__ = ["database_unavailable"]
