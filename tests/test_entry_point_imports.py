"""The entry points (``api``, ``portal``, ``oauth``, ``connector``) do not import each other
(DESIGN 2): what two of them share lives in ``paysign.http``, which imports none of them. Nor
do they, or ``http``, reach the adapters (``store``, ``custody``, ``chain``): they call use
cases in ``services``, and only the wiring (``app``, ``bootstrap``, ``cli``) builds adapters.

Read with :mod:`ast`, nothing is imported; imports inside functions count too (a deferred
import is still a dependency), and so do relative ones.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "paysign"
ENTRY_POINTS = ("api", "portal", "oauth", "connector")
SHARED = "http"
ADAPTERS = {"store", "custody", "chain"}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(name: str, source: str, *, is_package: bool = False) -> set[str]:
    # The package a relative import is resolved against: the module's own for __init__.py.
    package = name if is_package else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            found.add(target)
            # ``from paysign import api`` names the package in the alias, not the module.
            found.update(f"{target}.{alias.name}" for alias in node.names)
    return found


def package_of(module: str) -> str | None:
    parts = module.split(".")
    if len(parts) >= 2 and parts[0] == "paysign":
        return parts[1]
    return None


def offending_imports(own: str, forbidden: set[str]) -> list[str]:
    offences = []
    for path in sorted((PACKAGE / own).rglob("*.py")):
        name = module_name(path)
        source = path.read_text(encoding="utf-8")
        imported = imported_modules(name, source, is_package=path.name == "__init__.py")
        for target in sorted(imported):
            if package_of(target) in forbidden:
                offences.append(f"{name} imports {target}")
    return offences


@pytest.mark.parametrize("entry_point", ENTRY_POINTS)
def test_an_entry_point_imports_no_other(entry_point: str) -> None:
    others = set(ENTRY_POINTS) - {entry_point}
    assert offending_imports(entry_point, others) == []


def test_the_shared_plumbing_imports_no_entry_point() -> None:
    assert offending_imports(SHARED, set(ENTRY_POINTS)) == []


@pytest.mark.parametrize("entry_point", [*ENTRY_POINTS, SHARED])
def test_an_entry_point_reaches_no_adapter(entry_point: str) -> None:
    assert offending_imports(entry_point, ADAPTERS) == []


def test_services_import_no_entry_point() -> None:
    assert offending_imports("services", {*ENTRY_POINTS, SHARED}) == []


def test_the_check_sees_every_kind_of_import() -> None:
    source = (
        "import paysign.api.pages\n"
        "from paysign import oauth\n"
        "from ..connector.auth import challenge\n"
        "def later():\n"
        "    from paysign.api import signatures\n"
    )
    found = {package_of(target) for target in imported_modules("paysign.portal.example", source)}
    assert found >= {"api", "oauth", "connector"}
