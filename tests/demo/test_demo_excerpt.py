"""README.md's demo excerpt is what the demo's sweep gives: the sweep of scripts/demo.sh
(configs/sweeps/demo.yaml), run from scratch in a temporary working directory on its own copy of the
synthetic corpus, then its report, cut by tools/readme_demo.py and compared with the README.

Registered with ctest as demo.readme_excerpt (label demo) with ATTNLAB_BUILD_DIR set; by hand:
    ATTNLAB_BUILD_DIR=build python -m unittest tests/demo/test_demo_excerpt.py
It takes what the demo's sweep takes (docs/sweeps.md, "The demo's budget"): minutes on 2 cores.
"""
import os
import subprocess
import sys
import tempfile
import unittest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("ATTNLAB_BUILD_DIR", os.path.join(REPO, "build"))
sys.path.insert(0, os.path.join(REPO, "tools"))
import readme_demo  # noqa: E402


def run(cmd, cwd):
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return done.stdout


class DemoExcerpt(unittest.TestCase):
    def test_readme_excerpt_is_the_demo_report(self):
        attnlab = os.path.join(BUILD, "attnlab")
        with tempfile.TemporaryDirectory() as work:
            # The corpus as scripts/prepare_corpus.sh writes it (its defaults), here rather than in data/.
            run([sys.executable, os.path.join(REPO, "tools", "prepare_data.py"), "bb", "--out",
                 os.path.join(work, "data", "bb"), "--name", "bb", "--quiet"], work)
            run([attnlab, "sweep", "--config", os.path.join(REPO, "configs", "sweeps", "demo.yaml"), "--workers", "2"],
                work)
            run([attnlab, "report", "runs/sweeps/demo", "--probes"], work)
            report, probes = readme_demo.read_report(os.path.join(work, "runs", "sweeps", "demo", "report"))
        with open(os.path.join(REPO, "README.md"), encoding="utf-8") as f:
            readme = f.read()
        body = readme_demo.excerpt(report, probes)
        self.assertEqual(readme, readme_demo.rewrite(readme, body),
                         "README.md's demo excerpt differs from this build's demo report; update it with "
                         "python3 tools/readme_demo.py runs/sweeps/demo/report after scripts/demo.sh")


if __name__ == "__main__":
    unittest.main()
