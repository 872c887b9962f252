#!/usr/bin/env python3
"""Summarise gpuxfer-bench JSON (and torch_baseline.py JSON) as Markdown, and check regression floors.

    perf_report.py bench.json [--torch torch.json] [--markdown OUT.md] [--floors [FLOORS.json]]

--floors exits 1 when a headline ratio falls below its floor (benchmarks/data/floors.json when no file is
named): gpu-check.sh uses it so that a performance regression fails the run at once.
"""
import argparse
import json
import os
import sys

# benchmarks/data/floors.json, found from this script's place (benchmarks/python/).
DEFAULT_FLOORS = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "data", "floors.json")

# gpuxfer op -> the PyTorch way of doing the same thing (torch_baseline.py op names)
TORCH_FOR = {
    "gather": ["torch_gather", "torch_pinned_copy"],
    "gather_pageable": ["torch_cpu"],
    "gather_to_device": ["torch_gather_to_device"],
    "copy_peer": ["torch_to_peer"],
    "bcast_pinned": ["torch_bcast_pinned"],
    "bcast_pageable": ["torch_bcast_pageable"],
    "bcast_device": ["torch_bcast_device"],
}


def gib(size):
    return f"{size / 2**20:g} MiB" if size >= 2**20 else f"{size / 2**10:g} KiB"


def result(results, op, size):
    for r in results:
        if r["op"] == op and r["size"] == size:
            return r
    return None


def markdown(bench, torch):
    head = bench["headline"]
    size = head["size"]
    tres = torch["results"] if torch else []
    lines = [
        f"Headline at {gib(size)} per device.",
        "",
        f"Convention: {bench.get('convention', 'see the JSON')}",
        "",
        "| operation | gpuxfer GB/s | ceiling | ceiling GB/s | ratio | target | met | PyTorch GB/s | gpuxfer / PyTorch |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for e in head["entries"]:
        op = e["op"]
        torch_cells = []
        speedups = []
        for t in TORCH_FOR.get(op, []):
            r = result(tres, t, e["size"])
            if r:
                torch_cells.append(f"{t}: {r['gbps']:.2f}")
                speedups.append(f"{e['gbps'] / r['gbps']:.1f} x" if r["gbps"] else "-")
        target = "-" if e.get("target") is None else (
            f"time <= {e['time_target']:.2f} x" if e.get("time_target") else f">= {e['target']:.2f}")
        ratio = f"{e['ratio']:.3f}" + (f" (time {e['time_x']:.2f} x)" if e.get("time_x") else "")
        met = "-" if e.get("met") is None else ("yes" if e["met"] else "**no**")
        lines.append(f"| {op} | {e['gbps']:.2f} | {e['vs']} | {e['ceiling']:.2f} | {ratio} | {target} | {met} | "
                     f"{'; '.join(torch_cells) or '-'} | {'; '.join(speedups) or '-'} |")
    lines += ["", "Ceilings measured in the same run:", "", "| ceiling | size | GB/s | time (us) |", "|---|---|---|---|"]
    for name, c in bench["ceilings"].items():
        rows = c["rows"]
        row = next((r for r in rows if r["size"] == size), rows[-1])
        lines.append(f"| {name} | {gib(row['size'])} | {row['gbps']:.2f} | {row['time_us']:.2f} |")
    return "\n".join(lines) + "\n"


def growth(bench, ops):
    """time (us) against size for each op: the cost-growth table."""
    sizes = sorted({r["size"] for r in bench["results"] if r["op"] in ops})
    lines = ["| operation | " + " | ".join(gib(s) for s in sizes) + " |", "|---" * (len(sizes) + 1) + "|"]
    for op in ops:
        cells = []
        for s in sizes:
            r = result(bench["results"], op, s)
            cells.append(f"{r['time_us']:.1f} us ({r['gbps']:.1f} GB/s)" if r else "-")
        lines.append(f"| {op} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def check_floors(bench, floors):
    ratios = bench["headline"]["ratios"]
    bad = []
    for op, floor in floors.get("ratio_floors", {}).items():
        if op in ratios and ratios[op] < floor:
            bad.append(f"{op}: ratio {ratios[op]:.3f} < floor {floor}")
    for op, ceiling in floors.get("time_ceilings", {}).items():
        if op in ratios and ratios[op] > 0 and 1 / ratios[op] > ceiling:
            bad.append(f"{op}: time {1 / ratios[op]:.2f} x > {ceiling} x")
    size = bench["headline"]["size"]
    for op, floor in floors.get("bound_floors", {}).items():
        r = result(bench["results"], op, size)
        if r and r.get("bound_op"):
            bound = next((x for x in bench["ceilings"][r["bound_op"]]["rows"] if x["size"] == size), None)
            if bound and r["gbps"] / bound["gbps"] < floor:
                bad.append(f"{op}: {r['gbps']:.2f} GB/s is {r['gbps'] / bound['gbps']:.2f} x its host memcpy bound < {floor}")
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("bench")
    ap.add_argument("--torch")
    ap.add_argument("--markdown")
    ap.add_argument("--growth", help="comma-separated ops for a time-against-size table")
    ap.add_argument("--floors", nargs="?", const=DEFAULT_FLOORS,
                    help="check the regression floors of this file (default: benchmarks/data/floors.json)")
    args = ap.parse_args()
    bench = json.load(open(args.bench))
    torch = json.load(open(args.torch)) if args.torch else None
    text = markdown(bench, torch)
    if args.growth:
        text += "\n" + growth(bench, args.growth.split(","))
    if args.markdown:
        open(args.markdown, "w").write(text)
    elif not args.floors:
        sys.stdout.write(text)
    if args.floors:
        bad = check_floors(bench, json.load(open(args.floors)))
        for b in bad:
            print(f"perf floor: {b}")
        print(f"perf floors: {'FAILED' if bad else 'OK'} ({len(bad)} below)")
        return 1 if bad else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
