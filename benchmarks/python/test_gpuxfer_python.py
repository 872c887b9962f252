"""gpuxfer_python.compare over synthetic rows: Python against C++ per op and size, and the issue's targets."""

import unittest

from gpuxfer_python import IN_PROCESS, compare, interleaved_row, parse_args, verdicts


def row(op, size, us, compare_to=None):
    r = {"op": op, "size": size, "time_us": us}
    if compare_to:
        r["compare_to"] = compare_to
    return r


class CompareTest(unittest.TestCase):
    def test_a_4k_gather_within_2_us_of_cpp_meets_its_target(self):
        [r] = compare([row("py_gather", 4096, 11.5, "gather")], [row("gather", 4096, 10.0)])
        self.assertAlmostEqual(r["above_us"], 1.5)
        self.assertTrue(r["met"])
        self.assertIn("2.0 us", r["target"])

    def test_a_4k_gather_3_us_slower_misses(self):
        [r] = compare([row("py_gather", 4096, 13.0, "gather")], [row("gather", 4096, 10.0)])
        self.assertFalse(r["met"])

    def test_the_256m_gather_needs_098_of_cpp(self):
        size = 256 << 20
        [slow] = compare([row("py_gather", size, 1000.0, "gather")], [row("gather", size, 970.0)])
        [fast] = compare([row("py_gather", size, 1000.0, "gather")], [row("gather", size, 990.0)])
        self.assertFalse(slow["met"])
        self.assertTrue(fast["met"])

    def test_rows_without_a_cpp_counterpart_or_target_are_informational(self):
        rows = compare(
            [row("py_bcast_pinned", 1 << 20, 30.0, "bcast_pinned"), row("py_gather", 8192, 5.0, "gather")],
            [row("bcast_pinned", 1 << 20, 29.0), row("ceiling_d2h_one", 8192, 1.0)],
        )
        self.assertEqual([r["op"] for r in rows], ["py_bcast_pinned"])
        self.assertTrue(rows[0]["met"])
        self.assertIsNone(rows[0]["target"])

    def test_both_targets_get_a_verdict_with_their_numbers(self):
        size = 256 << 20
        rows = compare(
            [row("py_gather", 4096, 13.0, "gather"), row("py_gather", size, 1000.0, "gather")],
            [row("gather", 4096, 10.0), row("gather", size, 990.0)],
        )
        small, large = verdicts(rows)
        self.assertEqual((small["name"], small["met"]), ("4 KiB gather", False))
        self.assertIn("+3.00 us", small["measure"])
        self.assertEqual((large["name"], large["met"]), ("256 MiB gather", True))
        self.assertIn("0.990 x C++", large["measure"])
        self.assertIn("python 1000.00 us, C++ 990.00 us", large["times"])

    def test_a_target_neither_run_measured_is_missed_not_passed(self):
        rows = compare([row("py_gather", 4096, 11.0, "gather")], [row("gather", 4096, 10.0)])
        small, large = verdicts(rows)
        self.assertTrue(small["met"])
        self.assertFalse(large["met"])
        self.assertEqual(large["measure"], "not measured")

    def test_the_interleaved_row_takes_the_round_least_above_cpp_and_keeps_them_all(self):
        r = interleaved_row([(12.0, 8.0), (9.5, 8.4), (10.0, 7.0)])
        self.assertEqual((r["py_us"], r["cpp_us"]), (9.5, 8.4))
        self.assertAlmostEqual(r["above_us"], 1.1)
        self.assertTrue(r["met"])
        self.assertEqual(len(r["rounds"]), 3)
        self.assertIn("best of 3 rounds", r["method"])
        self.assertFalse(interleaved_row([(11.0, 8.0), (12.5, 9.0)])["met"])  # 3 and 3.5 us above

    def test_in_process_targets_take_the_interleaved_rows_and_leave_the_cross_process_ones_untargeted(self):
        size = 256 << 20
        cross = compare(
            [row("py_gather", 4096, 19.0, "gather"), row("py_gather", size, 1100.0, "gather")],
            [row("gather", 4096, 9.0), row("gather", size, 990.0)],
            IN_PROCESS,
        )
        for r in cross:  # 10 us above; 0.9 x: another process, shown, not judged
            self.assertIsNone(r["target"])
            self.assertTrue(r["met"])
        rows = [interleaved_row([(9.3, 8.2)]), interleaved_row([(1010.0, 990.0), (1001.0, 995.0)], size)] + cross
        small, large = verdicts(rows)
        self.assertTrue(small["met"])
        self.assertIn("+1.10 us", small["measure"])
        self.assertTrue(large["met"])
        self.assertIn("0.994 x C++", large["measure"])
        self.assertFalse(interleaved_row([(1030.0, 1000.0)], size)["met"])  # 0.971 x
        [only_small] = verdicts(rows[:1], only={("gather", 4096)})
        self.assertEqual(only_small["name"], "4 KiB gather")
        _, unmeasured = verdicts(rows[:1], only=IN_PROCESS)
        self.assertEqual(unmeasured["measure"], "not measured")

    def test_short_mode_sizes_and_unknown_ops(self):
        self.assertEqual(parse_args(["--short"]).sizes, [4 << 10, 1 << 20, 64 << 20, 256 << 20])
        with self.assertRaises(SystemExit):
            parse_args(["--ops", "py_nothing"])


if __name__ == "__main__":
    unittest.main()
