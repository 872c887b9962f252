#!/usr/bin/env python3
"""Plots gpuxfer-bench and torch_baseline.py JSON files: one small PNG per operation, GB/s against the size
per device (log2 axis), with lines for gpuxfer, its ceiling (measured in the same run), PyTorch and the
naive way where present. Operations measured at one size only (4 KiB latency, 1000 small buffers) get a
bar chart of their times instead. Also prints gpuxfer against PyTorch at the headline size.

    python3 benchmarks/python/plot.py bench.json torch.json -o docs/plots
"""

import argparse
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402 - the backend must be chosen first
from matplotlib.ticker import FuncFormatter  # noqa: E402

WIDTH_IN, HEIGHT_IN, DPI = 8, 5, 80  # 640 x 400 pixels
HEADLINE_SIZE = 256 << 20
# The seed's naive way, drawn beside the gpuxfer operations it does the job of.
NAIVE = {"gather": ["naive_gather"], "gather_pageable": ["naive_gather"]}
TORCH_COLORS = ["tab:orange", "tab:brown", "tab:olive", "tab:pink"]
# The rows drawn beside an operation measured at one size (its ceiling is added from its own rows).
EXTRA_BARS = {"small_gather": ["small_gather_baseline", "small_gather_batch"],
              "latency_gather_4k": ["latency_4k", "latency_4k_one"]}


def size_label(n):
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return str(n)


def load(paths):
    """Every row of every file: results (gpuxfer, naive, baseline, torch) and ceilings, plus metadata."""
    rows, waived, runners = [], [], []
    for path in paths:
        with open(path) as f:
            doc = json.load(f)
        runners.append(doc.get("runner", {}))
        for r in doc.get("results", []):
            rows.append(dict(r, source=path))
        for name, c in doc.get("ceilings", {}).items():
            for r in c.get("rows", []):
                rows.append(dict(r, op=name, kind="ceiling", source=path))
        waived += [w["op"] for w in doc.get("waived", [])]
    return rows, set(waived), runners


def series(rows, op):
    pts = sorted((r["size"], r) for r in rows if r["op"] == op)
    return [p[0] for p in pts], [p[1] for p in pts]


def title_suffix(runners):
    for r in runners:
        if r.get("names"):
            return f"{r['devices']} x {r['names'][0]}"
    return ""


def line_plot(op, rows, runners, out_dir):
    sizes, own = series(rows, op)
    fig, ax = plt.subplots(figsize=(WIDTH_IN, HEIGHT_IN), dpi=DPI)
    ax.plot(sizes, [r["gbps"] for r in own], "o-", lw=2, color="tab:blue", label=f"gpuxfer {op}")
    ceil = [(s, r["ceiling"]) for s, r in zip(sizes, own) if r.get("ceiling")]
    if ceil:
        name = next(r["ceiling_op"] for r in own if r.get("ceiling_op"))
        ax.plot(*zip(*ceil), "k--", lw=1.5, label=f"ceiling: {name}")
    bound = [(s, r["bound"]) for s, r in zip(sizes, own) if r.get("bound")]
    if bound:
        name = next(r["bound_op"] for r in own if r.get("bound_op"))
        ax.plot(*zip(*bound), ":", color="gray", lw=1.5, label=f"host memcpy: {name}")
    torch_ops = sorted({r["op"] for r in rows if r.get("compare_to") == op})
    for t, color, marker in zip(torch_ops, TORCH_COLORS, "s^vD"):
        ts, tr = series(rows, t)
        ax.plot(ts, [r["gbps"] for r in tr], marker + "-", color=color, alpha=0.8, label=f"PyTorch {t}")
    for n in NAIVE.get(op, []):
        ns, nr = series(rows, n)
        if ns:
            ax.plot(ns, [r["gbps"] for r in nr], "x-", color="tab:red", alpha=0.8, label=f"naive {n}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: size_label(int(v))))
    ax.set_xlabel("bytes per device")
    ax.set_ylabel("GB/s (bytes / time / 1e9)")
    ax.set_title(f"{op} ({title_suffix(runners)})", fontsize=11)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    return save(fig, out_dir, op)


def bar_plot(op, rows, runners, out_dir):
    """An operation measured at one size: its time beside its reference's and the alternatives'."""
    own = [r for r in rows if r["op"] == op]
    refs = [r["ceiling_op"] for r in own if r.get("ceiling_op")] + EXTRA_BARS.get(op, [])
    refs = list(dict.fromkeys(refs))  # ordered, no repeats
    ref_rows = [r for name in refs for r in rows if r["op"] == name]
    size = own[0]["size"] if own else (ref_rows[0]["size"] if ref_rows else None)
    bars = [(f"gpuxfer {op}", own[0]["time_us"], "tab:blue")] if own else []
    bars += [(r["op"], r["time_us"], "gray") for r in ref_rows if r["size"] == size]
    for r in rows:
        if r.get("kind") == "torch" and size is not None and r["size"] == size and r.get("compare_to") == "gather" \
                and op.startswith("latency_gather"):
            bars.append((f"PyTorch {r['op']}", r["time_us"], "tab:orange"))
    if not bars:
        return None
    fig, ax = plt.subplots(figsize=(WIDTH_IN, HEIGHT_IN), dpi=DPI)
    ax.barh([b[0] for b in bars], [b[1] for b in bars], color=[b[2] for b in bars])
    for i, b in enumerate(bars):
        ax.text(b[1], i, f" {b[1]:.1f}", va="center", fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("time (us), lower is better")
    status = "" if own else " (gpuxfer waived)"
    ax.set_title(f"{op}{status} ({title_suffix(runners)})", fontsize=11)
    ax.grid(True, axis="x", alpha=0.3)
    fig.tight_layout()
    return save(fig, out_dir, op)


def save(fig, out_dir, op):
    path = os.path.join(out_dir, f"{op}.png")
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


def versus_torch(rows):
    """gpuxfer against PyTorch at the headline size (the largest when 256 MiB is absent) and at 4 KiB."""
    lines = []
    torch_rows = [r for r in rows if r.get("kind") == "torch" and r.get("compare_to")]
    sizes = {r["size"] for r in torch_rows}
    head = HEADLINE_SIZE if HEADLINE_SIZE in sizes else max(sizes, default=0)
    for size in sorted({head, 4096} & sizes, reverse=True):
        for t in sorted((r for r in torch_rows if r["size"] == size), key=lambda r: r["op"]):
            ours = [r for r in rows if r["op"] == t["compare_to"] and r["size"] == size and r.get("kind") == "gpuxfer"]
            if ours:
                g = ours[0]
                lines.append(f"{size_label(size):>5}  {g['op']:<18} {g['gbps']:9.2f} GB/s  vs  {t['op']:<22} "
                             f"{t['gbps']:9.2f} GB/s  = {g['gbps'] / t['gbps']:7.2f} x")
    return lines


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("json", nargs="+", help="JSON files from gpuxfer-bench --json and torch_baseline.py --json")
    p.add_argument("-o", "--out", default="plots", help="directory for the PNGs (created if missing)")
    args = p.parse_args(argv)
    rows, waived, runners = load(args.json)
    os.makedirs(args.out, exist_ok=True)
    ops = sorted({r["op"] for r in rows if r.get("kind") == "gpuxfer"} | (waived & set(EXTRA_BARS)))
    written = []
    for op in ops:
        sizes = {r["size"] for r in rows if r["op"] == op}
        path = line_plot(op, rows, runners, args.out) if len(sizes) > 1 else bar_plot(op, rows, runners, args.out)
        if path:
            written.append(path)
    print(f"plot.py: {len(written)} PNGs in {args.out}: {', '.join(os.path.basename(w) for w in written)}")
    comparison = versus_torch(rows)
    if comparison:
        print("gpuxfer vs PyTorch (same sizes, GB/s as each file counts them):")
        print("\n".join(comparison))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
