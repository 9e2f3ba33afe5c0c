"""The GPU check's dry run (docs/building.md, "GPU check"): scripts/gpu_bundle.sh packages this build's
binaries, and scripts/gpu_check.sh --dry-run runs every step's CPU form from that bundle, its
libraries resolved in a clean environment, the bundle and the tree within what travels; a step that
overruns its budget is stopped and the next one still runs.

Run by ctest (gpu_check.dry_run) with ATTNLAB_BUILD_DIR set to the build; skipped without it.
"""
import json
import os
import re
import shutil
import subprocess
import tempfile
import unittest
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BUILD = os.environ.get("ATTNLAB_BUILD_DIR")


@unittest.skipUnless(BUILD, "ATTNLAB_BUILD_DIR is not set (run through ctest)")
class GpuCheckDryRun(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # The bundle goes under the build directory, which git ignores, as it must.
        cls.bundle = Path(BUILD) / "gpu-bundle-dry-run"
        env = dict(os.environ, ATTNLAB_BUILD_DIR=BUILD, ATTNLAB_GPU_BUNDLE_NO_BUILD="1")
        made = subprocess.run(["bash", str(REPO / "scripts/gpu_bundle.sh"), str(cls.bundle)], env=env,
                              capture_output=True, text=True)
        cls.packaging = made.stdout + made.stderr
        if made.returncode != 0:
            raise AssertionError("gpu_bundle.sh failed:\n" + cls.packaging)

    def dry_run(self, **env):
        out = Path(tempfile.mkdtemp(prefix="gpu_check_dry_"))
        self.addCleanup(shutil.rmtree, out, True)
        done = subprocess.run(["bash", str(REPO / "scripts/gpu_check.sh"), "--dry-run", str(out)],
                              env=dict(os.environ, ATTNLAB_GPU_BUNDLE=str(self.bundle), **env),
                              capture_output=True, text=True)
        return done, (out / "summary.txt").read_text(), out

    def test_packaging_resolves_every_library_and_fits(self):
        for binary in ("attnlab", "test_gpu", "bench_attention"):
            self.assertRegex(self.packaging, rf"{binary}: \d+ libraries, each from the bundle, torch's wheels or the base system")
        carried = (self.bundle / "manifest.txt").read_text()
        for lib in ("libyaml-cpp", "libspdlog", "libfmt", "libcrypto"):
            self.assertIn(lib, carried)
        self.assertFalse(list((self.bundle / "lib").glob("libtorch*")), "torch must not be carried")
        spare = int(re.search(r"(-?\d+) KiB to spare", self.packaging).group(1))
        self.assertGreater(spare, 8 * 1024, self.packaging)

    def test_every_step_runs_from_the_bundle(self):
        done, summary, out = self.dry_run()
        self.assertEqual(done.returncode, 0, summary + done.stdout + done.stderr)
        for step in ("self_check", "gpu_tests", "bench_attention", "bench_step", "train_check"):
            self.assertRegex(summary, rf"{step}: ok in \d+ s \(budget")
        self.assertIn("libraries: every binary's resolve", summary)
        self.assertRegex(summary, r"size: tree \d+ KiB \+ bundle \d+ KiB")
        files = sorted(p.name for p in out.iterdir())
        self.assertTrue(all(p.is_file() for p in out.iterdir()), files)
        self.assertLessEqual(len(files), 8, f"at most 8 files come back from the GPU machine: {files}")
        table = (out / "self-check.md").read_text()
        self.assertIn("| passed |", table)
        self.assertNotIn("[info]", table, "the log goes to stderr, the table alone to the file")
        records = json.loads((out / "self-check.json").read_text())
        self.assertEqual({r["arm"] for r in records}, {"baseline", "sink_logit", "renorm"})
        self.assertTrue(all(r["passed"] and r["tensors"]["dq"]["error"] <= r["tensors"]["dq"]["bound"]
                            for r in records), records)
        self.assertIn("| baseline | 2 |", (out / "train-check.md").read_text())

    def test_a_step_over_its_budget_is_stopped_and_the_next_runs(self):
        done, summary, _ = self.dry_run(ATTNLAB_GPU_CHECK_STEPS="1 2", ATTNLAB_GPU_CHECK_BUDGETS="self_check=0.5")
        self.assertEqual(done.returncode, 1, summary)
        self.assertRegex(summary, r"self_check: STOPPED at its budget of 0.5 s")
        self.assertRegex(summary, r"gpu_tests: ok in \d+ s")
        self.assertNotIn("bench_attention", summary.split("budgets:")[1].split("\n", 1)[1])


if __name__ == "__main__":
    unittest.main()
