"""tools/phenomena_trajectory.py on hand-made probe.json files: the sink head is the head with the
largest first-key mass over every layer, its value drain is that head's, the residual peak is the
largest over layers, missing values print as '-'; checkpoints are taken in step order, and a run
without any is refused.

Run by ctest (label unit) with the venv python, like test_readme_demo.py.
"""
import pathlib
import subprocess
import sys
import tempfile
import unittest

TOOLS = pathlib.Path(__file__).resolve().parents[2] / "tools"
sys.path.insert(0, str(TOOLS))
import phenomena_trajectory as pt  # noqa: E402

PROBE = {
    "summary": {
        "layers": [
            {"layer": 0, "heads": {"first_key_mass": [0.2, 0.9], "value_drain": [0.8, 0.1]}, "residual_peak": 1.3},
            {"layer": 1, "heads": {"first_key_mass": [0.5, None], "value_drain": [0.4, 0.6]}, "residual_peak": 2.5},
        ],
        "model": {"other_key_mass": 0.45},
    },
    "sink_state": {"max_ratio": 7.25, "layer": 1},
}


class Trajectory(unittest.TestCase):
    def test_the_sink_head_and_its_drain_the_peak_over_layers(self):
        self.assertEqual(pt.row(250, PROBE), ["250", "L0H1", "90.0%", "0.100", "45.0%", "2.500", "7.2"])

    def test_missing_values_print_as_dashes(self):
        bare = {"summary": {"layers": [{"layer": 0, "heads": {}}], "model": {}}}
        self.assertEqual(pt.row(1, bare), ["1", "-", "-", "-", "-", "-", "-"])

    def test_the_table_has_a_row_per_step(self):
        text = pt.table([pt.row(250, PROBE), pt.row(500, PROBE)])
        lines = text.splitlines()
        self.assertEqual(len(lines), 4)
        self.assertTrue(lines[0].startswith("| step | sink head |"))
        self.assertTrue(lines[3].startswith("| 500 | L0H1 |"))

    def test_checkpoints_in_step_order_and_none_is_refused(self):
        with tempfile.TemporaryDirectory() as d:
            run = pathlib.Path(d)
            for step in (1000, 250, 500):
                (run / "checkpoints" / f"step_{step:08d}").mkdir(parents=True)
            (run / "checkpoints" / "step_x").mkdir()
            self.assertEqual([s for s, _ in pt.checkpoints(run)], [250, 500, 1000])
            empty = run / "empty"
            empty.mkdir()
            done = subprocess.run([sys.executable, str(TOOLS / "phenomena_trajectory.py"), str(empty)],
                                  capture_output=True, text=True)
            self.assertNotEqual(done.returncode, 0)
            self.assertIn("holds no step_N checkpoint", done.stderr)


if __name__ == "__main__":
    unittest.main()
