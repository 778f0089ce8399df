"""A record's key, value or header value shown as text, JSON or hex, as a message browser
offers them (Kafka UI's "string / JSON / hex" serdes). Pure: bytes in, display text out.

`auto` picks JSON when the bytes parse as a JSON object or array, text when they are valid
UTF-8 without control characters (tabs and newlines aside), else hex. An explicit format that
does not fit the bytes (JSON asked for on non-JSON bytes, text on invalid UTF-8) falls back to
the next that does and says so in `note`, rather than showing mangled characters. Values
longer than `limit` bytes are cut, and the note says how much is hidden.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Final

FORMATS: Final = ("auto", "text", "json", "hex")
DEFAULT_LIMIT: Final = 16 * 1024
HEX_ROW: Final = 16


@dataclass(frozen=True, slots=True)
class Decoded:
    """`format`: what `text` is (null, text, json or hex); `note`: why it is not the format
    asked for, or that the value was cut; empty otherwise."""

    text: str
    format: str
    note: str = ""


def _utf8(data: bytes) -> str | None:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _printable(text: str) -> bool:
    return all(ch.isprintable() or ch in "\t\n\r" for ch in text)


def _json(text: str | None) -> str | None:
    """Pretty JSON when `text` is a JSON document (any JSON value), else None."""
    if text is None or not text.strip():
        return None
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except ValueError:
        return None


def hexdump(data: bytes) -> str:
    """xxd's layout: offset, 16 bytes in hex, the printable ASCII of them (a dump of one row
    is not padded to the full width, so short keys stay narrow)."""
    lines = []
    width = HEX_ROW * 3 - 1 if len(data) > HEX_ROW else 0
    for start in range(0, len(data), HEX_ROW):
        row = data[start : start + HEX_ROW]
        hexes = " ".join(f"{b:02x}" for b in row)
        ascii_ = "".join(chr(b) if 32 <= b < 127 else "." for b in row)
        lines.append(f"{start:08x}  {hexes:<{width}}  {ascii_}")
    return "\n".join(lines)


def decode(data: bytes | None, fmt: str = "auto", limit: int = DEFAULT_LIMIT) -> Decoded:
    """`data` in format `fmt` (one of FORMATS); ValueError for an unknown format."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}: one of {', '.join(FORMATS)}")
    if data is None:
        return Decoded("null", "null")
    cut = ""
    if len(data) > limit:
        cut = f"showing the first {limit} of {len(data)} bytes"
        data = data[:limit]
    decoded = _decode(data, fmt, whole=not cut)
    note = "; ".join(n for n in (decoded.note, cut) if n)
    return Decoded(decoded.text, decoded.format, note)


def _decode(data: bytes, fmt: str, whole: bool) -> Decoded:
    if fmt == "hex":
        return Decoded(hexdump(data), "hex")
    text = _utf8(data) if whole else data.decode("utf-8", errors="ignore")
    if fmt in ("auto", "json"):
        pretty = _json(text) if whole else None
        if pretty is not None and (fmt == "json" or pretty.lstrip()[:1] in ("{", "[")):
            return Decoded(pretty, "json")
        if fmt == "json":
            fallback = _decode(data, "text", whole)
            reason = "cut values are not parsed" if not whole else "not JSON"
            return Decoded(fallback.text, fallback.format, f"{reason}: shown as {fallback.format}")
    if text is not None and _printable(text):
        return Decoded(text, "text")
    note = "" if fmt == "auto" else "not printable UTF-8: shown as hex"
    return Decoded(hexdump(data), "hex", note)
