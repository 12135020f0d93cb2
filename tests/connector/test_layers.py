"""The connector is an entry point: it reads sellers' 402s through ``protocol/``, not through
the buyer SDK (DESIGN §2: an entry point does not import another one's code). Imports inside
functions count too."""

from __future__ import annotations

import ast
from pathlib import Path

CONNECTOR = Path(__file__).resolve().parents[2] / "src" / "paysign" / "connector"


def test_the_connector_does_not_import_the_buyer_sdk() -> None:
    found = []
    for path in sorted(CONNECTOR.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [f"{node.module}.{alias.name}" for alias in node.names]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            found += [
                f"{path.name}: {name}"
                for name in names
                if name == "paysign.client" or name.startswith("paysign.client.")
            ]
    assert found == []
