"""tools/seed_variance.py on a hand-made report.json whose figures are worked out here by hand.

Seeds 1-3; A = baseline, B = sink_logit; losses (originals / twins):
  A: 4.00 4.10 4.20 / 4.01 4.08 4.23      B: 3.90 4.05 4.12 / 3.92 4.02 4.14
d = A - B = 0.10, 0.05, 0.08 (mean 0.0767, Var 0.000633...); d' = 0.09, 0.06, 0.09;
d - d' = 0.01, -0.01, -0.01: Var 0.000133..., half of it 0.0000667 is the init part (10.5% of Var(d)).
Null differences twin - original: A +0.01 -0.02 +0.03, B +0.02 -0.03 +0.02.
"""
import io
import json
import pathlib
import statistics
import sys
import tempfile
import unittest
from contextlib import redirect_stdout

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "tools"))
import seed_variance  # noqa: E402

LOSSES = {("baseline", ""): [4.00, 4.10, 4.20], ("baseline", "null"): [4.01, 4.08, 4.23],
          ("sink_logit", ""): [3.90, 4.05, 4.12], ("sink_logit", "null"): [3.92, 4.02, 4.14]}


def report():
    runs = [{"tier": "micro", "variant": variant, "arm": arm, "seed": s + 1, "status": "finished",
             "final_val_loss": loss}
            for (arm, variant), values in LOSSES.items() for s, loss in enumerate(values)]
    runs.append({"tier": "micro", "variant": "null", "arm": "baseline", "seed": 4, "status": "partial"})
    return {"runs": runs}


class SeedVariance(unittest.TestCase):
    def run_tool(self, data):
        with tempfile.TemporaryDirectory() as tmp:
            path = pathlib.Path(tmp) / "report.json"
            path.write_text(json.dumps(data))
            out = io.StringIO()
            with redirect_stdout(out):
                seed_variance.main([str(path)])
            return out.getvalue()

    def test_figures_by_hand(self):
        out = self.run_tool(report())
        var_d = statistics.variance([0.10, 0.05, 0.08])
        self.assertAlmostEqual(var_d, 0.0019 / 3, places=12)  # squared deviations sum to 0.0038 / 3, over n - 1 = 2
        self.assertIn("seeds [1, 2, 3]", out)
        self.assertIn("mean d +0.0767", out)
        self.assertIn(f"Var(d) {var_d:.3e}", out)
        self.assertIn(f"init part Var(d - d')/2 {0.0004 / 3 / 2:.3e} (11%)", out)
        null = [0.01, -0.02, 0.03, 0.02, -0.03, 0.02]
        self.assertIn(f"noise floor (sd of the 6 null differences): {statistics.stdev(null):.4f}", out)

    def test_too_few_seeds_is_an_error(self):
        data = report()
        data["runs"] = [r for r in data["runs"] if r["seed"] == 1]
        with self.assertRaises(SystemExit) as e:
            self.run_tool(data)
        self.assertIn("need at least 2 seeds", str(e.exception))


if __name__ == "__main__":
    unittest.main()
