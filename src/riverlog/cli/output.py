"""How commands print state: aligned text tables and Kafka-style `key: value` lines for people,
one JSON document (`--json`) for scripts. Everything goes to stdout; errors go elsewhere
(`errors.py`). Formatting functions return strings so tests can check them without a terminal.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TextIO


def to_json(document: Any) -> str:
    """Stable, readable JSON (sorted keys are not used: field order is the reading order)."""
    return json.dumps(document, indent=2, default=str)


def emit(text: str, out: TextIO | None = None) -> None:
    stream = out or sys.stdout
    stream.write(text if text.endswith("\n") or not text else text + "\n")
    stream.flush()


def cell(value: Any) -> str:
    """How a value shows in a table: lists comma-joined, None as '-', booleans as yes/no."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list | tuple | set | frozenset):
        return ",".join(str(v) for v in value) if value else "-"
    return str(value)


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """Left-aligned columns separated by two spaces; headers upper-cased."""
    cells = [[cell(v) for v in row] for row in rows]
    titles = [h.upper() for h in headers]
    widths = [len(t) for t in titles]
    for row in cells:
        for i, text in enumerate(row):
            widths[i] = max(widths[i], len(text))
    lines = ["  ".join(t.ljust(w) for t, w in zip(titles, widths, strict=True)).rstrip()]
    for row in cells:
        lines.append("  ".join(t.ljust(w) for t, w in zip(row, widths, strict=True)).rstrip())
    return "\n".join(lines)


def fields(pairs: Mapping[str, Any], indent: str = "") -> str:
    """Kafka's describe style: `Key: value` pairs separated by tabs on one line."""
    return (indent + "\t".join(f"{k}: {cell(v)}" for k, v in pairs.items())).rstrip()


def configs_text(configs: Mapping[str, str]) -> str:
    """`k=v,k=v` as Kafka prints a topic's configs."""
    return ",".join(f"{k}={v}" for k, v in sorted(configs.items()))
