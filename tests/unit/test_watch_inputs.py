"""tools/watch_metrics.py on hostile inputs: every bad line of metrics.jsonl gets a warning with its line
number while the good lines around it are written (read back with tensorboard's EventAccumulator);
paths that hold a directory or a FIFO, bad --poll values and a file as --tensorboard are errors
without a traceback; and nothing hangs (each command runs in a subprocess with a timeout).

Run by ctest (label unit) with the venv python, like test_watch_metrics.py.
"""
import json
import os
import re
import subprocess
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "tools", "watch_metrics.py")
sys.path.insert(0, HERE)
from test_watch_metrics import HAVE_TENSORBOARD, NO_TENSORBOARD, InTempRoot, read_scalars  # noqa: E402

TIMEOUT = 60  # seconds; the commands take a few


def good(step: int) -> bytes:
    return json.dumps({"step": step, "train_loss": 10.0 - step / 8, "lr": 1e-3}).encode()


# Each bad line, and the words its warning must contain.
BAD_LINES = [
    (b'{"step": 3, "train_loss": 7.5, "note": "\xff\xfe"}', "not UTF-8"),
    (b'{"step": 100000000000000000000000000000, "train_loss": 1}', "beyond 64 bits"),
    (b'{"step": 1e400, "train_loss": 1}', "beyond double"),
    (b'{"step": -1, "train_loss": 1}', "not an integer in [0, 2^63)"),
    (b'{"step": 2.5, "train_loss": 1}', "not an integer"),
    (b'{"step": "3", "train_loss": 1}', "not an integer"),
    (b'{"step": true, "train_loss": 1}', "not an integer"),
    (b'{"train_loss": 1}', "no step"),
    (b'[1, 2, 3]', "not a JSON object"),
    (b'{"step": 4, "train_loss": NaN}', "NaN is not JSON"),
    (b'{"step": 4, "train_loss": "7.5"}', "train_loss"),
    (b'{"step": 4, "x": ' + b"[" * 100000 + b"]" * 100000 + b"}", "nested deeper"),
    (b"[" * 200 + b"]" * 200, "nested deeper"),
    (b'{"step": 4, "x": 1' + b"0" * 5000 + b"}", "beyond 64 bits"),
    (b'{"step": 4, "step": 5}', "appears twice"),
    (b'{"step": 4, "a/b": 1, "a": {"b": 2}}', "two numbers for the tag"),
    (b'{"step": 4, "\\ud800": 1}', "not Unicode"),
    (b'{"step": 4, "train_loss": 1', "not JSON"),
    (b"   ", "empty"),
]


def run_watch(args, timeout=TIMEOUT):
    proc = subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, timeout=timeout,
                          errors="replace")
    return proc.returncode, proc.stderr


def run_arg(name, run_dir):
    return json.dumps({"name": name, "dir": run_dir})


class HostileInputs(InTempRoot):
    def make_run(self, name, lines: bytes, finished=True):
        run_dir = os.path.join(self.root, name)
        os.makedirs(run_dir, exist_ok=True)
        with open(os.path.join(run_dir, "metrics.jsonl"), "wb") as f:
            f.write(lines)
        if finished:
            time.sleep(0.01)
            with open(os.path.join(run_dir, "final.json"), "w") as f:
                f.write("{}\n")
        return run_dir

    def assert_no_traceback(self, stderr):
        self.assertNotIn("Traceback", stderr)

    @unittest.skipUnless(HAVE_TENSORBOARD, NO_TENSORBOARD)
    def test_every_bad_line_is_named_and_the_good_ones_are_written(self):
        # Good lines 1..n interleaved with the bad ones: line 2k is bad, line 2k+1 good.
        body, expected_lines = good(0) + b"\n", {}
        for i, (bad, words) in enumerate(BAD_LINES):
            body += bad + b"\n" + good(i + 1) + b"\n"
            expected_lines[2 * i + 2] = words
        run_dir = self.make_run("r", body)
        code, err = run_watch(["--tensorboard", self.tb, "--run", run_arg("r", run_dir)])
        self.assert_no_traceback(err)
        self.assertEqual(code, 0, err)
        for number, words in expected_lines.items():
            found = re.search(rf"metrics\.jsonl:{number}: (.*); line skipped", err)
            self.assertIsNotNone(found, f"no warning for line {number} ({words}):\n{err[-3000:]}")
            self.assertIn(words, found.group(1), f"line {number}")
        self.assertEqual(err.count("line skipped"), len(BAD_LINES))
        _, found = read_scalars(os.path.join(self.tb, "r"))
        self.assertEqual({step for (tag, step) in found if tag == "loss/train"}, set(range(len(BAD_LINES) + 1)))
        self.assertIn(f"r: {len(BAD_LINES) + 1} records (finished); {len(BAD_LINES)} line(s) skipped", err)

    @unittest.skipUnless(HAVE_TENSORBOARD, NO_TENSORBOARD)
    def test_a_line_longer_than_the_limit_is_skipped_to_its_end(self):
        sys.path.insert(0, os.path.dirname(SCRIPT))
        from watch_records import MAX_LINE_BYTES
        huge = b'{"step": 2, "x": "' + b"a" * (MAX_LINE_BYTES + 10) + b'"}'
        run_dir = self.make_run("r", good(1) + b"\n" + huge + b"\n" + good(3) + b"\n")
        code, err = run_watch(["--tensorboard", self.tb, "--run", run_arg("r", run_dir)])
        self.assertEqual(code, 0, err)
        self.assertRegex(err, r"metrics\.jsonl:2: longer than \d+ bytes; line skipped")
        _, found = read_scalars(os.path.join(self.tb, "r"))
        self.assertEqual({step for (tag, step) in found if tag == "loss/train"}, {1, 3})

    @unittest.skipUnless(HAVE_TENSORBOARD, NO_TENSORBOARD)
    def test_follow_ends_on_an_unterminated_last_line_after_final_json(self):
        for tail, written in ((good(2), {1, 2}), (b'{"step": 2, "train_lo', {1})):
            with self.subTest(tail=tail[:20]):
                run_dir = self.make_run(f"r{len(written)}", good(1) + b"\n" + tail)
                tb = os.path.join(self.tb, str(len(written)))
                code, err = run_watch(["--tensorboard", tb, "--follow", "--poll", "0.05", "--run",
                                       run_arg("r", run_dir)], timeout=30)
                self.assertEqual(code, 0, err)
                self.assertIn("(finished)", err)
                _, found = read_scalars(os.path.join(tb, "r"))
                self.assertEqual({step for (tag, step) in found if tag == "loss/train"}, written)
                if len(written) == 1:
                    self.assertRegex(err, r"metrics\.jsonl:2: not JSON .*without a newline\); line skipped")

    def test_an_unterminated_line_of_a_live_run_is_reported_not_written(self):
        run_dir = self.make_run("r", good(1) + b"\n" + b'{"step": 2', finished=False)
        code, err = run_watch(["--tensorboard", self.tb, "--run", run_arg("r", run_dir)])
        self.assertEqual(code, 0, err)
        self.assertRegex(err, r"metrics\.jsonl:2: incomplete")

    def test_a_directory_or_fifo_where_a_file_belongs_is_an_error_not_a_hang(self):
        cases = []
        d = os.path.join(self.root, "dir_metrics")
        os.makedirs(os.path.join(d, "metrics.jsonl"))
        cases.append((d, "metrics.jsonl is a directory"))
        f = os.path.join(self.root, "fifo_metrics")
        os.makedirs(f)
        os.mkfifo(os.path.join(f, "metrics.jsonl"))
        cases.append((f, "metrics.jsonl is a FIFO"))
        g = self.make_run("fifo_final", good(1) + b"\n", finished=False)
        os.mkfifo(os.path.join(g, "final.json"))
        cases.append((g, "final.json is a FIFO"))
        h = self.make_run("dir_final", good(1) + b"\n", finished=False)
        os.makedirs(os.path.join(h, "final.json"))
        cases.append((h, "final.json is a directory"))
        c = self.make_run("fifo_config", good(1) + b"\n")
        os.mkfifo(os.path.join(c, "config.yaml"))
        # All in one command: each bad run is named, and the good one beside them is still written.
        runs = []
        for run_dir, _ in cases + [(c, "")]:
            runs += ["--run", run_arg(os.path.basename(run_dir), run_dir)]
        for extra in ([], ["--follow", "--poll", "0.05"]):
            with self.subTest(follow=bool(extra)):
                code, err = run_watch(["--tensorboard", os.path.join(self.tb, str(len(extra))), *extra, *runs])
                self.assert_no_traceback(err)
                self.assertEqual(code, 1, err)
                for run_dir, words in cases:
                    self.assertIn(f"error: {os.path.basename(run_dir)}: {run_dir}/{words}", err)
                self.assertIn("config.yaml: not shown as text", err)
                self.assertIn("fifo_config: 1 records (finished)", err)

    def test_bad_poll_values_are_refused(self):
        run_dir = self.make_run("r", good(1) + b"\n")
        for poll in ("inf", "-inf", "nan", "0", "-1", "1e300", "3601", "x"):
            with self.subTest(poll=poll):
                code, err = run_watch(["--tensorboard", self.tb, "--follow", "--poll", poll, "--run",
                                       run_arg("r", run_dir)], timeout=30)
                self.assertNotEqual(code, 0)
                self.assertIn("--poll", err)
                self.assert_no_traceback(err)

    def test_a_file_as_the_log_directory_is_refused(self):
        run_dir = self.make_run("r", good(1) + b"\n")
        with open(self.tb, "w") as f:
            f.write("not a directory\n")
        code, err = run_watch(["--tensorboard", self.tb, "--run", run_arg("r", run_dir)])
        self.assertEqual(code, 1)
        self.assertIn(f"--tensorboard {self.tb} is not a directory", err)
        self.assert_no_traceback(err)
        os.unlink(self.tb)
        os.makedirs(os.path.join(self.tb))
        with open(os.path.join(self.tb, "r"), "w") as f:
            f.write("a file where the run's events go\n")
        code, err = run_watch(["--tensorboard", self.tb, "--run", run_arg("r", run_dir)])
        self.assertEqual(code, 1)
        self.assertIn("cannot make", err)
        self.assert_no_traceback(err)

    def test_bad_run_arguments_are_refused(self):
        run_dir = self.make_run("r", good(1) + b"\n")
        for bad in ({"name": "../escape", "dir": run_dir}, {"name": "/abs", "dir": run_dir}, {"name": "", "dir": run_dir},
                    {"name": "a//b", "dir": run_dir}, {"name": "r", "dir": run_dir, "seed": [1]}):
            with self.subTest(run=bad):
                code, err = run_watch(["--tensorboard", self.tb, "--run", json.dumps(bad)])
                self.assertEqual(code, 1, err)
                self.assertIn("--run", err)
                self.assert_no_traceback(err)
        code, err = run_watch(["--tensorboard", self.tb, "--run", run_arg("r", run_dir), "--run", run_arg("r", run_dir)])
        self.assertEqual(code, 1)
        self.assertIn("two runs are named 'r'", err)


if __name__ == "__main__":
    unittest.main()
