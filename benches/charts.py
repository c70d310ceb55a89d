#!/usr/bin/env python3
"""Draws the benchmark results as SVG charts: for every workload, txvfs's time divided by
each baseline's time, measured in the same run, on a logarithmic axis (left of 1x: txvfs is
faster). Reads the CSV files the benchmarks write (``workload,system,role,seconds,per``;
``role`` is ``txvfs`` or ``baseline``) and writes one SVG per file. Plain Python, no plotting
library: the SVG is written by hand from the data, never drawn.

    benches/charts.py [--check] [RESULTS_DIR [CHARTS_DIR]]   (defaults benches/results, benches/charts)

``--check`` writes nothing and fails if a chart in CHARTS_DIR differs from what its data
gives (the tests run it, so a chart never drifts from its data).
"""

from __future__ import annotations

import csv
import html
import math
import pathlib
import sys
from typing import Dict, List, Tuple

HERE = pathlib.Path(__file__).resolve().parent
TITLES = {
    "core": "txvfs on RocksDB vs std::fs, raw RocksDB and SQLite (txvfs-bench --rounds 3)",
    "sqlite-speedtest1": "SQLite speedtest1: txvfs VFS vs SQLite's unix VFS (benches/sqlite/run.sh)",
    "sqlite-multidb": "SQLite, K attached databases per durable transaction (benches/sqlite/multidb.py)",
}
WIDTH, LEFT, RIGHT, BAR, GAP, HEAD = 860, 330, 40, 16, 4, 22


def ratios(path: pathlib.Path) -> List[Tuple[str, List[Tuple[str, float]]]]:
    """Per workload (in file order): ``(label, txvfs time / baseline time)`` for every pair of
    a txvfs system and a baseline measured on it."""
    rows: Dict[str, Dict[str, List[Tuple[str, float]]]] = {}
    with path.open(newline="") as f:
        for r in csv.DictReader(f):
            if r["role"] not in ("txvfs", "baseline"):
                raise ValueError("%s: role must be txvfs or baseline, not %r" % (path, r["role"]))
            seconds = float(r["seconds"])
            if not seconds > 0:
                raise ValueError(
                    "%s: %s/%s: time must be positive" % (path, r["workload"], r["system"])
                )
            rows.setdefault(r["workload"], {"txvfs": [], "baseline": []})[r["role"]].append(
                (r["system"], seconds)
            )
    out = []
    for workload, by_role in rows.items():
        several = len(by_role["txvfs"]) > 1
        pairs = []
        for tx_name, tx_s in by_role["txvfs"]:
            for base_name, base_s in by_role["baseline"]:
                label = ("%s vs %s" % (tx_name, base_name)) if several else ("vs " + base_name)
                pairs.append((label, tx_s / base_s))
        if pairs:
            out.append((workload, pairs))
    return out


def ticks(lo: float, hi: float) -> List[float]:
    """1-2-5 ticks covering [lo, hi]."""
    out = []
    for e in range(math.floor(math.log10(lo)) - 1, math.ceil(math.log10(hi)) + 1):
        for m in (1, 2, 5):
            v = m * 10.0**e
            if lo <= v <= hi:
                out.append(v)
    return out


def fmt(v: float) -> str:
    return ("%.2f" % v).rstrip("0").rstrip(".") if v < 10 else "%.0f" % v


def svg(title: str, data: List[Tuple[str, List[Tuple[str, float]]]]) -> str:
    """The chart: a block per workload, one bar per (txvfs, baseline) pair from 1x to the ratio."""
    values = [r for _, pairs in data for _, r in pairs]
    lo = min(values + [1.0]) / 2.5  # 1x is always on the axis; room for the labels
    hi = max(values + [1.0]) * 2.5
    plot_w = WIDTH - LEFT - RIGHT

    def x(v: float) -> float:
        return LEFT + plot_w * (math.log10(v) - math.log10(lo)) / (math.log10(hi) - math.log10(lo))

    height = HEAD * 3 + sum(HEAD + len(p) * (BAR + GAP) for _, p in data) + 30
    e = html.escape
    parts = [
        '<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" '
        'font-family="sans-serif" font-size="12">' % (WIDTH, height, WIDTH, height),
        '<rect width="100%" height="100%" fill="white"/>',
        '<text x="10" y="18" font-size="14" font-weight="bold">%s</text>' % e(title),
        '<text x="10" y="36" fill="#444">txvfs time / baseline time, same run, log scale; '
        "left of 1x (green): txvfs faster, right (orange): slower</text>",
    ]
    top, bottom = HEAD * 2 + 8, height - 24
    for t in ticks(lo, hi):
        parts.append(
            '<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s" stroke-width="%s"/>'
            % (x(t), top, x(t), bottom, "#000" if t == 1 else "#ddd", "1.5" if t == 1 else "1")
        )
        parts.append(
            '<text x="%.1f" y="%d" text-anchor="middle" fill="#444">%sx</text>'
            % (x(t), bottom + 16, fmt(t))
        )
    y = top + 6
    for workload, pairs in data:
        parts.append('<text x="10" y="%d" font-weight="bold">%s</text>' % (y + 14, e(workload)))
        y += HEAD
        for label, r in pairs:
            x0, x1 = sorted((x(1.0), x(r)))
            color = "#2e9e5b" if r < 1 else "#e8853d"
            parts.append(
                '<text x="%d" y="%d" text-anchor="end">%s</text>'
                % (LEFT - 8, y + BAR - 4, e(label))
            )
            parts.append(
                '<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s"/>'
                % (x0, y, max(x1 - x0, 1.0), BAR, color)
            )
            tx, anchor = (x1 + 4, "start") if r >= 1 else (x0 - 4, "end")
            parts.append(
                '<text x="%.1f" y="%d" text-anchor="%s">%sx</text>'
                % (tx, y + BAR - 4, anchor, fmt(r))
            )
            y += BAR + GAP
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def main(argv: List[str]) -> int:
    check = "--check" in argv
    args = [a for a in argv if a != "--check"]
    results = pathlib.Path(args[0]) if args else HERE / "results"
    charts = pathlib.Path(args[1]) if len(args) > 1 else HERE / "charts"
    files = sorted(results.glob("*.csv"))
    if not files:
        print("no results (*.csv) in %s" % results, file=sys.stderr)
        return 1
    stale = []
    for f in files:
        text = svg(TITLES.get(f.stem, f.stem), ratios(f))
        out = charts / (f.stem + ".svg")
        if check:
            if not out.exists() or out.read_text() != text:
                stale.append(str(out))
            continue
        charts.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
        print(out)
    if stale:
        print(
            "charts differ from their data (run benches/charts.py): " + ", ".join(stale),
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
