"""``paysign catalog list``: the listings with their inputs and the URL to call; and which
listing a URL belongs to, so a live payment to a seller that has a sandbox comes with a note."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

import click
import httpx

from paysign.client.catalog import Listing, filter_listings, listings_of
from paysign.client.cli_options import service_options
from paysign.client.cli_output import outcomes, stderr_console
from paysign.client.errors import PaysignClientError
from paysign.client.signer import PaysignSigner
from paysign.client.wire import format_usdc

#: The header a listing declares for its sandbox; ``--sandbox`` sets it, so it is not listed.
_SANDBOX_HEADER = "x-sandbox-mode"


def call_url(listing: Listing) -> str:
    """Where the listing is called, with its path inputs as ``{key}``."""
    return listing.url.rstrip("/") + listing.path


def input_names(listing: Listing) -> str:
    """The inputs ``paysign call`` takes, required ones marked ``*``."""
    names = [
        f"{item['key']}{'*' if item.get('required') else ''}"
        for kind in ("path", "query", "header", "body")
        for item in listing.inputs(kind)
        if str(item["key"]).lower() != _SANDBOX_HEADER
    ]
    if listing.free_form_body:
        names.append("(JSON body)")
    return ",".join(names) or "-"


def listing_for_url(listings: list[Listing], url: str) -> Listing | None:
    """The listing whose address ``url`` is (its path inputs filled in any way)."""
    wanted = urlsplit(url)
    for listing in listings:
        template = urlsplit(call_url(listing))
        if (wanted.scheme, wanted.netloc) != (template.scheme, template.netloc):
            continue
        fixed = template.path.split("{", 1)[0]
        exact = "{" not in template.path
        if wanted.path == template.path or (not exact and wanted.path.startswith(fixed)):
            return listing
    return None


def sandbox_note(signer: PaysignSigner, url: str) -> str:
    """A note for a live payment to ``url`` when its listing offers a sandbox; ``""`` when it
    does not, or the catalog cannot be read (the payment goes ahead either way)."""
    try:
        listing = listing_for_url(listings_of(signer.catalog()), url)
    except (PaysignClientError, httpx.HTTPError):  # only a note: never stop a payment for it
        return ""
    if listing is None or not listing.sandbox_available:
        return ""
    return (
        f"{listing.name} offers a sandbox, and this call pays live, in real USDC. "
        "Add --sandbox to pay with test USDC instead."
    )


@click.command("list")
@click.option(
    "--tier", type=click.Choice(["PREMIUM", "STANDARD"], case_sensitive=False), default=None
)
@click.option("--tag", "tags", multiple=True, help="Only listings with this tag; repeatable.")
@click.option("--json", "as_json", is_flag=True, help="Print the listings as a JSON array.")
@service_options
def catalog_list(
    tier: str | None, tags: tuple[str, ...], as_json: bool, api_key: str | None, base_url: str
) -> None:
    """List the catalog's paid services (Premium and Standard), from the paysign service:
    price, whether it has a sandbox, the inputs `paysign call` takes (* required) and the URL."""
    from rich.console import Console
    from rich.table import Table

    console = stderr_console()
    with outcomes(console), PaysignSigner(api_key, base_url) as signer:
        found = filter_listings(listings_of(signer.catalog()), tier=tier, tags=tags)
    if as_json:
        click.echo(json.dumps([listing.document for listing in found], indent=2))
        return
    out = Console(highlight=False)
    if not out.is_terminal:
        out = Console(highlight=False, width=240)
    if not found:
        console.print("no listing matches")
        return
    table = Table(box=None, header_style="bold", pad_edge=False)
    columns = ("NAME", "TIER", "USDC", "METHOD", "SANDBOX", "TAGS", "INPUTS", "URL")
    for column in (*columns, "DESCRIPTION"):
        table.add_column(column, justify="right" if column == "USDC" else "left")
    for listing in found:
        row: list[Any] = [
            listing.name,
            listing.tier,
            format_usdc(listing.price),
            listing.method,
            "yes" if listing.sandbox_available else "no",
            ",".join(listing.tags),
            input_names(listing),
            call_url(listing),
            listing.description,
        ]
        table.add_row(*row)
    out.print(table)
    console.print("call one with: paysign call NAME key=value … [--sandbox]  (* = required)")
