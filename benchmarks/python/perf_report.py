#!/usr/bin/env python3
"""Summarise gpuxfer-bench JSON (and torch_baseline.py JSON) as Markdown, and check regression floors.

    perf_report.py bench.json [--torch torch.json] [--markdown OUT.md] [--floors [FLOORS.json]]
    perf_report.py bench.json --agree other.json [other.json ...] [--within 0.05]

--floors exits 1 when a headline ratio falls below its floor (benchmarks/data/floors.json when no file is
named): gpu-check.sh uses it so that a performance regression fails the run at once. A floor may depend on
the device count the bench ran with (runner.devices; see floor_for); an operation the bench waived (it
cannot run here, e.g. a 2-GPU copy on one GPU) is reported as waived, never as a failure.

--agree exits 1 when the runs disagree: a headline row with a target whose ratios over the runs spread by
more than --within of their median (gpu-check.sh --bench with GPUXFER_BENCH_RUNS=3). Tested by
test_perf_report.py (python3 -m unittest discover -s benchmarks/python).
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


def num(value, digits=2):
    """A number for a table cell: "-" where the bench wrote null (waived, failed, no ceiling)."""
    return "-" if value is None else f"{value:.{digits}f}"


def waivers(bench):
    """op -> why, for every operation the bench waived."""
    return {w["op"]: w.get("why", "") for w in bench.get("waived", [])}


def markdown(bench, torch):
    head = bench["headline"]
    size = head["size"]
    tres = torch["results"] if torch else []
    waived = waivers(bench)
    lines = [
        f"Headline at {gib(size)} per device, {devices(bench)} device(s).",
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
                speedups.append(f"{e['gbps'] / r['gbps']:.1f} x" if r["gbps"] and e.get("gbps") else "-")
        target = "-" if e.get("target") is None else (
            f"time <= {e['time_target']:.2f} x" if e.get("time_target") else f">= {e['target']:.2f}")
        if e.get("ratio") is not None:
            ratio = f"{e['ratio']:.3f}" + (f" (time {e['time_x']:.2f} x)" if e.get("time_x") else "")
        else:
            ratio = f"waived: {waived[op]}" if op in waived else "no result"
        met = "-" if e.get("met") is None else ("yes" if e["met"] else "**no**")
        lines.append(f"| {op} | {num(e.get('gbps'))} | {e['vs']} | {num(e.get('ceiling'))} | {ratio} | {target} | "
                     f"{met} | {'; '.join(torch_cells) or '-'} | {'; '.join(speedups) or '-'} |")
    lines += ["", "Ceilings measured in the same run:", "", "| ceiling | size | GB/s | time (us) |", "|---|---|---|---|"]
    for name, c in bench["ceilings"].items():
        rows = c["rows"]
        row = next((r for r in rows if r["size"] == size), rows[-1])
        lines.append(f"| {name} | {gib(row['size'])} | {row['gbps']:.2f} | {row['time_us']:.2f} |")
    if waived:
        lines += ["", "Waived (cannot run here): " + "; ".join(f"{op} ({why})" for op, why in waived.items())]
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


def devices(bench):
    """How many devices the bench ran with (runner.devices; 1 for a file without it)."""
    return int(bench.get("runner", {}).get("devices") or 1)


def floor_for(value, count):
    """The floor that applies on @count devices: a number applies everywhere; an object keyed by device
    count gives the entry with the largest count not above @count (None: no floor on that many)."""
    if isinstance(value, dict):
        keys = [int(k) for k in value if int(k) <= count]
        return value[str(max(keys))] if keys else None
    return value


def check_floors(bench, floors):
    """(failures, notes): a failure is a ratio below its floor, or an op that ran and has no result; a
    note is an op the bench waived, or one without a floor on this many devices."""
    count = devices(bench)
    ratios = bench["headline"]["ratios"]
    waived = waivers(bench)
    # An op whose ceiling was waived has no ratio either: waived with it ("min(a, b)" names several).
    for e in bench["headline"]["entries"]:
        vs = [c.strip() for c in e.get("vs", "").removeprefix("min(").removesuffix(")").split(",")]
        lost = [c for c in vs if c in waived]
        if e.get("ratio") is None and e["op"] not in waived and lost:
            waived[e["op"]] = f"its ceiling {lost[0]} was waived: {waived[lost[0]]}"
    size = bench["headline"]["size"]
    bad, notes = [], []

    def applicable(kind, op, value):
        floor = floor_for(value, count)
        if op in waived:
            notes.append(f"{op}: waived ({waived[op]})")
        elif floor is None:
            notes.append(f"{op}: no {kind} on {count} device(s)")
        else:
            return floor
        return None

    for op, value in floors.get("ratio_floors", {}).items():
        if op not in ratios or (floor := applicable("floor", op, value)) is None:
            continue
        if ratios[op] is None:
            bad.append(f"{op}: no result (floor {floor})")
        elif ratios[op] < floor:
            bad.append(f"{op}: ratio {ratios[op]:.3f} < floor {floor}")
    for op, value in floors.get("time_ceilings", {}).items():
        if op not in ratios or (ceiling := applicable("time ceiling", op, value)) is None:
            continue
        if not ratios[op]:
            bad.append(f"{op}: no result (time ceiling {ceiling} x)")
        elif 1 / ratios[op] > ceiling:
            bad.append(f"{op}: time {1 / ratios[op]:.2f} x > {ceiling} x")
    for op, value in floors.get("bound_floors", {}).items():
        if (floor := applicable("bound floor", op, value)) is None:
            continue
        r = result(bench["results"], op, size)
        if r and r.get("bound_op"):
            rows = bench["ceilings"].get(r["bound_op"], {}).get("rows", [])
            bound = next((x for x in rows if x["size"] == size), None)
            if bound and bound["gbps"] and r["gbps"] / bound["gbps"] < floor:
                bad.append(f"{op}: {r['gbps']:.2f} GB/s is {r['gbps'] / bound['gbps']:.2f} x its host memcpy bound < {floor}")
    return bad, notes


def spread_of(values):
    """(largest - smallest) / median."""
    median = sorted(values)[len(values) // 2]
    return (max(values) - min(values)) / median if median else float("inf")


def agreement(benches, within):
    """(disagreements, rows) over the headline rows with a target that have a ratio in every run: a row is
    (op, ratios, spread), spread = (largest - smallest) / median; a disagreement is a row whose spread is
    above @within, as text, with how far the row's ceiling moved over the runs (where every run has it): a
    ceiling that moved as much says the machine changed between the runs, not gpuxfer."""
    rows, bad = [], []
    for e in benches[0]["headline"]["entries"]:
        op = e["op"]
        if e.get("target") is None:
            continue
        ratios = [b["headline"]["ratios"].get(op) for b in benches]
        if any(r is None for r in ratios):
            continue
        spread = spread_of(ratios)
        rows.append((op, ratios, spread))
        if spread > within:
            text = f"{op}: ratios {' / '.join(f'{r:.3f}' for r in ratios)} spread {spread:.1%} > {within:.0%}"
            entries = [next((x for x in b["headline"]["entries"] if x["op"] == op), {}) for b in benches]
            ceilings = [x.get("ceiling") for x in entries]
            if all(ceilings):
                text += (f"; its ceiling {e['vs']} {' / '.join(f'{c:#.4g}' for c in ceilings)} GB/s, "
                         f"spread {spread_of(ceilings):.1%}")
            bad.append(text)
    return bad, rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("bench")
    ap.add_argument("--torch")
    ap.add_argument("--markdown")
    ap.add_argument("--growth", help="comma-separated ops for a time-against-size table")
    ap.add_argument("--floors", nargs="?", const=DEFAULT_FLOORS,
                    help="check the regression floors of this file (default: benchmarks/data/floors.json)")
    ap.add_argument("--agree", nargs="+", metavar="OTHER", help="other runs' JSON whose headline must agree")
    ap.add_argument("--within", type=float, default=0.05, help="--agree's tolerance (default 0.05)")
    args = ap.parse_args()
    bench = json.load(open(args.bench))
    torch = json.load(open(args.torch)) if args.torch else None
    if args.agree:
        benches = [bench] + [json.load(open(f)) for f in args.agree]
        bad, rows = agreement(benches, args.within)
        for b in bad:
            print(f"perf agreement: {b}")
        widest = max(rows, key=lambda r: r[2]) if rows else None
        print(f"perf agreement: {'FAILED' if bad else 'OK'} ({len(rows) - len(bad)} of {len(rows)} rows with a "
              f"target within {args.within:.0%} over {len(benches)} runs"
              + (f"; widest {widest[0]} {widest[2]:.1%}" if widest else "") + ")")
        return 1 if bad else 0
    if args.markdown or not args.floors:
        text = markdown(bench, torch)
        if args.growth:
            text += "\n" + growth(bench, args.growth.split(","))
        if args.markdown:
            with open(args.markdown, "w") as f:
                f.write(text)
        else:
            sys.stdout.write(text)
    if args.floors:
        with open(args.floors) as f:
            bad, notes = check_floors(bench, json.load(f))
        for b in bad:
            print(f"perf floor: {b}")
        for n in notes:
            print(f"perf floor: {n}")
        waived = sum(1 for n in notes if ": waived (" in n)
        print(f"perf floors: {'FAILED' if bad else 'OK'} ({len(bad)} below, {waived} waived; {devices(bench)} device(s))")
        return 1 if bad else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
