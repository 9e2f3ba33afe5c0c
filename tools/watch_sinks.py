"""Where `attnlab watch` writes a run's records: TensorBoard event files and W&B offline runs
(docs/monitoring.md). Each sink is claimed before anything is read, so a name another run already
uses, or a log directory that is a file, is refused at the start.
"""
from __future__ import annotations

import glob
import json
import os
import time

from watch_files import read_regular, write_atomically

TAG_KEYS = ("arm", "seed", "tier", "variant")
MARKER = "attnlab_run.json"        # in each TensorBoard run directory: which attnlab run it shows
MAX_CONFIG_BYTES = 1 << 20         # config.yaml shown as text; a run's is a few KB


class SinkError(Exception):
    """A destination that cannot be written as asked; the message names it and what to do."""


def owner_of(run: dict) -> str:
    """The run's identity on this machine: its directory's real path."""
    return os.path.realpath(run["dir"])


class TensorBoardSink:
    """One SummaryWriter per run directory, created at the run's first record with that record's step
    as its purge step, so a re-read file replaces what earlier event files said from there on."""

    def __init__(self, root: str, run: dict, warn):
        self.root, self.run, self.warn = root, run, warn
        self.dir = os.path.join(root, run["name"])
        self.writer = None

    def claim(self) -> None:
        """Makes DIR/<name> this run's. Two runs of one name in one log directory would show as one
        TensorBoard run, the later events hiding the earlier, so a name another run holds is refused."""
        if os.path.exists(self.root) and not os.path.isdir(self.root):
            raise SinkError(f"--tensorboard {self.root} is not a directory")
        try:
            os.makedirs(self.dir, exist_ok=True)
        except OSError as e:
            raise SinkError(f"--tensorboard: cannot make {self.dir}: {e.strerror or e}") from None
        marker, me = os.path.join(self.dir, MARKER), owner_of(self.run)
        try:
            held = json.loads(read_regular(marker, 1 << 16))["run"]
        except FileNotFoundError:
            held = None
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise SinkError(f"{marker} is not the marker attnlab watch writes ({e}); remove it if {self.dir} "
                            f"shows {me}, or choose another --tensorboard directory") from None
        if held is not None and held != me:
            raise SinkError(f"{self.dir} shows the run {held}, and {me} has the same name "
                            f"'{self.run['name']}': names must be unique in one log directory. Watch the runs' common "
                            f"parent directory (each is then named by its path below it), or give each its own "
                            f"--tensorboard directory")
        if held is None:
            try:
                write_atomically(marker, (json.dumps({"run": me}) + "\n").encode())
            except OSError as e:
                raise SinkError(f"cannot write {marker}: {e.strerror or e}") from None

    def write(self, record: dict, values: list) -> None:
        if self.writer is None:
            self.open(record["step"])
        for tag, value in values:
            self.writer.add_scalar(tag, value, record["step"])

    def open(self, purge_step: int) -> None:
        from torch.utils.tensorboard import SummaryWriter
        from torch.utils.tensorboard.summary import hparams
        wait_for_a_later_file_name(self.dir)
        try:
            self.writer = SummaryWriter(self.dir, purge_step=purge_step, flush_secs=3600)
        except OSError as e:
            raise SinkError(f"cannot write TensorBoard events in {self.dir}: {e.strerror or e}") from None
        tags = {k: self.run[k] for k in TAG_KEYS if k in self.run}
        for summary in hparams(tags, {"loss/val": 0.0, "loss/train": 0.0}):
            self.writer.file_writer.add_summary(summary, purge_step)
        text = self.config_text()
        if text is not None:
            self.writer.add_text("config", "```yaml\n" + text + "\n```", purge_step)

    def config_text(self):
        path = os.path.join(self.run["dir"], "config.yaml")
        try:
            data = read_regular(path, MAX_CONFIG_BYTES)
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as e:
            self.warn(f"{path}: not shown as text ({e})")
            return None
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as e:
            self.warn(f"{path}: not UTF-8 (byte {e.start}); shown with U+FFFD in its place")
            return data.decode("utf-8", "replace")

    def restart(self) -> None:
        self.close()

    def flush(self) -> None:
        if self.writer is not None:
            self.writer.flush()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None


def wait_for_a_later_file_name(log_dir: str) -> None:
    """TensorBoard reads a run's event files in name order, and a name starts with the whole second it
    was made in: a new file must not share that second with an older one, or the purge may come first."""
    latest = 0
    for path in glob.glob(os.path.join(glob.escape(log_dir), "events.out.tfevents.*")):
        try:
            latest = max(latest, int(os.path.basename(path).split(".")[3]))
        except (IndexError, ValueError):
            pass
    while int(time.time()) <= latest:
        time.sleep(0.05)


class WandbSink:
    """One W&B offline run per attnlab run. W&B cannot take back logged steps, so after a rewrite only
    steps past the last one logged are sent (a resume is exact: the lines it rewrites repeat)."""

    def __init__(self, wandb, args, run: dict, warn):
        self.wandb, self.args, self.run_spec, self.warn = wandb, args, run, warn
        self.run = None
        self.last_step = -1

    def claim(self) -> None:
        if os.path.exists(self.args.wandb_dir) and not os.path.isdir(self.args.wandb_dir):
            raise SinkError(f"--wandb-dir {self.args.wandb_dir} is not a directory")

    def write(self, record: dict, values: list) -> None:
        step = record["step"]
        if step < self.last_step:
            return
        if self.run is None:
            spec = self.run_spec
            tags = [f"{k}:{spec[k]}" for k in TAG_KEYS if spec.get(k) not in (None, "")]
            self.run = self.wandb.init(mode="offline", project=self.args.wandb_project, group=self.args.group,
                                       name=spec["name"], dir=self.args.wandb_dir, reinit="create_new",
                                       config={k: spec[k] for k in TAG_KEYS if k in spec}, tags=tags)
        self.run.log(dict(values), step=step)
        self.last_step = step

    def restart(self) -> None:
        pass

    def flush(self) -> None:
        pass

    def close(self) -> None:
        if self.run is not None:
            self.run.finish()
            self.run = None
