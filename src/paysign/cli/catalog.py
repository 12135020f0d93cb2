"""``paysign catalog``: the operator's side of the catalog of paid endpoints."""

from __future__ import annotations

import click

from paysign.cli._common import emit, read_json, run, runtime
from paysign.errors import InvalidCatalog
from paysign.services.catalog import import_catalog


@click.group()
def catalog() -> None:
    """The catalog of paid endpoints."""


@catalog.command("import")
@click.argument("path", type=click.Path(exists=True, dir_okay=False, allow_dash=True))
def catalog_import(path: str) -> None:
    """Validate a catalog file (all three tiers) and upsert its listings by id."""

    def act() -> None:
        document = read_json(path, InvalidCatalog)
        rt = runtime()
        emit(import_catalog(rt.db, rt.clock, document))

    run(act)
