"""Quick benchmarks of HEAD against an earlier commit, printed as ratios: for "the benchmarks
show no regression" without reading two runs' numbers side by side.

Both revisions are checked out as clean git worktrees (HEAD's too, so uncommitted edits in the
working tree are not measured), the C speedups are built in each, and every benchmark runs
from its own revision's `bench/` with that revision's `src/` first on PYTHONPATH, under `nice`,
alternately base then head, `--repeat` times. Lines are matched by their text with the numbers
taken out; each number that differs is shown as `base -> head (head/base)`, the median over
the repeats. A ratio above 1 is better for a rate (records/s, MB/s) and worse for a time
(us, ms, s): read the unit next to it.

    .venv/bin/python bench/compare.py BASE_REV [--repeat N] [--spread]
        [--bench "codec_bench.py --records 9"]

`--spread` also prints, under each line that differs, every side's lowest and highest figure
over the repeats (on a shared machine the range says more than the median).
    make bench-compare BASE=<rev> [COMPARE_ARGS="--repeat 3"]

The default set is the in-process benchmarks at small sizes (seconds each, one core). Cluster
benchmarks can be named with --bench (e.g. "fetch_bench.py --mb 20 --rounds 1"); each run
starts and stops its own cluster.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
QUICK = (
    "codec_bench.py --records 50000 --codecs none,lz4",
    "storage_log_bench.py --records 100000",
    "compaction_bench.py --mb 10 --keys 1000",
)
_NUMBER = re.compile(r"-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?")


def _git(*args: str, cwd: Path = REPO) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout.strip()


def _checkout(rev: str, into: Path) -> str:
    """A detached worktree of `rev` at `into`, its C speedups built; the commit it is."""
    commit = _git("rev-parse", "--verify", f"{rev}^{{commit}}")
    _git("worktree", "add", "--detach", str(into), commit)
    if (into / "setup.py").exists():
        built = subprocess.run(
            [sys.executable, "setup.py", "build_ext", "--inplace"],
            cwd=into,
            capture_output=True,
            text=True,
        )
        if built.returncode != 0:
            print(f"warning: {rev}: C speedups not built:\n{built.stderr[-2000:]}", file=sys.stderr)
    return commit


def _run(tree: Path, bench: str) -> list[str] | None:
    """The output lines of one benchmark in `tree`; None when it is not there or failed."""
    script, *args = bench.split()
    path = tree / "bench" / script
    if not path.exists():
        return None
    env = {**os.environ, "PYTHONPATH": str(tree / "src")}
    done = subprocess.run(
        ["nice", "-n", "10", sys.executable, str(path), *args],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        print(f"warning: {bench} failed in {tree}:\n{done.stderr[-2000:]}", file=sys.stderr)
        return None
    return [line for line in done.stdout.splitlines() if line.strip()]


Runs = dict[tuple[str, int], tuple[str, list[float]]]


def _keyed(lines: list[str]) -> Runs:
    """Each line's text with `#` for its numbers and the numbers, keyed by (that text with
    its spacing collapsed, how often it came before), so aligned columns of different widths
    and repeated labels still pair up in order."""
    seen: dict[str, int] = defaultdict(int)
    out = {}
    for line in lines:
        label = _NUMBER.sub("#", line)
        key = " ".join(label.split())
        numbers = [float(n.replace(",", "")) for n in _NUMBER.findall(line)]
        out[(key, seen[key])] = (label, numbers)
        seen[key] += 1
    return out


def _median(runs: list[Runs]) -> Runs:
    """Per line, the median of each number over the runs that printed the line."""
    first = runs[0]
    keys = [k for k in first if all(k in r for r in runs)]
    return {
        k: (
            first[k][0],
            [statistics.median(col) for col in zip(*(r[k][1] for r in runs), strict=True)],
        )
        for k in keys
    }


def _spread(runs: list[Runs]) -> dict[tuple[str, int], list[tuple[float, float]]]:
    """Per line printed by every run, each number's (lowest, highest) over the runs."""
    keys = [k for k in runs[0] if all(k in r for r in runs)]
    return {
        k: [(min(col), max(col)) for col in zip(*(r[k][1] for r in runs), strict=True)]
        for k in keys
    }


def spread_line(label: str, ranges: list[tuple[float, float]]) -> str:
    """`label` with each `#` replaced by `lowest..highest` (one figure when they are equal)."""
    parts = label.split("#")
    out = [parts[0]]
    for (lo, hi), rest in zip(ranges, parts[1:], strict=True):
        out.append(_fmt(lo) if lo == hi else f"{_fmt(lo)}..{_fmt(hi)}")
        out.append(rest)
    return "".join(out)


def _fmt(x: float) -> str:
    return f"{x:,.0f}" if abs(x) >= 100 or x == int(x) else f"{x:.3g}"


def compare_line(label: str, base: list[float], head: list[float]) -> str:
    """`label` with each `#` replaced by its number, or by `base -> head (ratio)` where the
    two differ."""
    parts = label.split("#")
    out = [parts[0]]
    for b, h, rest in zip(base, head, parts[1:], strict=True):
        if b == h:
            out.append(_fmt(h))
        else:
            ratio = f"{h / b:.2f}x" if b else "n/a"
            out.append(f"{_fmt(b)} -> {_fmt(h)} ({ratio})")
        out.append(rest)
    return "".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base", help="the earlier commit (any git revision)")
    parser.add_argument("--head", default="HEAD", help="the newer revision (default HEAD)")
    parser.add_argument("--repeat", type=int, default=1, help="runs per side; medians compared")
    parser.add_argument(
        "--spread", action="store_true", help="also print each side's range over the repeats"
    )
    parser.add_argument(
        "--bench",
        action="append",
        help="a bench/ script and its arguments, quoted; repeatable (default: the quick set)",
    )
    args = parser.parse_args()
    benches = args.bench or list(QUICK)
    work = Path(tempfile.mkdtemp(prefix="riverlog-compare-"))
    trees = {"base": work / "base", "head": work / "head"}
    try:
        commits = {
            side: _checkout(rev, trees[side])
            for side, rev in (("base", args.base), ("head", args.head))
        }
        print(
            f"base {commits['base'][:12]} ({args.base}), head {commits['head'][:12]} ({args.head})"
        )
        for bench in benches:
            print(f"== {bench}")
            runs: dict[str, list[Runs]] = {"base": [], "head": []}
            for _ in range(max(args.repeat, 1)):
                for side in ("base", "head"):
                    lines = _run(trees[side], bench)
                    if lines is not None:
                        runs[side].append(_keyed(lines))
            if not runs["base"] or not runs["head"]:
                missing = [side for side in runs if not runs[side]]
                print(f"   not compared: no successful run on {', '.join(missing)}")
                continue
            base, head = _median(runs["base"]), _median(runs["head"])
            spreads = {side: _spread(runs[side]) for side in runs}
            for key, (label, numbers) in head.items():
                if key in base:
                    print("   " + compare_line(label, base[key][1], numbers))
                    if args.spread and base[key][1] != numbers:
                        for side in ("base", "head"):
                            print(f"      {side}: " + spread_line(label, spreads[side][key]))
                else:
                    print(f"   head only: {label}")
            for key in base.keys() - head.keys():
                print(f"   base only: {base[key][0]}")
    finally:
        for tree in trees.values():
            if tree.exists():
                subprocess.run(
                    ["git", "worktree", "remove", "--force", str(tree)],
                    cwd=REPO,
                    capture_output=True,
                )
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
