"""tools/watch_metrics.py --wandb against wandb itself: the offline files it writes are read back
(wandb's transaction log, records parsed with wandb's own protobuf classes) to check that one attnlab
run is one W&B run however often it is watched, that every step is sent once, and that a resume under
another step budget follows the rule of docs/monitoring.md (W&B keeps the values it was sent first,
an alert and the run's config say so).

Skipped when wandb is not importable (scripts/setup.sh installs it). Run by ctest (label unit).
"""
import fcntl
import glob
import json
import os
import struct
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "tools", "watch_metrics.py")

try:
    from wandb.proto import wandb_internal_pb2
    HAVE_WANDB = True
except ImportError:
    HAVE_WANDB = False
NO_WANDB = "wandb is not installed in this Python (scripts/setup.sh installs it)"


def log_records(path: str):
    """The records of a .wandb file: a 7-byte header (":W&B", magic, version), then LevelDB's log
    format in 32 KiB blocks (each record a 7-byte header of CRC, length and type: full, first, middle,
    last), as wandb's own datastore writes it."""
    block, header = 32768, 7
    with open(path, "rb") as f:
        data = f.read()
    assert data[:4] == b":W&B", path
    pos, parts = header, b""
    while pos + header <= len(data):
        left = block - pos % block
        if left < header:
            pos += left
            continue
        _, length, kind = struct.unpack("<IHB", data[pos:pos + header])
        if kind == 0:
            pos += left  # the zero padding at a block's end
            continue
        chunk, pos = data[pos + header:pos + header + length], pos + header + length
        if kind == 1:
            yield chunk
        elif kind == 2:
            parts = chunk
        elif kind == 3:
            parts += chunk
        elif kind == 4:
            yield parts + chunk


def read_offline(wandb_dir: str) -> dict:
    """Per run id, in the order the segments were written: history rows {step: {key: value}}, alerts,
    config updates and display names."""
    runs: dict = {}
    for path in sorted(glob.glob(os.path.join(wandb_dir, "wandb", "offline-run-*", "run-*.wandb"))):
        run_id = None
        for raw in log_records(path):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(raw)
            kind = record.WhichOneof("record_type")
            if kind == "run":
                run_id = record.run.run_id
                got = runs.setdefault(run_id, {"segments": 0, "history": [], "alerts": [], "config": [], "names": set()})
                got["segments"] += 1
                got["names"].add(record.run.display_name)
                got["group"] = record.run.run_group
            elif kind == "history":
                row = {item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in record.history.item}
                runs[run_id]["history"].append(row)
            elif kind == "alert":
                runs[run_id]["alerts"].append(record.alert.text)
            elif kind == "config":
                for item in record.config.update:
                    runs[run_id]["config"].append((item.key or "/".join(item.nested_key), json.loads(item.value_json)))
    return runs


def line(step, loss, lr):
    return {"step": step, "train_loss": loss, "lr": lr}


def write_metrics(run_dir, records, finished=True):
    os.makedirs(run_dir, exist_ok=True)
    tmp = os.path.join(run_dir, "metrics.jsonl.tmp")
    with open(tmp, "w") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")
    os.replace(tmp, os.path.join(run_dir, "metrics.jsonl"))  # a new inode, as a resume's rewrite
    final = os.path.join(run_dir, "final.json")
    if finished:
        with open(final, "w") as f:
            f.write("{}\n")
    elif os.path.exists(final):
        os.unlink(final)


@unittest.skipUnless(HAVE_WANDB, NO_WANDB)
class WandbOfflineRuns(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = self.tmp.name
        self.wb = os.path.join(self.root, "wb")
        self.run_dir = os.path.join(self.root, "sweep", "micro", "baseline", "s1")
        self.arg = json.dumps({"name": "micro/baseline/s1", "dir": self.run_dir, "arm": "baseline", "seed": 1,
                               "tier": "micro", "variant": ""})

    def tearDown(self):
        self.tmp.cleanup()

    def watch(self, expect=0):
        env = dict(os.environ, WANDB_SILENT="true", WANDB_DISABLE_GIT="true")
        proc = subprocess.run([sys.executable, SCRIPT, "--wandb", "--wandb-dir", self.wb, "--group", "sweep",
                               "--run", self.arg], capture_output=True, text=True, timeout=120, env=env)
        self.assertEqual(proc.returncode, expect, proc.stderr)
        self.assertNotIn("Traceback", proc.stderr)
        return proc.stderr

    def only_run(self):
        runs = read_offline(self.wb)
        self.assertEqual(len(runs), 1, f"one attnlab run, W&B runs {sorted(runs)}")
        (run_id, run), = runs.items()
        self.assertEqual(run["names"], {"micro/baseline/s1"})
        self.assertEqual(run["group"], "sweep")
        return run_id, run

    def steps(self, run):
        """{step: train_loss} over every segment, asserting that no step was sent twice."""
        out = {}
        for row in run["history"]:
            self.assertNotIn(row["_step"], out, f"step {row['_step']} sent twice")
            out[row["_step"]] = row["loss/train"]
        return out

    def test_every_watch_of_a_run_writes_the_same_w_and_b_run_and_each_step_once(self):
        first = [line(s, 10.0 - s, 1e-3) for s in range(1, 4)]
        write_metrics(self.run_dir, first, finished=False)
        self.watch()
        self.watch()  # nothing new: nothing sent
        write_metrics(self.run_dir, first + [line(s, 10.0 - s, 1e-3) for s in range(4, 7)])
        self.watch()
        run_id, run = self.only_run()
        self.assertTrue(run_id.startswith("attnlab-"))
        self.assertEqual(self.steps(run), {s: 10.0 - s for s in range(1, 7)})
        self.assertEqual(run["alerts"], [])

    def test_a_resume_under_another_budget_keeps_what_w_and_b_holds_and_says_so(self):
        # Segment 1 logged steps 1..8 under a budget of 8 steps; the resume from the step-5 checkpoint
        # under a budget of 12 rewrites steps 6..8 with other learning rates and losses.
        seg1 = [line(s, 10.0 - s, 1e-3 * (9 - s)) for s in range(1, 9)]
        write_metrics(self.run_dir, seg1, finished=False)
        self.watch()
        change = {"type": "schedule_change", "step": 5, "total_steps_before": 8, "total_steps": 12,
                  "next_lr_before": 3e-3, "next_lr": 7e-3}
        seg2 = seg1[:5] + [change] + [line(s, 20.0 - s, 1e-3 * (13 - s)) for s in range(6, 13)]
        write_metrics(self.run_dir, seg2)
        err = self.watch()
        _, run = self.only_run()
        expected = {s: 10.0 - s for s in range(1, 9)}            # what W&B was sent first stays
        expected.update({s: 20.0 - s for s in range(9, 13)})      # the new schedule's after that
        self.assertEqual(self.steps(run), expected)
        self.assertEqual(len(run["alerts"]), 1, run["alerts"])
        self.assertIn("8 -> 12 steps", run["alerts"][0])
        self.assertIn("already holds steps 6-8", run["alerts"][0])
        self.assertIn(("schedule_changes", [change]), run["config"])
        self.assertIn("keeps what it was sent first for steps 6-8", err)
        # Watching again changes nothing and says nothing new.
        err = self.watch()
        _, run = self.only_run()
        self.assertEqual(self.steps(run), expected)
        self.assertEqual(len(run["alerts"]), 1)

    def test_a_second_watch_of_the_same_w_and_b_run_is_refused_while_one_writes(self):
        write_metrics(self.run_dir, [line(1, 9.0, 1e-3)])
        self.watch()
        lock = glob.glob(os.path.join(self.wb, "attnlab-watch", "*.lock"))
        self.assertEqual(len(lock), 1)
        with open(lock[0], "r+") as held:
            fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
            held.write("4242\n")
            held.flush()
            err = self.watch(expect=1)
        self.assertIn("is being written by another attnlab watch (pid 4242)", err)


if __name__ == "__main__":
    unittest.main()
