"""The page each problem type URL serves: the entry of ``problems.PROBLEM_TYPES`` as HTML.

The entries are written as plain text with Markdown code spans (`resetsAt`) for field and header
names; the page shows those as code, escapes everything else, and turns "the portal" into a link
to the portal's address, so a human who followed the link from an error can act on it.

    >>> problem_text_html("Wait for `resetsAt`, <then> ask in the portal.", "/portal")
    'Wait for <code>resetsAt</code>, &lt;then&gt; ask in <a href="/portal">the portal</a>.'
"""

from __future__ import annotations

import html
import re

from paysign.http.problems import ProblemType

_CODE_SPAN = re.compile(r"`([^`]+)`")
_PORTAL = re.compile(r"\bthe (?:paysign )?portal\b")

_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{title} — paysign</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>body{{font:16px/1.5 system-ui,sans-serif;max-width:42rem;margin:3rem auto;padding:0 1rem;
color:#1b1f24}}code{{background:#f2f4f7;padding:0 .25em;border-radius:3px}}
.status{{color:#57606a}}</style></head>
<body><p class="status">paysign problem type · HTTP {status}</p><h1>{title}</h1>
<h2>What happened</h2><p>{explanation}</p><h2>What to do</h2><p>{remedy}</p>
<p class="status">{retry}</p>
<p class="status">The account holder's portal: <a href="{portal}">{portal}</a></p></body></html>"""


def problem_text_html(text: str, portal_url: str) -> str:
    """``text`` as HTML: escaped, code spans as ``<code>``, "the portal" linked to it."""
    link = f'<a href="{html.escape(portal_url)}">'
    pieces = []
    # re.split with one group alternates prose (even indexes) and code-span contents (odd).
    for index, piece in enumerate(_CODE_SPAN.split(text)):
        if index % 2:
            pieces.append(f"<code>{html.escape(piece)}</code>")
        else:
            pieces.append(_PORTAL.sub(lambda m: f"{link}{m.group(0)}</a>", html.escape(piece)))
    return "".join(pieces)


def problem_page_html(kind: ProblemType, portal_url: str) -> str:
    retry = (
        "Retrying the same request may succeed."
        if kind.retryable
        else "Retrying the same request unchanged will not help."
    )
    return _PAGE.format(
        title=html.escape(kind.title),
        status=kind.status,
        explanation=problem_text_html(kind.explanation, portal_url),
        remedy=problem_text_html(kind.remedy, portal_url),
        retry=retry,
        portal=html.escape(portal_url),
    )
