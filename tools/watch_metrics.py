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
file whose purge step makes TensorBoard discard the older events from that step on. A line that is
not a record (watch_records.py) is skipped with a warning naming its number; a run whose files are
not files is an error naming the path (exit 1), and the others go on. W&B: one W&B run per attnlab
run, whatever the number of watches (watch_sinks.py).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import stat
import sys
import time

from watch_files import NotRegular, kind_of, open_regular
from watch_records import MAX_LINE_BYTES, BadLine, parse_line, scalars
from watch_sinks import TAG_KEYS, SinkError, TensorBoardSink, WandbSink

READ_CHUNK = 1 << 20
MAX_POLL_S = 3600.0


def fail(message: str) -> None:
    raise SystemExit(f"watch_metrics: error: {message}")


def warn(message: str) -> None:
    print(f"watch_metrics: warning: {message}", file=sys.stderr, flush=True)


class Follower:
    """Reads the lines appended to one run's metrics.jsonl since the last poll and hands each record to
    the sinks. A bad line is skipped with a warning naming its number; a file that cannot be read (a
    directory, a FIFO, no permission) ends the run's follow with an error, never a hang."""

    def __init__(self, run: dict, sinks: list):
        self.run, self.sinks = run, sinks
        self.path = os.path.join(run["dir"], "metrics.jsonl")
        self.final = os.path.join(run["dir"], "final.json")
        self.inode, self.offset, self.pending, self.line = None, 0, b"", 0
        self.overlong = False  # inside a line longer than MAX_LINE_BYTES, skipped to its newline
        self.records = self.bad = 0
        self.damage = None     # why the run could not be read
        self.ended = False

    def poll(self) -> None:
        if self.damage:
            return
        try:
            fd, st = open_regular(self.path)
        except FileNotFoundError:
            return
        except OSError as e:
            return self.damaged(str(e) if isinstance(e, NotRegular) else f"{self.path}: {e.strerror or e}")
        try:
            if self.inode is not None and (st.st_ino != self.inode or st.st_size < self.offset):
                self.restart()  # rewritten by a resume: read it again from the start
            self.inode = st.st_ino
            while self.offset < st.st_size:  # what the file held when looked at, however fast it grows
                data = os.pread(fd, min(READ_CHUNK, st.st_size - self.offset), self.offset)
                if not data:
                    break
                self.offset += len(data)
                self.feed(data)
        except OSError as e:
            return self.damaged(f"{self.path}: {e.strerror or e}")
        finally:
            os.close(fd)
        for sink in self.sinks:
            sink.flush()

    def feed(self, data: bytes) -> None:
        if self.overlong:
            cut = data.find(b"\n")
            if cut < 0:
                return
            data, self.overlong, self.line = data[cut + 1:], False, self.line + 1
        lines = (self.pending + data).split(b"\n")
        self.pending = lines.pop()  # an incomplete last line waits for its newline
        for raw in lines:
            self.line += 1
            self.take(raw)
        if len(self.pending) > MAX_LINE_BYTES:
            self.bad_line(self.line + 1, f"longer than {MAX_LINE_BYTES} bytes")
            self.pending, self.overlong = b"", True

    def take(self, raw: bytes, note: str = "") -> None:
        try:
            if not raw.strip():
                raise BadLine("empty")
            record = parse_line(raw)
            values = scalars(record)
        except BadLine as e:
            return self.bad_line(self.line, f"{e}{note}")
        for sink in self.sinks:
            sink.write(record, values)
        self.records += 1

    def bad_line(self, number: int, why: str) -> None:
        self.bad += 1
        warn(f"{self.path}:{number}: {why}; line skipped")

    def restart(self) -> None:
        self.offset, self.pending, self.line, self.overlong = 0, b"", 0, False
        for sink in self.sinks:
            sink.restart()

    def damaged(self, why: str) -> None:
        if not self.damage:
            self.damage = why
            print(f"watch_metrics: error: {self.run['name']}: {why}; not read", file=sys.stderr, flush=True)

    def finished(self) -> bool:
        """final.json written after the last metrics line, and every byte read."""
        try:
            final = os.stat(self.final)
            if not stat.S_ISREG(final.st_mode):
                self.damaged(f"{self.final} is {kind_of(final.st_mode)}, not a regular file")
                return False
            metrics = os.stat(self.path)
        except FileNotFoundError:
            return os.path.isfile(self.final)  # finished without metrics.jsonl: nothing to write
        except OSError as e:
            self.damaged(f"{e.filename}: {e.strerror or e}")
            return False
        return (final.st_mtime_ns >= metrics.st_mtime_ns and metrics.st_ino == self.inode and
                self.offset == metrics.st_size)

    def end(self) -> None:
        """The last line, when it lacks its newline, is taken once the run has finished (the trainer wrote
        final.json after it); before that the trainer may still be writing it, and it is only reported."""
        if self.pending and not self.damage:
            self.line += 1
            if self.finished():
                self.take(self.pending, " (the last line, without a newline)")
            else:
                warn(f"{self.path}:{self.line}: incomplete (no newline yet: the trainer may be writing it); not written")
            self.pending = b""
        self.close()

    def close(self) -> None:
        self.ended = True
        for sink in self.sinks:
            sink.close()

    def state(self) -> str:
        if self.damage:
            return f"not read: {self.damage}"
        return "finished" if self.finished() else "running or stopped"


def parse_run(text: str) -> dict:
    try:
        run = json.loads(text)
    except (ValueError, RecursionError) as e:
        fail(f"--run {text[:200]!r} is not JSON ({e})")
    if not isinstance(run, dict) or not isinstance(run.get("name"), str) or not isinstance(run.get("dir"), str):
        fail(f"--run {text[:200]!r} needs at least \"name\" and \"dir\" (strings)")
    name = run["name"]
    if "\0" in name + run["dir"] or name.startswith("/") or any(p in ("", ".", "..") for p in name.split("/")):
        fail(f"--run: the name {name!r} must be a relative path without '.', '..' or empty parts")
    for key in TAG_KEYS:
        if key in run and not isinstance(run[key], (str, int, float, bool)):
            fail(f"--run {name}: {key} must be a string or a number, not {json.dumps(run[key])[:80]}")
    return run


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--run", action="append", required=True, help='JSON: {"name", "dir", "arm", "seed", "tier", "variant"}')
    p.add_argument("--group", default="attnlab", help="the sweep's (or run's) name: the W&B group")
    p.add_argument("--tensorboard", help="directory of the event files (tensorboard --logdir)")
    p.add_argument("--wandb", action="store_true", help="also write W&B offline runs")
    p.add_argument("--wandb-dir", default="wandb")
    p.add_argument("--wandb-project", default="attnlab")
    p.add_argument("--follow", action="store_true", help="keep following until every run has finished")
    p.add_argument("--poll", type=float, default=5.0, help=f"seconds between polls with --follow (at most {MAX_POLL_S:.0f})")
    args = p.parse_args(argv)
    if not args.tensorboard and not args.wandb:
        fail("give --tensorboard DIR, --wandb, or both")
    if not (math.isfinite(args.poll) and 0 < args.poll <= MAX_POLL_S):
        fail(f"--poll {args.poll}: must be a number of seconds above 0 and at most {MAX_POLL_S:.0f}")
    runs = [parse_run(r) for r in args.run]
    names = [r["name"] for r in runs]
    for name in set(names):
        if names.count(name) > 1:
            fail(f"two runs are named {name!r}: each needs its own name")
    return args, runs


def make_followers(args, runs: list) -> list:
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
            sinks.append(TensorBoardSink(args.tensorboard, run, warn))
        if wandb is not None:
            sinks.append(WandbSink(wandb, args, run, warn))
        followers.append(Follower(run, sinks))
    try:
        for f in followers:
            for sink in f.sinks:
                sink.claim()
    except SinkError as e:
        for f in followers:
            f.close()
        fail(str(e))
    return followers


def follow(args, followers: list) -> None:
    while True:
        for f in followers:
            if f.ended:
                continue
            f.poll()
            done = args.follow and f.finished()
            if done or f.damage:
                f.end()
        if not args.follow or all(f.ended for f in followers):
            break
        time.sleep(args.poll)
    for f in followers:
        if not f.ended:
            f.end()


def main(argv: list[str] | None = None) -> int:
    args, runs = parse_args(argv)
    followers = make_followers(args, runs)
    where = " and ".join(filter(None, [args.tensorboard and f"TensorBoard events in {args.tensorboard}",
                                       args.wandb and f"W&B offline runs in {args.wandb_dir}"]))
    print(f"watch_metrics: {len(runs)} run(s) -> {where}", file=sys.stderr)
    try:
        follow(args, followers)
    except KeyboardInterrupt:
        print("watch_metrics: interrupted", file=sys.stderr)
        return 130
    except SinkError as e:
        print(f"watch_metrics: error: {e}", file=sys.stderr)
        return 1
    finally:
        for f in followers:
            if not f.ended:
                f.close()
    for f in followers:
        skipped = f"; {f.bad} line(s) skipped" if f.bad else ""
        print(f"watch_metrics: {f.run['name']}: {f.records} records ({f.state()}){skipped}", file=sys.stderr)
    return 1 if any(f.damage for f in followers) else 0


if __name__ == "__main__":
    sys.exit(main())
