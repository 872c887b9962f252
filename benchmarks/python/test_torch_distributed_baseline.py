"""torch_distributed_baseline's pure parts: its launch environment, when it skips, its command line, and
gpuxfer-bench --ranks against it with issue 11's targets. No PyTorch needed."""

import io
import types
import unittest
from contextlib import redirect_stdout

import torch_distributed_baseline as tdb


def row(op, size, gbps, compare_to=None):
    r = {"op": op, "size": size, "gbps": gbps}
    if compare_to:
        r["compare_to"] = compare_to
    return r


def fake_torch(cuda=True, nccl=True, gpus=2):
    dist = types.SimpleNamespace(is_available=lambda: True, is_nccl_available=lambda: nccl)
    cuda_ns = types.SimpleNamespace(is_available=lambda: cuda, device_count=lambda: gpus)
    return types.SimpleNamespace(distributed=dist, cuda=cuda_ns)


class LaunchTest(unittest.TestCase):
    def test_torchrun_variables_give_the_rank_and_the_node(self):
        env = {"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"}
        self.assertEqual(tdb.launch_env(env), (3, 4, 1, 2, {}))

    def test_alone_it_is_a_world_of_one_on_a_free_local_port(self):
        rank, world, local, local_world, extra = tdb.launch_env({})
        self.assertEqual((rank, world, local, local_world), (0, 1, 0, 1))
        self.assertEqual((extra["RANK"], extra["WORLD_SIZE"], extra["MASTER_ADDR"]), ("0", "1", "127.0.0.1"))
        self.assertGreater(int(extra["MASTER_PORT"]), 0)
        self.assertNotIn("MASTER_PORT", tdb.launch_env({"MASTER_PORT": "29500"})[4])


class SkipTest(unittest.TestCase):
    def test_every_missing_piece_is_a_reason(self):
        self.assertEqual(tdb.skip_reason(None, 1), "no PyTorch")
        self.assertIn("NCCL", tdb.skip_reason(fake_torch(nccl=False), 1))
        self.assertIn("no CUDA device", tdb.skip_reason(fake_torch(cuda=False), 1))
        self.assertIn("3 ranks on this node, 2 GPU(s)", tdb.skip_reason(fake_torch(gpus=2), 3))
        self.assertIsNone(tdb.skip_reason(fake_torch(gpus=2), 2))

    def test_without_torch_main_says_why_and_exits_0(self):
        out = io.StringIO()
        with redirect_stdout(out):
            code = tdb.main(["--short"], environ={}, load_torch=lambda: None)
        self.assertEqual(code, 0)
        self.assertIn("torch_distributed_baseline: skipped: no PyTorch", out.getvalue())

    def test_without_cuda_main_says_why_and_exits_0(self):
        out = io.StringIO()
        with redirect_stdout(out):
            code = tdb.main([], environ={}, load_torch=lambda: fake_torch(cuda=False))
        self.assertEqual(code, 0)
        self.assertIn("skipped: no CUDA device", out.getvalue())


class ArgsTest(unittest.TestCase):
    def test_sizes_go_to_1_gib_by_default_as_gpuxfer_bench_ranks(self):
        a = tdb.parse_args([])
        self.assertEqual((a.sizes[0], a.sizes[-1], len(a.sizes)), (4 << 10, 1 << 30, 10))
        self.assertEqual(a.ops, [o[0] for o in tdb.OPS])
        self.assertEqual(tdb.parse_args(["--short"]).sizes, [4 << 10, 1 << 20, 64 << 20, 256 << 20])
        self.assertEqual(tdb.parse_args(["--gpuxfer", "r.json"]).gpuxfer, "r.json")

    def test_every_operation_stands_beside_a_gpuxfer_ranks_operation(self):
        self.assertEqual([o[2] for o in tdb.OPS], ["rank_gather_to_host", "rank_bcast", "rank_all_gather"])
        self.assertEqual(tdb.OPS[0][4](1 << 20, 2), 2 << 20)  # size x ranks
        self.assertEqual(tdb.OPS[1][4](1 << 20, 2), 1 << 20)  # the payload

    def test_patterns_differ_per_rank_and_size(self):
        seeds = {tdb.seed_for(s, r) for s in (4096, 1 << 20) for r in range(3)}
        self.assertEqual(len(seeds), 6)


class CompareTest(unittest.TestCase):
    size = 256 << 20

    def test_the_ratio_is_gpuxfer_over_torch_and_the_targets_hold_at_the_headline_size(self):
        rows = tdb.compare_gpuxfer(
            [row("torch_dist_gather_cpu", self.size, 10.0, "rank_gather_to_host"),
             row("torch_dist_broadcast", self.size, 300.0, "rank_bcast"),
             row("torch_dist_gather_cpu", 4096, 1.0, "rank_gather_to_host")],
            [row("rank_gather_to_host", self.size, 95.0), row("rank_bcast", self.size, 290.0),
             row("rank_gather_to_host", 4096, 0.5)])
        by = {(r["op"], r["size"]): r for r in rows}
        gather = by[("rank_gather_to_host", self.size)]
        self.assertAlmostEqual(gather["ratio"], 9.5)
        self.assertEqual((gather["target"], gather["met"]), (2.0, True))
        bcast = by[("rank_bcast", self.size)]
        self.assertEqual((bcast["target"], bcast["met"]), (1.0, False))
        small = by[("rank_gather_to_host", 4096)]
        self.assertEqual((small["target"], small["met"]), (None, None))
        self.assertIn("BELOW", tdb.comparison_line(bcast))
        self.assertEqual(tdb.missed_targets(rows, [row("x", self.size, 1.0, "rank_bcast")]), ["rank_bcast"])

    def test_a_target_gpuxfer_did_not_measure_is_missed(self):
        torch_rows = [row("torch_dist_broadcast", self.size, 300.0, "rank_bcast")]
        rows = tdb.compare_gpuxfer(torch_rows, [])
        self.assertEqual(rows, [])
        self.assertEqual(tdb.missed_targets(rows, torch_rows), ["rank_bcast"])

    def test_operations_without_a_target_are_informational(self):
        rows = tdb.compare_gpuxfer([row("torch_dist_all_gather", self.size, 100.0, "rank_all_gather")],
                                   [row("rank_all_gather", self.size, 120.0)])
        self.assertEqual(rows[0]["target"], None)
        self.assertEqual(tdb.missed_targets(rows, []), [])


if __name__ == "__main__":
    unittest.main()
