"""The message browser's decoding: text, JSON and hex, the automatic choice, the fallbacks
that say why, and the cut of long values."""

from __future__ import annotations

import json

import pytest

from riverlog.console.decode import Decoded, decode, hexdump


def test_null_is_shown_as_null_in_every_format() -> None:
    for fmt in ("auto", "text", "json", "hex"):
        assert decode(None, fmt) == Decoded("null", "null")


def test_auto_picks_json_for_objects_and_arrays_and_pretty_prints_them() -> None:
    decoded = decode(b'{"b":1,"a":[true,null]}')
    assert decoded.format == "json"
    assert json.loads(decoded.text) == {"b": 1, "a": [True, None]}
    assert decoded.text.startswith('{\n  "b": 1')  # key order kept, indented
    assert decode(b"[1,2]").format == "json"


def test_auto_shows_plain_utf8_as_text_even_when_it_is_a_json_scalar() -> None:
    assert decode(b"42") == Decoded("42", "text")
    assert decode("héllo\tworld\n".encode()) == Decoded("héllo\tworld\n", "text")


def test_auto_shows_binary_and_control_characters_as_hex() -> None:
    assert decode(b"\x00\xff").format == "hex"
    assert decode(b"abc\x07").format == "hex"
    assert decode(b"\x00\xff").note == ""  # auto chose it: nothing to explain


def test_json_asked_for_on_non_json_falls_back_and_says_so() -> None:
    assert decode(b"42", "json") == Decoded("42", "json")  # a JSON scalar is JSON when asked
    decoded = decode(b"not json", "json")
    assert decoded == Decoded("not json", "text", "not JSON: shown as text")
    decoded = decode(b"\xff\xfe", "json")
    assert decoded.format == "hex" and "not JSON" in decoded.note


def test_text_asked_for_keeps_json_raw_and_refuses_invalid_utf8() -> None:
    assert decode(b'{"a":1}', "text") == Decoded('{"a":1}', "text")
    decoded = decode(b"\xc3\x28", "text")
    assert decoded.format == "hex"
    assert decoded.note == "not printable UTF-8: shown as hex"


def test_hex_is_an_xxd_style_dump() -> None:
    data = bytes(range(20))
    lines = decode(data, "hex").text.splitlines()
    assert lines[0].startswith("00000000  00 01 02 03")
    assert lines[1].startswith("00000010  10 11 12 13")
    assert lines[1] == "00000010  10 11 12 13" + " " * 36 + "  ...."  # rows aligned
    assert hexdump(b"AB\x00") == "00000000  41 42 00  AB."  # one row: not padded


def test_long_values_are_cut_and_the_note_says_how_much() -> None:
    decoded = decode(b"x" * 100, "text", limit=10)
    assert decoded.text == "x" * 10
    assert decoded.note == "showing the first 10 of 100 bytes"
    cut_json = decode(b'{"a": "' + b"y" * 100 + b'"}', "json", limit=20)
    assert cut_json.format == "text"
    assert "cut values are not parsed" in cut_json.note
    assert "of 109 bytes" in cut_json.note


def test_a_cut_inside_a_multibyte_character_still_shows_text() -> None:
    decoded = decode("é".encode() * 10, "text", limit=5)
    assert decoded.format == "text" and decoded.text == "éé"


def test_unknown_format_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown format 'xml'"):
        decode(b"x", "xml")
