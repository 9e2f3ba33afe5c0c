"""The Slurm job array of `attnlab sweep --emit slurm` under a real scheduler (a one-node cluster on
localhost, slurm_cluster.py): scancel of one task or of the whole array stops it for good, and the
warning before the time limit (USR1) makes the task checkpoint, requeue itself and resume.

    ATTNLAB_BINARY=build/attnlab python3 tests/slurm/test_slurm_cluster.py        # ctest slurm.cluster
    ATTNLAB_SLURM_SLOW=1 ...                                                        # + a real 2-minute limit

Skipped, saying why, where slurmctld, slurmd or munged is not installed or the user is not root.
The real time limit costs about 2 minutes, so it runs only with ATTNLAB_SLURM_SLOW=1 (docs/sweeps.md).
"""
import os
import struct
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import slurm_cluster  # noqa: E402

WHY_NOT = slurm_cluster.missing()
BINARY = os.environ.get("ATTNLAB_BINARY", "")
if not WHY_NOT and not os.access(BINARY, os.X_OK):
    WHY_NOT = f"ATTNLAB_BINARY ({BINARY!r}) is not the attnlab program"
SLOW = os.environ.get("ATTNLAB_SLURM_SLOW") == "1"


def write_shard(path: str, tokens: list) -> None:
    """llm.c's format (docs/data.md): 256 int32 of header (magic, version, count), then uint16 tokens."""
    with open(path, "wb") as f:
        f.write(struct.pack("<3i", 20240520, 1, len(tokens)) + b"\0" * 1012 + struct.pack(f"<{len(tokens)}H", *tokens))


def make_sweep(root: str, slurm: str, max_steps: int = 10**7) -> str:
    """A sweep of two tiny CPU runs that train far longer than the test lasts, checkpointing often."""
    data = os.path.join(root, "data")
    os.makedirs(data)
    for split, n in (("train", 20000), ("val", 4000)):
        write_shard(os.path.join(data, f"t_{split}_000000.bin"), [(i * 7919) % 64 for i in range(n)])
    with open(os.path.join(root, "base.yaml"), "w") as f:
        f.write(f"model: {{n_layer: 1, n_head: 2, d_model: 16, block_size: 16, vocab_size: 64}}\n"
                f"data: {{train: '{data}/t_train_*.bin', val: '{data}/t_val_*.bin', val_tokens: 256}}\n"
                f"train: {{batch_size: 2, seq_len: 16, device: cpu, max_steps: {max_steps}}}\n"
                f"eval: {{every: {max_steps}}}\ncheckpoint: {{every: 25}}\n")
    path = os.path.join(root, "sweep.yaml")
    with open(path, "w") as f:
        f.write(f"base: base.yaml\nout: {root}/out\ngrid: {{model.arm: [baseline, sink_logit]}}\n{slurm}")
    return path


def emit(sweep: str, cwd: str) -> str:
    proc = subprocess.run([BINARY, "sweep", "--config", sweep, "--emit", "slurm"], capture_output=True, text=True,
                          cwd=cwd, timeout=120)
    if proc.returncode != 0:
        raise AssertionError(f"--emit slurm failed: {proc.stderr}")
    return os.path.join(cwd, "out", "slurm", "sweep.sbatch")


def checkpoints(run_dir: str) -> list:
    try:
        return sorted(os.listdir(os.path.join(run_dir, "checkpoints")))
    except FileNotFoundError:
        return []


def read(path: str) -> str:
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except FileNotFoundError:
        return ""


@unittest.skipIf(WHY_NOT, WHY_NOT or "")
class SlurmArray(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cluster = slurm_cluster.SlurmCluster().__enter__()

    @classmethod
    def tearDownClass(cls):
        cls.cluster.__exit__(None, None, None)

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = self.tmp.name
        # No tier axis: the runs are in the base config's tier, micro by default.
        self.runs = [os.path.join(self.root, "out", "micro", arm, "s1") for arm in ("baseline", "sink_logit")]

    def tearDown(self):
        self.cluster.run(["scancel", "--user", "root"], check=False)
        self.cluster.wait_for(lambda: not self.cluster.run(["squeue", "-h"], check=False).strip(), 90,
                              message="the test's jobs did not end")
        self.tmp.cleanup()

    def log(self, job: str, task: int) -> str:
        return read(os.path.join(self.root, "out", "logs", f"slurm-{job}_{task}.out"))

    def submit_and_wait_for_training(self, slurm: str = "") -> str:
        job = self.cluster.sbatch(emit(make_sweep(self.root, slurm), self.root))
        for task, run in enumerate(self.runs):
            self.cluster.wait_for(lambda: self.cluster.state(f"{job}_{task}") == "RUNNING" and checkpoints(run), 120,
                                  message=f"task {task} never trained to a checkpoint:\n{self.log(job, task)}")
        return job

    def assert_stays_cancelled(self, job: str, task: int) -> None:
        task_id = f"{job}_{task}"
        self.cluster.wait_for(lambda: self.cluster.state(task_id) == "CANCELLED", 90,
                              message=f"{task_id} did not end CANCELLED:\n{self.log(job, task)}")
        # The script decides before the task ends: a requeued task would be PENDING, never CANCELLED.
        time.sleep(3)
        fields = self.cluster.job(task_id)
        self.assertEqual(fields.get("JobState"), "CANCELLED", f"{task_id} came back:\n{self.log(job, task)}")
        self.assertEqual(fields.get("Restarts"), "0", self.log(job, task))
        self.assertIn("not requeued", self.log(job, task))
        self.assertNotIn("requeueing", self.log(job, task))

    def test_scancel_of_a_task_and_of_the_array_stops_them_for_good(self):
        job = self.submit_and_wait_for_training()
        self.cluster.run(["scancel", f"{job}_0"])
        self.assert_stays_cancelled(job, 0)
        self.assertEqual(self.cluster.state(f"{job}_1"), "RUNNING", "the other task goes on")
        self.assertIn("checkpoint saved", self.log(job, 0))  # the trainer stopped cleanly on the TERM
        self.cluster.run(["scancel", job])  # the whole array
        self.assert_stays_cancelled(job, 1)

    def test_the_warning_before_the_time_limit_requeues_and_resumes(self):
        job = self.submit_and_wait_for_training()
        before = checkpoints(self.runs[0])
        # What --signal=B:USR1@<margin> does before the limit, sent now: to the batch shell only.
        self.cluster.run(["scancel", "--batch", "--signal=USR1", f"{job}_0"])
        self.cluster.wait_for(lambda: "restart 1" in self.log(job, 0), 90,
                              message=f"task 0 was not requeued and restarted:\n{self.log(job, 0)}")
        self.assertIn("requeueing it", self.log(job, 0))
        self.assertEqual(self.cluster.job(f"{job}_0").get("Restarts"), "1")
        self.cluster.wait_for(lambda: len(checkpoints(self.runs[0])) > len(before) or
                              checkpoints(self.runs[0])[-1:] != before[-1:], 120,
                              message=f"the requeued task did not train on:\n{self.log(job, 0)}")
        self.assertEqual(self.cluster.state(f"{job}_1"), "RUNNING")

    @unittest.skipUnless(SLOW, "a real time limit takes about 2 minutes: set ATTNLAB_SLURM_SLOW=1")
    def test_a_real_time_limit_is_met_by_checkpoint_and_requeue(self):
        job = self.submit_and_wait_for_training("slurm: {time: 2}\nslurm_signal_margin: 30\n")
        self.cluster.wait_for(lambda: "restart 1" in self.log(job, 0), 240, every=2,
                              message=f"task 0 was not requeued before its 2-minute limit:\n{self.log(job, 0)}")
        self.assertIn("requeueing it", self.log(job, 0))
        self.assertNotIn("TIMEOUT", self.cluster.state(f"{job}_0"))


if __name__ == "__main__":
    unittest.main()
