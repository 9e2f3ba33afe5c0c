"""tools/plot_report.py on a hand-made report.json: the paired gain per step and its mean over seeds,
the increments' error bars (the paired t interval, none for one seed), and the PNGs it writes.

Run by ctest (label unit) with the venv python, like test_prepare_data.py.
"""
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools"))
import plot_report as pr  # noqa: E402


def run(name, arm, seed, val, train):
    return {"name": name, "tier": "micro", "variant": "", "arm": arm, "seed": seed, "status": "finished",
            "val_curve": [[s, s * 100, v] for s, v in val], "train_curve": [[s, s * 100, v] for s, v in train]}


REPORT = {
    "format": "attnlab-report", "version": 1, "tier_order": ["micro"], "paper": None,
    "runs": [run("micro/baseline/s1", "baseline", 1, [(10, 5.0), (20, 4.0)], [(i, 6.0 - i / 20) for i in range(1, 21)]),
             run("micro/baseline/s2", "baseline", 2, [(10, 5.2), (20, 4.2)], [(i, 6.1 - i / 20) for i in range(1, 21)]),
             run("micro/combo2/s1", "combo2", 1, [(10, 4.9), (20, 3.7)], [(i, 5.9 - i / 20) for i in range(1, 21)]),
             run("micro/combo2/s2", "combo2", 2, [(10, 5.1), (20, 4.1)], [(i, 6.0 - i / 20) for i in range(1, 21)])],
    "groups": [{"tier": "micro", "variant": "", "runs": [0, 1, 2, 3],
                "arms": [{"arm": "baseline"}, {"arm": "combo2"}],
                "differences": [
                    {"id": "gain_proj_gate", "quantity": "standalone gain proj_gate",
                     "stats": {"n": 2, "mean": 0.2, "sd": 0.1}, "paired_t": {"ci": [-0.7, 1.1]}},
                    {"id": "zero_option", "quantity": "zero-option increment",
                     "stats": {"n": 1, "mean": 0.05, "sd": None}, "paired_t": {"ci": None}}],
                "not_in_sweep": []}],
}


class PlotReport(unittest.TestCase):
    def test_paired_gain_and_its_mean_over_seeds(self):
        runs = REPORT["runs"]
        g1 = pr.paired_gain(runs[2], runs[0])  # 5.0 - 4.9, 4.0 - 3.7
        g2 = pr.paired_gain(runs[3], runs[1])  # 5.2 - 5.1, 4.2 - 4.1
        self.assertAlmostEqual(g1[10], 0.1)
        self.assertAlmostEqual(g1[20], 0.3)
        steps, mean = pr.mean_over_seeds([g1, g2])
        self.assertEqual(steps, [10, 20])
        self.assertAlmostEqual(mean[0], 0.1)
        self.assertAlmostEqual(mean[1], 0.2)
        # A step only one seed evaluated is left out of the mean.
        steps, _ = pr.mean_over_seeds([{10: 0.1, 15: 0.4}, {10: 0.3}])
        self.assertEqual(steps, [10])

    def test_error_bars_are_the_interval_and_one_seed_has_none(self):
        bars = pr.interval_bars(REPORT["groups"][0]["differences"])
        for got, want in zip(bars["gain_proj_gate"], (0.2, 0.9, 0.9)):  # mean, mean - low, high - mean
            self.assertAlmostEqual(got, want)
        self.assertEqual(bars["zero_option"], (0.05, 0.0, 0.0))

    def test_writes_the_curves_and_the_increments(self):
        with tempfile.TemporaryDirectory() as out:
            path = os.path.join(out, "report.json")
            with open(path, "w") as f:
                json.dump(REPORT, f)
            sys.argv = ["plot_report.py", path, "--out", out]
            pr.main()
            for name in ("val_curves_micro.png", "increments.png"):
                self.assertGreater(os.path.getsize(os.path.join(out, name)), 10000, name)


if __name__ == "__main__":
    unittest.main()
