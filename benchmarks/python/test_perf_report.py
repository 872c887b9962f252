#!/usr/bin/env python3
"""perf_report.py over synthetic bench JSON: a one-GPU run with waived operations (their headline values
are null, as gpuxfer-bench writes them), floors per device count, and the command line against the real
benchmarks/data/floors.json. Run: python3 -m unittest discover -s benchmarks/python -v
"""
import copy
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import perf_report  # noqa: E402 - found through the path set just above

SIZE = 256 << 20
WAIVED = {"copy_peer": "needs 2 devices, 1 under test", "copy_staged": "needs 2 devices, 1 under test",
          "bcast_device": "needs 2 devices, 1 under test", "ceiling_peer": "needs 2 devices, 1 under test"}


def entry(op, vs, ratio, target=None, time=False, size=SIZE):
    """A headline entry as gpuxfer-bench writes it; ratio None: no result (waived or failed)."""
    e = {"op": op, "vs": vs, "size": size, "gbps": None, "ceiling": None, "ratio": ratio, "target": target,
         "met": None}
    if ratio is not None:
        e["ceiling"] = 50.0
        e["gbps"] = 50.0 * ratio
        e["met"] = None if target is None else ratio >= target
        if time:
            e["time_x"] = 1 / ratio
    if time and target is not None:
        e["time_target"] = 1 / target
    return e


def one_gpu_bench():
    """A 1-GPU short run in which every floor holds on one GPU and the 2-GPU ops are waived."""
    entries = [
        entry("gather", "ceiling_d2h", 0.99, 0.95),
        entry("gather_pageable", "ceiling_d2h", 0.80, 0.80),
        entry("gather_to_device", "ceiling_to_device", 0.86),
        entry("latency_gather_4k", "latency_4k", 0.88, 1 / 1.2, time=True, size=4096),
        entry("copy_peer", "ceiling_peer", None, 0.95),
        entry("copy_staged", "min(ceiling_d2h_one, ceiling_h2d_one)", None, 0.90),
        entry("bcast_pinned", "ceiling_h2d_one", 0.97, 0.95),
        entry("bcast_pageable", "ceiling_h2d_one", 0.75, 0.90),
        entry("bcast_device", "ceiling_nccl_bcast", None, 1.0),
        entry("small_gather", "small_gather_baseline", 16.0, 10.0, size=4096),
    ]
    results = [{"op": "gather_pageable", "kind": "gpuxfer", "size": SIZE, "bytes": SIZE, "time_us": 6700.0,
                "gbps": 40.0, "ceiling": 50.0, "ceiling_op": "ceiling_d2h", "ratio": 0.8, "bound": 45.0,
                "bound_op": "ceiling_host_memcpy_t16", "wrong": 0, "samples": 5},
               {"op": "bcast_pageable", "kind": "gpuxfer", "size": SIZE, "bytes": SIZE, "time_us": 7100.0,
                "gbps": 37.5, "ceiling": 50.0, "ceiling_op": "ceiling_h2d_one", "ratio": 0.75, "bound": 45.0,
                "bound_op": "ceiling_host_memcpy_t16", "wrong": 0, "samples": 5}]
    ceilings = {"ceiling_d2h": {"what": "raw D2H", "bytes_rule": "size x devices",
                                "rows": [{"size": SIZE, "bytes": SIZE, "time_us": 5000.0, "gbps": 53.7, "wrong": 0}]},
                "ceiling_host_memcpy_t16": {"what": "memcpy", "bytes_rule": "size x devices",
                                            "rows": [{"size": SIZE, "bytes": SIZE, "time_us": 6000.0, "gbps": 45.0,
                                                      "wrong": 0}]}}
    return {"schema": "gpuxfer-bench/1", "convention": "synthetic", "runner": {"devices": 1},
            "ceilings": ceilings, "results": results,
            "waived": [{"op": op, "why": why} for op, why in WAIVED.items()], "failed": [],
            "headline": {"size": SIZE, "ratios": {e["op"]: e["ratio"] for e in entries}, "entries": entries},
            "wrong": 0}


def with_ratio(bench, op, ratio):
    """@bench with @op's headline ratio replaced."""
    b = copy.deepcopy(bench)
    b["headline"]["ratios"][op] = ratio
    return b


class FloorFor(unittest.TestCase):
    def test_number_applies_on_any_count(self):
        self.assertEqual(perf_report.floor_for(0.9, 1), 0.9)
        self.assertEqual(perf_report.floor_for(0.9, 8), 0.9)

    def test_largest_count_not_above_the_run(self):
        floors = {"1": 0.95, "2": 1.60}
        self.assertEqual(perf_report.floor_for(floors, 1), 0.95)
        self.assertEqual(perf_report.floor_for(floors, 2), 1.60)
        self.assertEqual(perf_report.floor_for(floors, 4), 1.60)

    def test_no_floor_below_the_smallest_count(self):
        self.assertIsNone(perf_report.floor_for({"2": 0.90}, 1))


class CheckFloors(unittest.TestCase):
    def setUp(self):
        with open(perf_report.DEFAULT_FLOORS) as f:
            self.floors = json.load(f)
        self.bench = one_gpu_bench()

    def test_one_gpu_run_passes_with_the_2_gpu_ops_waived_or_unfloored(self):
        bad, notes = perf_report.check_floors(self.bench, self.floors)
        self.assertEqual(bad, [])
        text = "\n".join(notes)
        for op in ("copy_peer", "copy_staged", "bcast_device"):
            self.assertIn(op, text)

    def test_waived_op_with_a_floor_is_a_note_not_a_failure(self):
        floors = {"ratio_floors": {"copy_peer": 0.90}}
        bad, notes = perf_report.check_floors(self.bench, floors)
        self.assertEqual(bad, [])
        self.assertEqual(notes, [f"copy_peer: waived ({WAIVED['copy_peer']})"])

    def test_one_gpu_broadcast_is_held_to_one_link(self):
        bad, _ = perf_report.check_floors(with_ratio(self.bench, "bcast_pinned", 0.90), self.floors)
        self.assertEqual(len(bad), 1)
        self.assertIn("bcast_pinned", bad[0])

    def test_two_gpu_floors_apply_when_the_runner_had_two(self):
        bench = copy.deepcopy(self.bench)
        bench["runner"]["devices"] = 2
        bad, _ = perf_report.check_floors(bench, self.floors)
        self.assertTrue(any(b.startswith("bcast_pinned: ratio 0.970 < floor 1.6") for b in bad), bad)

    def test_missing_result_that_was_not_waived_fails(self):
        bad, _ = perf_report.check_floors(with_ratio(self.bench, "gather", None), self.floors)
        self.assertEqual(bad, ["gather: no result (floor 0.9)"])

    def test_op_whose_ceiling_was_waived_is_waived_with_it(self):
        bench = copy.deepcopy(self.bench)
        bench["runner"]["devices"] = 2
        bench["waived"] = [{"op": "ceiling_nccl_bcast", "why": "NCCL is disabled (GPUXFER_NCCL)"}]
        bench["headline"]["ratios"].update(copy_peer=0.99, copy_staged=0.99, bcast_pinned=1.8, gather_to_device=0.99)
        bad, notes = perf_report.check_floors(bench, self.floors)
        self.assertEqual(bad, [])
        self.assertIn("bcast_device: waived (its ceiling ceiling_nccl_bcast was waived: NCCL is disabled "
                      "(GPUXFER_NCCL))", notes)

    def test_time_ceiling(self):
        bad, _ = perf_report.check_floors(with_ratio(self.bench, "latency_gather_4k", 0.6), self.floors)
        self.assertEqual(bad, ["latency_gather_4k: time 1.67 x > 1.35 x"])

    def test_bound_floor(self):
        bench = copy.deepcopy(self.bench)
        bench["results"][1]["gbps"] = 20.0  # 0.44 x the 45 GB/s host memcpy bound
        bad, _ = perf_report.check_floors(bench, self.floors)
        self.assertEqual(len(bad), 1)
        self.assertIn("bcast_pageable: 20.00 GB/s is 0.44 x its host memcpy bound", bad[0])


class Agreement(unittest.TestCase):
    def test_runs_within_the_tolerance_agree(self):
        runs = [one_gpu_bench(), with_ratio(one_gpu_bench(), "gather", 0.97), with_ratio(one_gpu_bench(), "gather", 1.0)]
        bad, rows = perf_report.agreement(runs, 0.05)
        self.assertEqual(bad, [])
        spread = {op: s for op, _, s in rows}
        self.assertAlmostEqual(spread["gather"], 0.03 / 0.99)

    def test_a_row_that_moves_more_disagrees(self):
        runs = [one_gpu_bench(), with_ratio(one_gpu_bench(), "bcast_pageable", 0.60), one_gpu_bench()]
        bad, _ = perf_report.agreement(runs, 0.05)
        self.assertEqual(bad, ["bcast_pageable: ratios 0.750 / 0.600 / 0.750 spread 20.0% > 5%; "
                               "its ceiling ceiling_h2d_one 50.00 / 50.00 / 50.00 GB/s, spread 0.0%"])

    def test_a_disagreement_says_how_far_its_ceiling_moved(self):
        # A small call whose raw baseline itself moved between the processes (4 KiB: times in us).
        runs = [one_gpu_bench() for _ in range(3)]
        for run, (ratio, ceiling) in zip(runs, [(0.892, 0.512), (0.938, 0.592), (0.884, 0.510)]):
            e = next(e for e in run["headline"]["entries"] if e["op"] == "latency_gather_4k")
            e["ceiling"] = ceiling
            run["headline"]["ratios"]["latency_gather_4k"] = ratio
        bad, _ = perf_report.agreement(runs, 0.05)
        self.assertEqual(bad, ["latency_gather_4k: ratios 0.892 / 0.938 / 0.884 spread 6.1% > 5%; "
                               "its ceiling latency_4k 0.5120 / 0.5920 / 0.5100 GB/s, spread 16.0%"])

    def test_rows_without_a_target_or_a_result_are_left_out(self):
        runs = [with_ratio(one_gpu_bench(), "gather_to_device", 0.1), one_gpu_bench()]
        bad, rows = perf_report.agreement(runs, 0.05)
        ops = {op for op, _, _ in rows}
        self.assertEqual(bad, [])
        self.assertNotIn("gather_to_device", ops)  # no target
        self.assertNotIn("copy_peer", ops)  # waived: no ratio
        self.assertIn("latency_gather_4k", ops)


class Markdown(unittest.TestCase):
    def test_waived_rows_say_so(self):
        text = perf_report.markdown(one_gpu_bench(), None)
        row = next(line for line in text.splitlines() if line.startswith("| copy_peer |"))
        self.assertIn("waived: needs 2 devices", row)
        self.assertIn("| gather | 49.50 |", text)


class CommandLine(unittest.TestCase):
    def run_report(self, bench, *args):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "bench.json")
            with open(path, "w") as f:
                json.dump(bench, f)
            return subprocess.run([sys.executable, os.path.join(HERE, "perf_report.py"), path, *args],
                                  capture_output=True, text=True, check=False)

    def test_floors_ok_on_one_gpu_with_waived_ops(self):
        done = self.run_report(one_gpu_bench(), "--floors")
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        self.assertIn("perf floors: OK (0 below, 3 waived; 1 device(s))", done.stdout)

    def test_floors_fail_exits_1(self):
        done = self.run_report(with_ratio(one_gpu_bench(), "gather", 0.5), "--floors")
        self.assertEqual(done.returncode, 1, done.stdout + done.stderr)
        self.assertIn("perf floor: gather: ratio 0.500 < floor 0.9", done.stdout)

    def test_agree_fails_exits_1(self):
        with tempfile.TemporaryDirectory() as tmp:
            other = os.path.join(tmp, "other.json")
            with open(other, "w") as f:
                json.dump(with_ratio(one_gpu_bench(), "gather", 0.80), f)
            done = self.run_report(one_gpu_bench(), "--agree", other)
        self.assertEqual(done.returncode, 1, done.stdout + done.stderr)
        self.assertIn("perf agreement: gather: ratios 0.990 / 0.800 spread 19.2% > 5%", done.stdout)
        self.assertIn("perf agreement: FAILED (5 of 6 rows with a target within 5% over 2 runs", done.stdout)

    def test_markdown_of_a_run_with_waived_ops(self):
        done = self.run_report(one_gpu_bench())
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn("| bcast_device |", done.stdout)


if __name__ == "__main__":
    unittest.main()
