"""Where `attnlab watch` writes a run's records: TensorBoard event files and W&B offline runs
(docs/monitoring.md). Each sink is claimed before anything is read, so a name another run already
uses, a W&B run another watch is writing, or a log directory that is a file is refused at the start.
"""
from __future__ import annotations

import fcntl
import glob
import hashlib
import json
import os
import time
import zlib

from watch_files import open_regular, read_regular, write_atomically

TAG_KEYS = ("arm", "seed", "tier", "variant")
MARKER = "attnlab_run.json"        # in each TensorBoard run directory: which attnlab run it shows
MAX_CONFIG_BYTES = 1 << 20         # config.yaml shown as text; a run's is a few KB
STATE_DIR = "attnlab-watch"        # in --wandb-dir: what each W&B run holds, across invocations


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


def wandb_run_id(run: dict) -> str:
    """The W&B run id of an attnlab run: the same for every watch of it, different for every run."""
    return "attnlab-" + hashlib.sha256(os.fsencode(owner_of(run))).hexdigest()[:16]


def digest(kind: str, values: list) -> int:
    return zlib.crc32(json.dumps([kind, values]).encode())


def ranges(steps: list) -> str:
    """"3-5, 9" for [3, 4, 5, 9]."""
    out, steps = [], sorted(set(steps))
    start = prev = steps[0]
    for s in steps[1:] + [None]:
        if s is not None and s == prev + 1:
            prev = s
            continue
        out.append(f"{start}-{prev}" if prev > start else f"{start}")
        if s is not None:
            start = prev = s
    return ", ".join(out)


class WandbSink:
    """One W&B run per attnlab run, across every `attnlab watch` of it: the run id is wandb_run_id(),
    opened with resume="allow", and <wandb-dir>/attnlab-watch/<id>.* keep what W&B was sent. W&B cannot
    rewrite a logged step, so each (step, record) is sent once: the values sent first stay, and when
    metrics.jsonl later says something else for a step W&B holds (a resume under another step budget
    re-shapes the steps after it), a warning and the W&B run (an alert; the changes in its config) say
    which steps W&B keeps from before. docs/monitoring.md states the rule."""

    def __init__(self, wandb, args, run: dict, warn):
        self.wandb, self.args, self.spec, self.warn = wandb, args, run, warn
        self.id = wandb_run_id(run)
        self.base = os.path.join(args.wandb_dir, STATE_DIR, self.id)
        self.run = None
        self.last_step = -1        # the highest step W&B holds
        self.row_open = False      # that step was logged in this session: more of it may join its row
        self.held: dict = {}       # (step, kind) -> digest of what W&B was sent
        self.changes: list = []    # every schedule_change record, as the run's config has them
        self.kept: list = []       # steps whose new values W&B could not take, since the last flush
        self.new_digests: list = []
        self.lock_fd = None

    def claim(self) -> None:
        if os.path.exists(self.args.wandb_dir) and not os.path.isdir(self.args.wandb_dir):
            raise SinkError(f"--wandb-dir {self.args.wandb_dir} is not a directory")
        try:
            os.makedirs(os.path.dirname(self.base), exist_ok=True)
            self.lock_fd = os.open(self.base + ".lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as e:
            raise SinkError(f"--wandb-dir: cannot write {self.base}.lock: {e.strerror or e}") from None
        try:
            fcntl.flock(self.lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.pread(self.lock_fd, 64, 0).decode(errors="replace").strip() or "?"
            self.release()
            raise SinkError(f"W&B run {self.id} ({self.spec['name']}) is being written by another attnlab watch "
                            f"(pid {holder}) from {self.args.wandb_dir}; stop it, or wait for it to end") from None
        os.ftruncate(self.lock_fd, 0)
        os.pwrite(self.lock_fd, f"{os.getpid()}\n".encode(), 0)
        self.load_state()

    def load_state(self) -> None:
        what = f"; delete {self.base}.json and {self.base}.steps to send every step again (W&B drops the steps it holds)"
        try:
            state = json.loads(read_regular(self.base + ".json", 1 << 24))
            self.last_step, self.changes = int(state["last_step"]), list(state["schedule_changes"])
        except FileNotFoundError:
            return
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise SinkError(f"{self.base}.json: not what attnlab watch writes ({e}){what}") from None
        try:
            fd, _ = open_regular(self.base + ".steps")
            with os.fdopen(fd, "rb") as f:
                for line in f:
                    step, kind, value = json.loads(line)
                    self.held[(int(step), str(kind))] = int(value)
        except FileNotFoundError:
            pass
        except (OSError, ValueError, TypeError) as e:
            raise SinkError(f"{self.base}.steps: not what attnlab watch writes ({e}){what}") from None

    def write(self, record: dict, values: list) -> None:
        step, kind = record["step"], record.get("type", "train")
        key, value = (step, kind), digest(kind, values)
        if key in self.held:
            if self.held[key] != value:
                self.kept.append(step)
            return
        if kind == "schedule_change":
            self.note_change(record)
        elif not values:
            return
        elif step > self.last_step or (step == self.last_step and self.row_open):
            self.start()
            self.run.log(dict(values), step=step)
            self.last_step, self.row_open = step, True
        else:
            self.kept.append(step)  # W&B is past this step
            return
        self.held[key] = value
        self.new_digests.append(json.dumps([step, kind, value]) + "\n")

    def start(self) -> None:
        if self.run is not None:
            return
        spec = self.spec
        tags = [f"{k}:{spec[k]}" for k in TAG_KEYS if spec.get(k) not in (None, "")]
        try:
            self.run = self.wandb.init(mode="offline", project=self.args.wandb_project, group=self.args.group,
                                       name=spec["name"], id=self.id, resume="allow", dir=self.args.wandb_dir,
                                       reinit="create_new", config={k: spec[k] for k in TAG_KEYS if k in spec},
                                       tags=tags)
        except Exception as e:  # wandb's own errors have no common base class
            raise SinkError(f"W&B: cannot open the offline run {self.id} in {self.args.wandb_dir}: {e}") from None

    def note_change(self, record: dict) -> None:
        self.start()
        self.changes.append(record)
        self.run.config.update({"schedule_changes": self.changes}, allow_val_change=True)
        s, before, after = record["step"], record.get("total_steps_before", "?"), record.get("total_steps", "?")
        text = f"resumed after step {s} under another step budget ({before} -> {after} steps)"
        if self.last_step > s:
            text += (f": W&B already holds steps {s + 1}-{self.last_step} of the earlier schedule and cannot rewrite "
                     f"them, so it keeps those values and takes the new schedule's from step {self.last_step + 1} "
                     f"on; TensorBoard and metrics.jsonl have the rewritten steps")
        self.run.alert(title=f"{self.spec['name']}: step budget changed after step {s}", text=text, level="WARN")
        self.warn(f"{self.spec['name']}: W&B run {self.id}: {text}")

    def restart(self) -> None:
        pass

    def flush(self) -> None:
        if self.kept:
            self.warn(f"{self.spec['name']}: W&B run {self.id} keeps what it was sent first for steps "
                      f"{ranges(self.kept)}, which metrics.jsonl now gives otherwise (W&B cannot rewrite logged steps)")
            self.kept = []
        if not self.new_digests:
            return
        try:
            with open(self.base + ".steps", "a", encoding="utf-8") as f:
                f.writelines(self.new_digests)
            state = {"run": owner_of(self.spec), "name": self.spec["name"], "last_step": self.last_step,
                     "schedule_changes": self.changes}
            write_atomically(self.base + ".json", (json.dumps(state) + "\n").encode())
        except OSError as e:
            raise SinkError(f"cannot record what W&B holds in {self.base}.*: {e.strerror or e}") from None
        self.new_digests = []

    def close(self) -> None:
        if self.run is not None:
            self.run.finish()  # what was logged is in the offline files before the state says so
            self.run = None
        try:
            if self.lock_fd is not None:
                self.flush()
        finally:
            self.row_open = False
            self.release()

    def release(self) -> None:
        if self.lock_fd is not None:
            os.close(self.lock_fd)
            self.lock_fd = None

