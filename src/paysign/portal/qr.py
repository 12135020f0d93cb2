"""QR codes as inline SVG, drawn on the server: the authenticator enrolment pages show the
``otpauth://`` URI as one. Inline markup, not an image URL, because the CSP allows no image
source, and a data URI or a separate request would only add a way for the secret to leak.

The ``qrcode`` library computes the module matrix; drawing it is one SVG path, a unit square per
dark module, so the markup stays small and needs neither Pillow nor a font.

    >>> uri = "otpauth://totp/paysign:a%40b.example?secret=JBSWY3DPEHPK3PXP"
    >>> svg = qr_svg(uri)
    >>> svg.startswith('<svg class="qr" xmlns="http://www.w3.org/2000/svg"')
    True
    >>> modules_of(svg) == dark_modules(qr_matrix(uri)) != dark_modules(qr_matrix(uri + "A"))
    True
"""

from __future__ import annotations

import re

import qrcode
import qrcode.constants
from markupsafe import Markup

#: The quiet zone the QR specification asks for around the code, in modules.
BORDER = 4


def qr_matrix(data: str) -> list[list[bool]]:
    """The code's modules (True = dark), quiet zone included. Error correction M: the usual
    choice for a code read off a screen, and what authenticator apps expect."""
    code = qrcode.QRCode(error_correction=qrcode.constants.ERROR_CORRECT_M, border=BORDER)
    code.add_data(data)
    code.make(fit=True)
    return [[bool(cell) for cell in row] for row in code.get_matrix()]


def dark_modules(matrix: list[list[bool]]) -> set[tuple[int, int]]:
    """The ``(x, y)`` of every dark module."""
    return {(x, y) for y, row in enumerate(matrix) for x, dark in enumerate(row) if dark}


def qr_svg(data: str, *, label: str = "QR code for your authenticator app") -> Markup:
    """``data`` as a QR code: an ``<svg>`` element, safe to put in a template as is."""
    matrix = qr_matrix(data)
    size = len(matrix)
    path = "".join(f"M{x},{y}h1v1h-1z" for x, y in sorted(dark_modules(matrix)))
    # A literal template: Markup.format escapes every value put into it.
    return Markup(
        '<svg class="qr" xmlns="http://www.w3.org/2000/svg" '
        'viewBox="0 0 {size} {size}" width="{px}" height="{px}" '
        'role="img" aria-label="{label}" shape-rendering="crispEdges">'
        '<rect width="{size}" height="{size}" fill="#fff"/>'
        '<path fill="#000" d="{path}"/></svg>'
    ).format(size=size, px=size * 5, label=label, path=path)


_MODULE = re.compile(r"M(\d+),(\d+)h1v1h-1z")


def modules_of(svg: str) -> set[tuple[int, int]]:
    """The dark modules an SVG from :func:`qr_svg` draws (what a test compares)."""
    found = re.search(r'<path fill="#000" d="([^"]*)"', svg)
    return set() if found is None else {(int(x), int(y)) for x, y in _MODULE.findall(found[1])}
