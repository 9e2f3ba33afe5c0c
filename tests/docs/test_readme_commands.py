"""Every command in README.md's fenced bash blocks is either run here (the cheap ones, as written,
from the repository root, with build/attnlab replaced by the binary under test) or listed below with
the reason it is not. A command added to the README without a decision fails this test.

Registered with ctest as docs.readme_commands (label e2e) with ATTNLAB_BUILD_DIR set; by hand:
    ATTNLAB_BUILD_DIR=build python -m unittest tests/docs/test_readme_commands.py
"""
import os
import re
import shlex
import subprocess
import unittest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("ATTNLAB_BUILD_DIR", os.path.join(REPO, "build"))

# Run in CI: no data, no trained run, seconds each, nothing written.
CHEAP = [
    "build/attnlab arms",
    "build/attnlab config --print --config configs/demo.yaml --set model.arm=combo2",
    "build/attnlab sweep --config configs/sweeps/demo.yaml --dry-run",
]
# Not run in CI, by prefix, and why. (They were run by hand from a fresh corpus when the README changed.)
EXPENSIVE = {
    "scripts/demo.sh": "setup, build, corpora and a 9-run sweep: about 28 minutes from a fresh machine",
    "scripts/test.sh": "the whole suite; this test is part of it",
    "build/attnlab train ": "trains the micro tier for 600 steps on the prepared corpus (minutes)",
    "build/attnlab eval ": "needs the trained run runs/sl",
    "build/attnlab sample ": "needs the trained run runs/sl",
    "build/attnlab watch ": "needs the trained run runs/sl",
    "build/attnlab sweep --config configs/sweeps/demo.yaml": "runs the demo sweep (about 6 minutes on 2 cores; tests/demo runs it)",
    "build/attnlab report ": "needs a finished sweep",
    "build/attnlab retention ": "needs the trained run runs/sl",
    "build/attnlab ablate ": "needs the trained run runs/sl",
    "build/attnlab probe ": "needs the trained run runs/sl",
    "build/attnlab inject ": "needs the trained run runs/sl",
    "build/attnlab activations ": "needs the trained run runs/sl",
    "build/attnlab export-hf ": "needs the trained run runs/sl",
    "build/attnlab import-hf ": "needs a model directory from tools/hf_fetch.py (network)",
}


def readme_commands(path=os.path.join(REPO, "README.md")):
    """Commands of the ```bash blocks: continuation lines joined, comments and blank lines dropped."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    commands = []
    for block in re.findall(r"^```bash\n(.*?)^```", text, flags=re.M | re.S):
        joined = re.sub(r"\\\n\s*", " ", block)
        for line in joined.splitlines():
            tokens = shlex.split(line, comments=True)
            if tokens:
                commands.append(" ".join(shlex.quote(t) for t in tokens))
    return commands


def normalised(command):
    return " ".join(shlex.split(command))


class ReadmeCommands(unittest.TestCase):
    def test_every_command_is_classified(self):
        commands = readme_commands()
        self.assertGreater(len(commands), 10)
        cheap = {normalised(c) for c in CHEAP}
        for command in commands:
            plain = normalised(command)
            if plain in cheap:
                continue
            self.assertTrue(any(plain.startswith(prefix) for prefix in EXPENSIVE),
                            f"README command not classified as cheap or expensive: {command}")
        for c in CHEAP:  # a cheap command that left the README is stale here
            self.assertIn(normalised(c), {normalised(x) for x in commands})

    def test_cheap_commands_run_as_written(self):
        binary = os.path.join(BUILD, "attnlab")
        if not os.path.exists(binary):
            self.skipTest(f"no {binary} (set ATTNLAB_BUILD_DIR)")
        for command in CHEAP:
            argv = shlex.split(command)
            argv[0] = binary
            r = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=120)
            self.assertEqual(r.returncode, 0, f"{command}\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
            self.assertTrue(r.stdout.strip(), command)


if __name__ == "__main__":
    unittest.main()
