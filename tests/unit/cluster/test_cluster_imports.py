"""The launcher starts services by module name and never imports them: `riverlog.cluster`
imports only `riverlog.common`, `riverlog.v1` and its own modules (checked on the source, so
it holds whatever import-linter is configured with)."""

from __future__ import annotations

import ast
from pathlib import Path

import riverlog.cluster

ALLOWED = ("riverlog.common", "riverlog.v1", "riverlog.cluster")


def riverlog_imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
    return {name for name in found if name == "riverlog" or name.startswith("riverlog.")}


def test_the_launcher_imports_no_service_client_or_cli() -> None:
    package = Path(riverlog.cluster.__file__).parent
    offending = {
        f"{path.name}: {name}"
        for path in package.glob("*.py")
        for name in riverlog_imports(path)
        if not name.startswith(ALLOWED)
    }
    assert not offending
