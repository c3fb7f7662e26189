#!/usr/bin/env python3
"""Draws the throughput of every backend on every workload from `localstore bench --format json`.

    localstore bench --format json > bench.json
    python3 scripts/bench_chart.py bench.json -o docs/benchmarks.svg

One group of horizontal bars per workload, one bar per backend, operations per second on a logarithmic
axis (the workloads span five orders of magnitude). Baselines are drawn hatched. Standard library only.

    python3 scripts/bench_chart.py bench.json --markdown                     # results as a Markdown table
    python3 scripts/bench_chart.py bench-100k.json --growth bench-10k.json    # cost growth between two sizes
"""

import argparse
import json
import math
import sys
from xml.sax.saxutils import escape

# Colour per backend; unknown backends get the spare colours in order.
COLOURS = {
    "memory": "#4c78a8",
    "sqlite": "#f58518",
    "sqlite-c": "#f58518",
    "sqlcipher": "#e45756",
    "lmdb": "#54a24b",
    "lmdb-c": "#54a24b",
    "grdb": "#b279a2",
}
SPARE = ["#72b7b2", "#eeca3b", "#9d755d", "#bab0ac", "#ff9da6"]


def colour_of(backend, assigned):
    if backend in COLOURS:
        return COLOURS[backend]
    if backend not in assigned:
        assigned[backend] = SPARE[len(assigned) % len(SPARE)]
    return assigned[backend]


def is_baseline(backend):
    return backend.endswith("-c")


def fmt_rate(v):
    if v >= 1e6:
        return f"{v / 1e6:.1f}M"
    if v >= 1e3:
        return f"{v / 1e3:.1f}k"
    if v >= 10:
        return f"{v:.0f}"
    return f"{v:.1f}"


def render(report, title=None):
    results = [r for r in report["results"] if r.get("opsPerSecond", 0) > 0]
    if not results:
        raise SystemExit("bench_chart: the report has no results")
    workloads, backends = [], []
    for r in results:
        if r["workload"] not in workloads:
            workloads.append(r["workload"])
        if r["backend"] not in backends:
            backends.append(r["backend"])
    # Backends first, then their baselines, so each engine's pair sits together in the legend.
    order = {b: i for i, b in enumerate(backends)}
    backends = sorted(backends, key=lambda b: (is_baseline(b), order[b]))
    rate = {(r["workload"], r["backend"]): r["opsPerSecond"] for r in results}

    lo = 10 ** math.floor(math.log10(min(rate.values())))
    hi = 10 ** math.ceil(math.log10(max(rate.values())))
    if hi <= lo:
        hi = lo * 10

    bar_h, bar_gap, group_gap = 11, 2, 14
    left, right, top = 130, 70, 60
    plot_w = 640
    group_h = len(backends) * (bar_h + bar_gap) - bar_gap
    plot_h = len(workloads) * (group_h + group_gap) - group_gap
    legend_h = 22 * math.ceil(len(backends) / 4)
    width = left + plot_w + right
    height = top + plot_h + 40 + legend_h + 20

    def x(v):
        return left + plot_w * (math.log10(v) - math.log10(lo)) / (math.log10(hi) - math.log10(lo))

    env = report.get("environment", {})
    subtitle = f"{report.get('records', '?'):,} records" if isinstance(report.get("records"), int) else ""
    details = [f"{k} {env[k]}" for k in ("build", "swift", "sqlite", "sqlcipher", "lmdb", "cpus") if k in env]
    if details:
        subtitle += " · " + " · ".join(details)

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="Helvetica, Arial, sans-serif" font-size="11">',
        "<defs>",
        '<pattern id="hatch" patternUnits="userSpaceOnUse" width="5" height="5" patternTransform="rotate(45)">'
        '<line x1="0" y1="0" x2="0" y2="5" stroke="white" stroke-width="2"/></pattern>',
        "</defs>",
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{left}" y="22" font-size="15" font-weight="bold">'
        f"{escape(title or 'LocalStore throughput per workload (operations per second, log scale)')}</text>",
        f'<text x="{left}" y="40" fill="#555">{escape(subtitle)}</text>',
    ]
    # Decade grid lines and labels.
    decade = lo
    while decade <= hi * 1.0001:
        gx = x(decade)
        out.append(f'<line x1="{gx:.1f}" y1="{top - 6}" x2="{gx:.1f}" y2="{top + plot_h}" stroke="#ddd"/>')
        out.append(
            f'<text x="{gx:.1f}" y="{top + plot_h + 16}" text-anchor="middle" fill="#555">{fmt_rate(decade)}</text>'
        )
        decade *= 10
    out.append(
        f'<text x="{left + plot_w / 2:.1f}" y="{top + plot_h + 32}" text-anchor="middle" fill="#555">'
        "operations per second (log scale; longer is faster)</text>"
    )

    assigned = {}
    for g, w in enumerate(workloads):
        gy = top + g * (group_h + group_gap)
        out.append(
            f'<text x="{left - 10}" y="{gy + group_h / 2 + 4:.1f}" text-anchor="end" font-weight="bold">{escape(w)}</text>'
        )
        for b_i, b in enumerate(backends):
            v = rate.get((w, b))
            if v is None:
                continue
            by = gy + b_i * (bar_h + bar_gap)
            bw = max(1.0, x(v) - left)
            c = colour_of(b, assigned)
            out.append(
                f'<rect x="{left}" y="{by}" width="{bw:.1f}" height="{bar_h}" fill="{c}">'
                f"<title>{escape(b)} {escape(w)}: {v:,.0f} ops/s</title></rect>"
            )
            if is_baseline(b):
                out.append(f'<rect x="{left}" y="{by}" width="{bw:.1f}" height="{bar_h}" fill="url(#hatch)"/>')
            out.append(
                f'<text x="{left + bw + 4:.1f}" y="{by + bar_h - 2}" font-size="9" fill="#333">{fmt_rate(v)}</text>'
            )
    out.append(f'<line x1="{left}" y1="{top - 6}" x2="{left}" y2="{top + plot_h}" stroke="#333"/>')

    ly = top + plot_h + 50
    for i, b in enumerate(backends):
        lx = left + (i % 4) * 160
        row_y = ly + (i // 4) * 22
        c = colour_of(b, assigned)
        out.append(f'<rect x="{lx}" y="{row_y - 10}" width="14" height="12" fill="{c}"/>')
        if is_baseline(b):
            out.append(f'<rect x="{lx}" y="{row_y - 10}" width="14" height="12" fill="url(#hatch)"/>')
        label = b + (" (C-API baseline)" if is_baseline(b) else "")
        out.append(f'<text x="{lx + 20}" y="{row_y}">{escape(label)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def workloads_and_backends(report):
    workloads, backends = [], []
    for r in report["results"]:
        if r["workload"] not in workloads:
            workloads.append(r["workload"])
        if r["backend"] not in backends:
            backends.append(r["backend"])
    return workloads, backends


def markdown(report):
    """One row per workload, one column per backend: ops/s, and × its baseline where there is one."""
    workloads, backends = workloads_and_backends(report)
    by = {(r["workload"], r["backend"]): r for r in report["results"]}
    lines = ["| workload | " + " | ".join(backends) + " |", "| --- |" + " ---: |" * len(backends)]
    for w in workloads:
        cells = []
        for b in backends:
            r = by.get((w, b))
            if r is None:
                cells.append("–")
                continue
            cell = f"{r['opsPerSecond']:,.0f}"
            if r.get("ratioToBaseline") is not None:
                cell += f" ({r['ratioToBaseline']:.2f}×)"
            cells.append(cell)
        lines.append(f"| {w} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def growth(large, small):
    """Per workload and backend: how much one operation costs at the larger size relative to the smaller."""
    workloads, backends = workloads_and_backends(large)
    big = {(r["workload"], r["backend"]): r for r in large["results"]}
    little = {(r["workload"], r["backend"]): r for r in small["results"]}
    lines = [
        f"| cost per operation, {large['records']:,} ÷ {small['records']:,} records | " + " | ".join(backends) + " |",
        "| --- |" + " ---: |" * len(backends),
    ]
    for w in workloads:
        cells = []
        for b in backends:
            a, c = big.get((w, b)), little.get((w, b))
            if not a or not c or a["opsPerSecond"] <= 0 or c["opsPerSecond"] <= 0:
                cells.append("–")
            else:
                cells.append(f"{c['opsPerSecond'] / a['opsPerSecond']:.2f}×")
        lines.append(f"| {w} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def load(path):
    if path == "-":
        return json.load(sys.stdin)
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", nargs="?", default="-", help="the JSON report (default: standard input)")
    parser.add_argument("-o", "--output", default="-", help="the SVG file to write (default: standard output)")
    parser.add_argument("--title", help="the chart's title")
    parser.add_argument("--markdown", action="store_true", help="print the results as a Markdown table instead")
    parser.add_argument("--growth", metavar="SMALLER.json", help="print the cost growth from this smaller run instead")
    args = parser.parse_args(argv)
    report = load(args.report)
    if args.markdown or args.growth:
        text = growth(report, load(args.growth)) if args.growth else markdown(report)
        if args.output == "-":
            sys.stdout.write(text)
        else:
            with open(args.output, "w", encoding="utf-8") as f:
                f.write(text)
        return
    svg = render(report, args.title)
    if args.output == "-":
        sys.stdout.write(svg)
    else:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(svg)


if __name__ == "__main__":
    main(sys.argv[1:])
