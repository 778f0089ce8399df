"""The storage node's incarnation grows across restarts even when the wall clock went back."""

from __future__ import annotations

from pathlib import Path

from riverlog.services.storage.log.incarnation import INCARNATION_FILE, next_incarnation


def test_the_clock_when_it_moves_forward(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    for d in dirs:
        d.mkdir()
    assert next_incarnation(dirs, 1_000) == 1_000
    assert next_incarnation(dirs, 5_000) == 5_000
    assert all((d / INCARNATION_FILE).read_text().strip() == "5000" for d in dirs)


def test_never_below_a_recorded_one_when_the_clock_went_back(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (b / INCARNATION_FILE).write_text("9000\n")
    (a / INCARNATION_FILE).write_text("garbage\n")  # unreadable: ignored
    assert next_incarnation([a, b], 2_000) == 9_001  # stepped back 10 minutes, say
    assert next_incarnation([a, b], 2_500) == 9_002
    assert next_incarnation([tmp_path / "missing"], 7) == 7  # cannot record: still answers
