#!/usr/bin/env python3
"""Live metrics of attnlab runs: follows each run's metrics.jsonl and writes TensorBoard event files
(and, with --wandb, W&B offline runs). The trainer only appends JSON lines; this follower turns them
into dashboards, so the C++ trainer needs no Python. `attnlab watch RUN_OR_SWEEP` finds the runs and
starts this script (docs/monitoring.md); by hand:

    python tools/watch_metrics.py --tensorboard tb --group sl \\
        --run '{"name": "sl", "dir": "runs/sl", "tier": "micro", "arm": "sink_logit", "seed": 1}'

Each run becomes the TensorBoard run DIR/<name> (a sweep's runs are one experiment: `tensorboard
--logdir DIR`), tagged with its arm, seed, tier and variant through the HParams plugin. Every number
of every metrics.jsonl record is a scalar at the record's step: loss/train, loss/val, optim/lr,
optim/grad_norm, speed/tokens_per_s, speed/mfu, progress/tokens, progress/elapsed_s, other/<key>,
and activations/layer<l>/... for activation-tracking records.

Without --follow it writes what the files hold and exits; with --follow it keeps reading until every
run has a final.json newer than its metrics.jsonl. A metrics.jsonl that the trainer rewrote (a resume
drops the lines after the checkpoint it resumed from) is read again from its start into a new event
file whose purge step makes TensorBoard discard the older events from that step on.
"""
from __future__ import annotations

import argparse
import glob
import json
import math
import os
import sys
import time

TAGS = {"train_loss": "loss/train", "val_loss": "loss/val", "lr": "optim/lr", "grad_norm": "optim/grad_norm",
        "tokens_per_s": "speed/tokens_per_s", "mfu": "speed/mfu", "tokens": "progress/tokens",
        "elapsed_s": "progress/elapsed_s"}
TAG_KEYS = ("arm", "seed", "tier", "variant")


def fail(message: str) -> None:
    raise SystemExit(f"watch_metrics: error: {message}")


def is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def flatten(value, path: str, out: list) -> None:
    """(tag, number) for every number under `value`; list items that carry a "layer" are layer<l>."""
    if is_number(value):
        out.append((path, float(value)))
    elif isinstance(value, dict):
        for key, item in value.items():
            flatten(item, f"{path}/{key}", out)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            name = f"layer{item['layer']}" if isinstance(item, dict) and is_number(item.get("layer")) else str(i)
            flatten(item, f"{path}/{name}", out)


def scalars(record: dict) -> list:
    """Every number of one metrics.jsonl record but its step, with its TensorBoard tag."""
    out = []
    if record.get("type") == "activations":
        for key, value in record.items():
            if key not in ("type", "step"):
                flatten(value, f"activations/{key}", out)
        return out
    for key, value in record.items():
        if key == "step" or key == "type":
            continue
        if key in TAGS and is_number(value):
            out.append((TAGS[key], float(value)))
        else:
            flatten(value, f"other/{key}", out)
    return out


class TensorBoardSink:
    """One SummaryWriter per run directory, created at the run's first record with that record's step
    as its purge step, so a re-read file replaces what earlier event files said from there on."""

    def __init__(self, root: str, run: dict):
        self.dir = os.path.join(root, run["name"])
        self.run = run
        self.writer = None

    def write(self, step: int, values: list) -> None:
        if self.writer is None:
            self.open(step)
        for tag, value in values:
            self.writer.add_scalar(tag, value, step)

    def open(self, purge_step: int) -> None:
        from torch.utils.tensorboard import SummaryWriter
        from torch.utils.tensorboard.summary import hparams
        wait_for_a_later_file_name(self.dir)
        self.writer = SummaryWriter(self.dir, purge_step=purge_step, flush_secs=3600)
        tags = {k: self.run[k] for k in TAG_KEYS if k in self.run}
        for summary in hparams(tags, {"loss/val": 0.0, "loss/train": 0.0}):
            self.writer.file_writer.add_summary(summary, purge_step)
        config = os.path.join(self.run["dir"], "config.yaml")
        if os.path.isfile(config):
            with open(config, encoding="utf-8") as f:
                self.writer.add_text("config", "```yaml\n" + f.read() + "\n```", purge_step)

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
    for path in glob.glob(os.path.join(log_dir, "events.out.tfevents.*")):
        try:
            latest = max(latest, int(os.path.basename(path).split(".")[3]))
        except (IndexError, ValueError):
            pass
    while int(time.time()) <= latest:
        time.sleep(0.05)


class WandbSink:
    """One W&B offline run per attnlab run. W&B cannot take back logged steps, so after a rewrite only
    steps past the last one logged are sent (a resume is exact: the lines it rewrites repeat)."""

    def __init__(self, wandb, args, run: dict):
        self.wandb, self.args, self.run_spec = wandb, args, run
        self.run = None
        self.last_step = -1

    def write(self, step: int, values: list) -> None:
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


class Follower:
    """Reads the complete lines appended to one run's metrics.jsonl since the last poll."""

    def __init__(self, run: dict, sinks: list):
        self.run, self.sinks = run, sinks
        self.path = os.path.join(run["dir"], "metrics.jsonl")
        self.inode, self.offset, self.pending = None, 0, b""
        self.records = 0

    def poll(self) -> int:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return 0
        if self.inode is not None and (st.st_ino != self.inode or st.st_size < self.offset):
            self.restart()  # rewritten by a resume: read it again from the start
        self.inode = st.st_ino
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            data = f.read()
        self.offset += len(data)
        lines = (self.pending + data).split(b"\n")
        self.pending = lines.pop()  # an incomplete last line waits for its newline
        count = 0
        for line in lines:
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                print(f"watch_metrics: {self.path}: skipping a line that is not JSON: {line[:80]!r}", file=sys.stderr)
                continue
            if not isinstance(record, dict) or not is_number(record.get("step")):
                continue
            values = scalars(record)
            for sink in self.sinks:
                sink.write(int(record["step"]), values)
            count += 1
        for sink in self.sinks:
            sink.flush()
        self.records += count
        return count

    def restart(self) -> None:
        self.offset, self.pending = 0, b""
        for sink in self.sinks:
            sink.restart()

    def finished(self) -> bool:
        """final.json written after the last metrics line, and every line read."""
        final = os.path.join(self.run["dir"], "final.json")
        try:
            done = os.stat(final).st_mtime >= os.stat(self.path).st_mtime
        except FileNotFoundError:
            return False
        return done and not self.pending and self.offset == os.path.getsize(self.path)

    def close(self) -> None:
        for sink in self.sinks:
            sink.close()


def parse_run(text: str) -> dict:
    try:
        run = json.loads(text)
    except json.JSONDecodeError as e:
        fail(f"--run {text!r} is not JSON ({e})")
    if not isinstance(run, dict) or not isinstance(run.get("name"), str) or not isinstance(run.get("dir"), str):
        fail(f"--run {text!r} needs at least \"name\" and \"dir\"")
    return run


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--run", action="append", required=True, help='JSON: {"name", "dir", "arm", "seed", "tier", "variant"}')
    p.add_argument("--group", default="attnlab", help="the sweep's (or run's) name: the W&B group")
    p.add_argument("--tensorboard", help="directory of the event files (tensorboard --logdir)")
    p.add_argument("--wandb", action="store_true", help="also write W&B offline runs")
    p.add_argument("--wandb-dir", default="wandb")
    p.add_argument("--wandb-project", default="attnlab")
    p.add_argument("--follow", action="store_true", help="keep following until every run has finished")
    p.add_argument("--poll", type=float, default=5.0, help="seconds between polls with --follow")
    args = p.parse_args(argv)
    if not args.tensorboard and not args.wandb:
        fail("give --tensorboard DIR, --wandb, or both")
    if args.poll <= 0:
        fail(f"--poll {args.poll} must be positive")
    runs = [parse_run(r) for r in args.run]
    wandb = None
    if args.wandb:
        try:
            import wandb
        except ImportError:
            fail("--wandb needs the wandb package in this Python (pip install wandb)")
    followers = []
    for run in runs:
        sinks = []
        if args.tensorboard:
            sinks.append(TensorBoardSink(args.tensorboard, run))
        if wandb is not None:
            sinks.append(WandbSink(wandb, args, run))
        followers.append(Follower(run, sinks))
    where = " and ".join(filter(None, [args.tensorboard and f"TensorBoard events in {args.tensorboard}",
                                       args.wandb and f"W&B offline runs in {args.wandb_dir}"]))
    print(f"watch_metrics: {len(runs)} run(s) -> {where}", file=sys.stderr)
    try:
        while True:
            for f in followers:
                f.poll()
                if args.follow and f.finished():
                    f.close()
            open_runs = [f for f in followers if not f.finished()]
            if not args.follow or not open_runs:
                break
            time.sleep(args.poll)
    except KeyboardInterrupt:
        print("watch_metrics: interrupted", file=sys.stderr)
        return 130
    finally:
        for f in followers:
            f.close()
    for f in followers:
        state = "finished" if f.finished() else "running or stopped"
        print(f"watch_metrics: {f.run['name']}: {f.records} records ({state})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
