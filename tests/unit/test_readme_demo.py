"""tools/readme_demo.py on a hand-made report.md, probes.md and README: the excerpt is the
paired-differences table, its "Not in this sweep" line, the noise-floor line, the paper-layout table
when there is one and the paired probe differences, nothing else; only the marked block
of the README changes; --check exits 1 on a difference and 0 once rewritten. And README.md itself
holds the markers, so scripts/demo.sh's check can find its excerpt.

Run by ctest (label unit) with the venv python, like test_plot_report.py.
"""
import os
import pathlib
import subprocess
import sys
import tempfile
import unittest

TOOLS = pathlib.Path(__file__).resolve().parents[2] / "tools"
sys.path.insert(0, str(TOOLS))
import readme_demo as rd  # noqa: E402

REPORT = """# attnlab report: runs/sweeps/demo

8 runs: 8 finished

## micro

### Final validation loss (nats/token)

| arm | mean | sd | n | seeds |
|---|---:|---:|---:|---|
| baseline | 5.7 | 0.1 | 2 | 1, 2 |

### Paired differences (nats; positive: the arm subtracted is better)

| quantity | definition | mean |
|---|---|---:|
| zero-option increment | L(baseline) - L(sink_logit) | +0.1501 |

- zero-option increment: seed 3 not paired (no run)

Not in this sweep: standalone gain norm_gate (no run of norm_gate).

### Noise floor (null pairs: an arm again under another init seed, on the same data)

3 null differences (twin - original, nats): mean +0.0100, sd 0.0200 (the floor); arms baseline.

## Zero option vs filtering (paper_figures.md layout)

| quantity | | micro |
|---|---|---:|
| zero-option increment, L(baseline) - L(sink_logit) | ours | +0.1501 |

## Runs not finished (not used in any pair)

None: every run finished.
"""

EXPECTED = [
    "| quantity | definition | mean |",
    "|---|---|---:|",
    "| zero-option increment | L(baseline) - L(sink_logit) | +0.1501 |",
    "",
    "Not in this sweep: standalone gain norm_gate (no run of norm_gate).",
    "",
    "3 null differences (twin - original, nats): mean +0.0100, sd 0.0200 (the floor); arms baseline.",
    "",
    "| quantity | | micro |",
    "|---|---|---:|",
    "| zero-option increment, L(baseline) - L(sink_logit) | ours | +0.1501 |",
]

PROBES = """## Trained-model measurements, tier bb (mean over seeds)

| arm | first-key mass |
|---|---:|
| baseline | 50% |

## Trained-model measurements, tier bb (null) (mean over seeds)

| arm | first-key mass |
|---|---:|
| baseline | 49% |

### Paired probe differences, bb

m(arm) - m(baseline) at each seed.

| measure | arm | mean |
|---|---|---:|
| first_key_mass | out_gate | -30.00% |
"""

README = "# title\n\nbefore\n\n" + rd.BEGIN + "\n```\nold figures\n```\n" + rd.END + "\n\nafter\n"


class ReadmeDemo(unittest.TestCase):
    def test_excerpt_is_the_two_tables_and_the_not_in_sweep_line(self):
        self.assertEqual(rd.excerpt(REPORT), EXPECTED)

    def test_the_paired_probe_table_follows_from_probes_md(self):
        self.assertEqual(rd.excerpt(REPORT, PROBES), EXPECTED + [
            "", "Trained-model measurements, tier bb (mean over seeds)", "", "| arm | first-key mass |", "|---|---:|",
            "| baseline | 50% |", "", "Paired probe differences, bb", "", "| measure | arm | mean |", "|---|---|---:|",
            "| first_key_mass | out_gate | -30.00% |"])

    def test_a_variant_against_the_plain_runs_follows_the_paper_table(self):
        variant = REPORT.replace("## Runs not finished", "## Variant against the plain runs: tier bb (optim.name-sgd)\n\n"
                                 "Each run of the variant against ...\n\n### Variant differences (nats)\n\n"
                                 "| quantity | definition | mean |\n|---|---|---:|\n"
                                 "| variant cost baseline | L(baseline, optim.name-sgd) - L(baseline) | +0.2000 |\n\n"
                                 "## Runs not finished")
        self.assertEqual(rd.excerpt(variant), EXPECTED + [
            "", "Variant against the plain runs: tier bb (optim.name-sgd)", "", "| quantity | definition | mean |",
            "|---|---|---:|", "| variant cost baseline | L(baseline, optim.name-sgd) - L(baseline) | +0.2000 |"])

    def test_only_the_marked_block_changes(self):
        new = rd.rewrite(README, EXPECTED)
        self.assertTrue(new.startswith("# title\n\nbefore\n\n" + rd.BEGIN + "\n```\n| quantity |"))
        self.assertTrue(new.endswith("+0.1501 |\n```\n" + rd.END + "\n\nafter\n"))
        self.assertNotIn("old figures", new)

    def test_a_report_without_its_tables_is_refused(self):
        with self.assertRaisesRegex(ValueError, "Paired differences"):
            rd.excerpt("# attnlab report\n\nnothing here\n")

    def test_a_readme_without_markers_is_refused(self):
        with self.assertRaisesRegex(ValueError, "demo-report:begin"):
            rd.rewrite("# no markers\n", EXPECTED)

    def test_check_fails_until_rewritten(self):
        with tempfile.TemporaryDirectory() as d:
            report, readme = pathlib.Path(d, "report.md"), pathlib.Path(d, "README.md")
            report.write_text(REPORT)
            readme.write_text(README)
            cmd = [sys.executable, str(TOOLS / "readme_demo.py"), str(report), "--readme", str(readme)]
            self.assertEqual(subprocess.run(cmd + ["--check"], capture_output=True).returncode, 1)
            self.assertEqual(readme.read_text(), README)  # --check writes nothing
            self.assertEqual(subprocess.run(cmd, capture_output=True).returncode, 0)
            self.assertEqual(subprocess.run(cmd + ["--check"], capture_output=True).returncode, 0)

    def test_the_readme_holds_the_markers_once(self):
        text = (TOOLS.parent / "README.md").read_text(encoding="utf-8")
        self.assertEqual(text.count(rd.BEGIN), 1)
        self.assertEqual(text.count(rd.END), 1)


if __name__ == "__main__":
    unittest.main()
