"""``paysign catalog``: the operator's side of the catalog of paid endpoints."""

from __future__ import annotations

import click

from paysign.cli._common import emit, read_json, run, runtime
from paysign.errors import InvalidCatalog
from paysign.services.catalog import import_catalog, remove_listing


@click.group()
def catalog() -> None:
    """The catalog of paid endpoints."""


@catalog.command("import")
@click.argument("path", type=click.Path(exists=True, dir_okay=False, allow_dash=True))
@click.option(
    "--prune",
    is_flag=True,
    help="The file is the whole catalog: remove the listings (and their MCP tools) not in it.",
)
def catalog_import(path: str, prune: bool) -> None:
    """Validate a catalog file (all three tiers) and upsert its listings by id."""

    def act() -> None:
        document = read_json(path, InvalidCatalog)
        rt = runtime()
        emit(import_catalog(rt.db, rt.clock, document, prune=prune))

    run(act)


@catalog.command("remove")
@click.argument("name")
def catalog_remove(name: str) -> None:
    """Remove the listing called NAME (and its MCP tool)."""

    def act() -> None:
        rt = runtime()
        emit(remove_listing(rt.db, rt.clock, name))

    run(act)
