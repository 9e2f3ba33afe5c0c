"""tools/watch_metrics.py: the TensorBoard events of a run hold every number of its metrics.jsonl
(read back with tensorboard's EventAccumulator), a sweep's runs carry arm/seed/tier tags, a rewritten
file replaces the old events, --follow ends when the runs finish, and W&B gets the same numbers.

Run by ctest (label unit) with the venv python, like test_prepare_data.py.
"""
import json
import os
import sys
import tempfile
import threading
import time
import types
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools"))
import watch_metrics as wm  # noqa: E402

try:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams import plugin_data_pb2
    HAVE_TENSORBOARD = True
except ImportError:
    HAVE_TENSORBOARD = False
NO_TENSORBOARD = "tensorboard is not installed in this Python (scripts/setup.sh installs it)"

# A run's metrics.jsonl as the trainer writes it: the step-0 activation record, training lines with
# and without an evaluation, MFU on one line, and a key the follower does not know.
LINES = [
    {"type": "activations", "step": 0, "probe_sequences": 2, "massive": {"min_max": 100.0, "min_ratio": 1000.0},
     "layers": [{"layer": 0, "sink": {"max_abs": 1.5, "rms": 0.25}, "peak": {"max_abs": 2.5, "sequence": 1}},
                {"layer": 1, "sink": {"max_abs": 3.5, "rms": 0.5}, "peak": {"max_abs": 4.5, "sequence": 0}}]},
    {"step": 1, "tokens": 4096, "train_loss": 8.25, "val_loss": None, "lr": 1e-4, "grad_norm": 2.5,
     "tokens_per_s": 6000.0, "elapsed_s": 0.75},
    {"step": 2, "tokens": 8192, "train_loss": 7.5, "val_loss": 7.75, "lr": 2e-4, "grad_norm": 1.25,
     "tokens_per_s": 7000.0, "elapsed_s": 1.5, "mfu": 0.375, "note": "text is not a scalar", "custom": 3,
     "tasks": {"copa": {"acc": 0.5, "acc_norm": 0.25, "n": 4, "fingerprint": "ffffffffffffffc5"}}},
]
# Every number above, as (tag, step): value, written out by hand.
EXPECTED = {
    ("activations/probe_sequences", 0): 2, ("activations/massive/min_max", 0): 100.0,
    ("activations/massive/min_ratio", 0): 1000.0,
    ("activations/layers/layer0/layer", 0): 0, ("activations/layers/layer0/sink/max_abs", 0): 1.5,
    ("activations/layers/layer0/sink/rms", 0): 0.25, ("activations/layers/layer0/peak/max_abs", 0): 2.5,
    ("activations/layers/layer0/peak/sequence", 0): 1,
    ("activations/layers/layer1/layer", 0): 1, ("activations/layers/layer1/sink/max_abs", 0): 3.5,
    ("activations/layers/layer1/sink/rms", 0): 0.5, ("activations/layers/layer1/peak/max_abs", 0): 4.5,
    ("activations/layers/layer1/peak/sequence", 0): 0,
    ("progress/tokens", 1): 4096, ("loss/train", 1): 8.25, ("optim/lr", 1): 1e-4, ("optim/grad_norm", 1): 2.5,
    ("speed/tokens_per_s", 1): 6000.0, ("progress/elapsed_s", 1): 0.75,
    ("progress/tokens", 2): 8192, ("loss/train", 2): 7.5, ("loss/val", 2): 7.75, ("optim/lr", 2): 2e-4,
    ("optim/grad_norm", 2): 1.25, ("speed/tokens_per_s", 2): 7000.0, ("progress/elapsed_s", 2): 1.5,
    ("speed/mfu", 2): 0.375, ("other/custom", 2): 3,
    ("tasks/copa/acc", 2): 0.5, ("tasks/copa/acc_norm", 2): 0.25, ("tasks/copa/n", 2): 4,
}


def write_lines(path, lines, mode="w"):
    with open(path, mode, encoding="utf-8") as f:
        for line in lines:
            f.write(json.dumps(line) + "\n")


def make_run(root, name, lines, finished=True, **tags):
    run_dir = os.path.join(root, name)
    os.makedirs(run_dir, exist_ok=True)
    with open(os.path.join(run_dir, "config.yaml"), "w") as f:
        f.write("seed: 1\n")
    write_lines(os.path.join(run_dir, "metrics.jsonl"), lines)
    if finished:
        with open(os.path.join(run_dir, "final.json"), "w") as f:
            f.write("{}\n")
    return json.dumps({"name": name, "dir": run_dir, **tags})


def read_scalars(log_dir):
    acc = EventAccumulator(log_dir, size_guidance={"scalars": 0, "tensors": 0})
    acc.Reload()
    found = {}
    for tag in acc.Tags()["scalars"]:
        for event in acc.Scalars(tag):
            key = (tag, event.step)
            assert key not in found, f"{key} written twice"
            found[key] = event.value
    return acc, found


class InTempRoot(unittest.TestCase):
    """A fresh directory per test: self.root, with the TensorBoard log directory self.tb in it."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = self.tmp.name
        self.tb = os.path.join(self.root, "tb")

    def tearDown(self):
        self.tmp.cleanup()


@unittest.skipUnless(HAVE_TENSORBOARD, NO_TENSORBOARD)
class TensorBoardEvents(InTempRoot):

    def assert_scalars(self, found, expected):
        self.assertEqual(set(found), set(expected))
        for key, value in expected.items():
            self.assertAlmostEqual(found[key], value, delta=1e-6 * max(1.0, abs(value)), msg=key)  # float32

    def test_a_finished_run_holds_every_scalar_of_its_metrics(self):
        run = make_run(self.root, "runs/sl", LINES, arm="sink_logit", seed=1, tier="micro", variant="")
        self.assertEqual(wm.main(["--tensorboard", self.tb, "--run", run]), 0)
        _, found = read_scalars(os.path.join(self.tb, "runs/sl"))
        self.assert_scalars(found, EXPECTED)

    def test_a_sweeps_runs_are_one_experiment_with_arm_seed_tier_tags(self):
        runs = [make_run(self.root, f"sweep/micro/{arm}/s{seed}", LINES[1:], arm=arm, seed=seed, tier="micro",
                         variant="") for arm in ("baseline", "combo2") for seed in (1, 2)]
        args = ["--tensorboard", self.tb, "--group", "sweep"]
        for r in runs:
            args += ["--run", r]
        self.assertEqual(wm.main(args), 0)
        for arm in ("baseline", "combo2"):
            for seed in (1, 2):
                acc, found = read_scalars(os.path.join(self.tb, f"sweep/micro/{arm}/s{seed}"))
                self.assertEqual(found[("loss/val", 2)], 7.75)
                content = acc.PluginTagToContent("hparams")
                info = plugin_data_pb2.HParamsPluginData.FromString(content["_hparams_/session_start_info"])
                hp = info.session_start_info.hparams
                self.assertEqual(hp["arm"].string_value, arm)
                self.assertEqual(hp["tier"].string_value, "micro")
                self.assertEqual(hp["seed"].number_value, seed)

    def test_a_rewritten_file_replaces_the_old_events(self):
        run = make_run(self.root, "r", LINES[1:], finished=False)
        self.assertEqual(wm.main(["--tensorboard", self.tb, "--run", run]), 0)
        # A resume from step 1 rewrites the file (a new inode) and trains step 2 again, differently.
        path = os.path.join(self.root, "r", "metrics.jsonl")
        redo = dict(LINES[2], train_loss=6.5, val_loss=6.75)
        write_lines(path + ".tmp", [LINES[1], redo])
        os.replace(path + ".tmp", path)
        self.assertEqual(wm.main(["--tensorboard", self.tb, "--run", run]), 0)
        _, found = read_scalars(os.path.join(self.tb, "r"))  # asserts no (tag, step) twice
        self.assertEqual(found[("loss/train", 2)], 6.5)
        self.assertEqual(found[("loss/val", 2)], 6.75)
        self.assertEqual(found[("loss/train", 1)], 8.25)

    def test_follow_reads_appended_lines_until_the_run_finishes(self):
        run = make_run(self.root, "live", LINES[:1], finished=False)
        run_dir = os.path.join(self.root, "live")

        def trainer():
            for line in LINES[1:]:
                time.sleep(0.2)
                with open(os.path.join(run_dir, "metrics.jsonl"), "a") as f:  # half a line, then the rest
                    text = json.dumps(line) + "\n"
                    f.write(text[:10])
                    f.flush()
                    time.sleep(0.1)
                    f.write(text[10:])
            time.sleep(0.1)
            with open(os.path.join(run_dir, "final.json"), "w") as f:
                f.write("{}\n")

        thread = threading.Thread(target=trainer)
        thread.start()
        started = time.time()
        self.assertEqual(wm.main(["--tensorboard", self.tb, "--follow", "--poll", "0.05", "--run", run]), 0)
        thread.join()
        self.assertLess(time.time() - started, 30)
        _, found = read_scalars(os.path.join(self.tb, "live"))
        self.assert_scalars(found, EXPECTED)

    def test_two_runs_of_one_name_in_one_log_directory_are_refused(self):
        # Watched one at a time, .../baseline/s1 and .../sink_logit/s1 are both named s1.
        first = make_run(self.root, "sweep/baseline/s1", LINES[1:])
        second = make_run(self.root, "sweep/sink_logit/s1", [dict(line, train_loss=1.0) for line in LINES[1:]])
        rename = lambda arg: json.dumps(dict(json.loads(arg), name="s1"))  # noqa: E731
        self.assertEqual(wm.main(["--tensorboard", self.tb, "--run", rename(first)]), 0)
        self.assertEqual(wm.main(["--tensorboard", self.tb, "--run", rename(first)]), 0)  # the same run again
        with self.assertRaises(SystemExit) as refused:
            wm.main(["--tensorboard", self.tb, "--run", rename(second)])
        message = str(refused.exception)
        for words in ("sweep/baseline/s1", "sweep/sink_logit/s1", "same name 's1'", "common parent"):
            self.assertIn(words, message)
        _, found = read_scalars(os.path.join(self.tb, "s1"))  # the first run's, unmixed
        self.assertEqual(found[("loss/train", 1)], 8.25)
        self.assertEqual(found[("loss/train", 2)], 7.5)
        # Named by their paths below the common parent, both are written.
        self.assertEqual(wm.main(["--tensorboard", self.tb, "--run", first, "--run", second]), 0)
        _, found = read_scalars(os.path.join(self.tb, "sweep/sink_logit/s1"))
        self.assertEqual(found[("loss/train", 2)], 1.0)

    def test_a_schedule_change_is_a_scalar_at_its_step(self):
        change = {"type": "schedule_change", "step": 1, "total_steps_before": 2, "total_steps": 4,
                  "next_lr_before": 1e-4, "next_lr": 2e-4}
        run = make_run(self.root, "r", [LINES[1], change, LINES[2]])
        self.assertEqual(wm.main(["--tensorboard", self.tb, "--run", run]), 0)
        _, found = read_scalars(os.path.join(self.tb, "r"))
        self.assertEqual(found[("schedule/total_steps", 1)], 4)
        self.assertEqual(found[("schedule/total_steps_before", 1)], 2)
        self.assertAlmostEqual(found[("schedule/next_lr", 1)], 2e-4, delta=1e-10)
        self.assertNotIn(("other/total_steps", 1), found)

    def test_bad_arguments_are_refused(self):
        with self.assertRaises(SystemExit):
            wm.main(["--run", '{"name": "x", "dir": "y"}'])  # neither --tensorboard nor --wandb
        with self.assertRaises(SystemExit):
            wm.main(["--tensorboard", self.tb, "--run", "{not json"])


class FakeWandb(types.ModuleType):
    """Records what watch_metrics asks of W&B (wandb itself is optional and not installed by setup)."""

    def __init__(self):
        super().__init__("wandb")
        self.runs = []

    def init(self, **kwargs):
        run = types.SimpleNamespace(kwargs=kwargs, logged=[], finished=False)
        run.log = lambda data, step: run.logged.append((step, dict(data)))
        run.finish = lambda: setattr(run, "finished", True)
        self.runs.append(run)
        return run


class WandbRuns(unittest.TestCase):
    def test_each_run_is_an_offline_run_with_every_scalar(self):
        fake = FakeWandb()
        sys.modules["wandb"] = fake
        try:
            with tempfile.TemporaryDirectory() as root:
                run = make_run(root, "micro/baseline/s2", LINES, arm="baseline", seed=2, tier="micro", variant="")
                self.assertEqual(wm.main(["--wandb", "--wandb-dir", os.path.join(root, "wb"), "--group", "demo",
                                          "--run", run]), 0)
        finally:
            del sys.modules["wandb"]
        self.assertEqual(len(fake.runs), 1)
        r = fake.runs[0]
        self.assertEqual(r.kwargs["mode"], "offline")
        self.assertRegex(r.kwargs["id"], r"^attnlab-[0-9a-f]{16}$")  # the same for every watch of the run
        self.assertEqual(r.kwargs["resume"], "allow")
        self.assertEqual(r.kwargs["group"], "demo")
        self.assertEqual(r.kwargs["config"], {"arm": "baseline", "seed": 2, "tier": "micro", "variant": ""})
        self.assertTrue(r.finished)
        got = {(tag, step): value for step, data in r.logged for tag, value in data.items()}
        self.assertEqual(got, {k: float(v) for k, v in EXPECTED.items()})


if __name__ == "__main__":
    unittest.main()
