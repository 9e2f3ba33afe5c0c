#!/usr/bin/env python3
"""Mutation fuzzing of the reader behind `attnlab watch` (tools/watch_metrics.py; docs/fuzzing.md).

Each case is a run directory whose metrics.jsonl holds the trainer's kinds of line (training and
evaluation lines, activation records, a schedule change) with some lines mutated: structured edits
whose verdict is known (a step beyond int64, NaN, deep nesting, a key twice, invalid UTF-8, ...) and
random byte edits. Now and then the run itself is hostile: metrics.jsonl or final.json a directory or
a FIFO, config.yaml a FIFO or not UTF-8, an unterminated last line after final.json under --follow.
The follower runs in a forked child with a time limit; its TensorBoard events are read back with
tensorboard's EventAccumulator and judged against an oracle written here from docs/monitoring.md's
rules, not from the follower's code:

  crash              a traceback (any exception but the follower's own error exit) or a signal
  hang               no exit within --hang-seconds
  silent acceptance  a line the rules refuse that was written, or skipped without a warning naming it
  wrong              an accepted line whose numbers differ from the oracle's, a valid line refused, a
                     hostile run not named in an error, a wrong exit status

    python3 tests/fuzz/fuzz_watch.py --seconds 30                    # CI (ctest fuzz.watch)
    python3 tests/fuzz/fuzz_watch.py --seconds 3600 --seed random    # by hand
"""
from __future__ import annotations

import argparse
import io
import json
import math
import os
import random
import shutil
import signal
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent.parent / "tools"))
from targets.common import mutate_bytes  # noqa: E402
import watch_metrics  # noqa: E402

import numpy as np  # noqa: E402
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402
import torch.utils.tensorboard  # noqa: E402,F401  (imported once, before the children fork)

# ---- the oracle: docs/monitoring.md, "What a line must be" -------------------------------------

LIMIT_BYTES, LIMIT_DEPTH, LIMIT_NUMBERS, INT64 = 4 << 20, 32, 65536, 2**63
KNOWN = {"train_loss": "loss/train", "val_loss": "loss/val", "lr": "optim/lr", "grad_norm": "optim/grad_norm",
         "tokens_per_s": "speed/tokens_per_s", "mfu": "speed/mfu", "tokens": "progress/tokens",
         "elapsed_s": "progress/elapsed_s"}


class Refused(Exception):
    pass


def strict_json(text: str):
    """RFC 8259 with the documented limits, checked after a plain parse of the pairs."""
    def pairs(items):
        keys = [k for k, _ in items]
        if len(set(keys)) != len(keys):
            raise Refused("duplicate key")
        return dict(items)

    def number(s):
        if any(c in s for c in ".eE"):
            v = float(s)
            if v in (math.inf, -math.inf):
                raise Refused("float overflow")
            return v
        if len(s.lstrip("-")) > 20 or not -INT64 <= int(s) < INT64:
            raise Refused("int overflow")
        return int(s)

    def constant(_):
        raise Refused("NaN/Infinity")

    try:
        return json.loads(text, object_pairs_hook=pairs, parse_float=number, parse_int=number, parse_constant=constant)
    except (RecursionError, ValueError) as e:
        raise Refused(f"not JSON: {e}") from None


def nesting(value, level=0):
    if isinstance(value, dict):
        for k in value:
            if any(0xD800 <= ord(c) <= 0xDFFF for c in k):
                raise Refused("surrogate key")
        return max([level + 1] + [nesting(v, level + 1) for v in value.values()]) if level < 40 else level
    if isinstance(value, list):
        return max([level + 1] + [nesting(v, level + 1) for v in value]) if level < 40 else level
    return level


def numeric(v):
    return type(v) in (int, float)


def expected_scalars(record: dict) -> list:
    out = []

    def walk(v, tag):
        if numeric(v):
            out.append((tag, float(v)))
        elif isinstance(v, dict):
            for k, x in v.items():
                walk(x, f"{tag}/{k}")
        elif isinstance(v, list):
            for i, x in enumerate(v):
                layer = x.get("layer") if isinstance(x, dict) else None
                walk(x, f"{tag}/layer{layer}" if numeric(layer) else f"{tag}/{i}")

    prefix = {"activations": "activations", "schedule_change": "schedule"}.get(record.get("type"))
    for k, v in record.items():
        if k in ("step", "type"):
            continue
        if prefix:
            walk(v, f"{prefix}/{k}")
        elif k in KNOWN:
            if v is not None:
                out.append((KNOWN[k], float(v)))
        else:
            walk(v, f"other/{k}")
    if len(out) > LIMIT_NUMBERS:
        raise Refused("too many numbers")
    if len({t for t, _ in out}) != len(out):
        raise Refused("tag twice")
    return out


def oracle(raw: bytes):
    """(step, scalars) of an acceptable line; raises Refused."""
    if not raw.strip():
        raise Refused("empty")
    if len(raw) > LIMIT_BYTES:
        raise Refused("too long")
    try:
        text = raw.decode("utf-8", "strict")
    except UnicodeDecodeError:
        raise Refused("not UTF-8") from None
    record = strict_json(text)
    if nesting(record) > LIMIT_DEPTH:
        raise Refused("too deep")
    if not isinstance(record, dict):
        raise Refused("not an object")
    step = record.get("step")
    if type(step) is not int or not 0 <= step < INT64:
        raise Refused("bad step")
    if "type" in record and type(record["type"]) is not str:
        raise Refused("bad type")
    for k in KNOWN:
        if k in record and record[k] is not None and not numeric(record[k]):
            raise Refused(f"bad {k}")
    return step, expected_scalars(record)


# ---- inputs ------------------------------------------------------------------------------------

def seed_lines(rng: random.Random, n: int) -> list:
    lines = []
    for step in range(1, n + 1):
        line = {"step": step, "tokens": 128 * step, "train_loss": 8 - step / 10, "val_loss": None, "lr": 1e-3,
                "grad_norm": 1.5, "tokens_per_s": 5000.0, "elapsed_s": step * 0.1}
        if step % 4 == 0:
            line["val_loss"] = 8.2 - step / 10
        lines.append(json.dumps(line).encode())
        if step % 5 == 0:
            lines.append(json.dumps({"type": "activations", "step": step, "probe_sequences": 2,
                                     "layers": [{"layer": l, "sink": {"max_abs": 1.5 * l, "rms": 0.5}} for l in range(2)]}
                                    ).encode())
        if step == 7:
            lines.append(json.dumps({"type": "schedule_change", "step": 7, "total_steps_before": 10,
                                     "total_steps": 20, "next_lr_before": 1e-4, "next_lr": 2e-4}).encode())
    return lines


STRUCTURED = [
    lambda s: s.replace(b'"step": ', b'"step": 99999999999999999999999999', 1),
    lambda s: s.replace(b'"step": ', b'"step": -', 1),
    lambda s: s.replace(b'"step": ', b'"step": 1e400, "x": ', 1),
    lambda s: s.replace(b'"step": ', b'"step": "1", "x": ', 1),
    lambda s: s.replace(b'"step": ', b'"step": 9223372036854775807, "x": ', 1),
    lambda s: s.replace(b'"step": ', b'"step": 9223372036854775808, "x": ', 1),
    lambda s: s.replace(b'"step": ', b'"step": 2.5, "x": ', 1),
    lambda s: s.replace(b'"step": ', b'"step": true, "x": ', 1),
    lambda s: s.replace(b'"step": ', b'"x": ', 1),
    lambda s: s[:-1] + b', "step": 3}',
    lambda s: s[:-1] + b', "y": NaN}',
    lambda s: s[:-1] + b', "y": -Infinity}',
    lambda s: s[:-1] + b', "y": 1e308}',
    lambda s: s[:-1] + b', "y": 1e309}',
    lambda s: s[:-1] + b', "y": 1' + b"0" * 30 + b"}",
    lambda s: s[:-1] + b', "y": 1' + b"0" * 5000 + b"}",
    lambda s: s[:-1] + b', "y": ' + b"[" * 32 + b"1" + b"]" * 32 + b"}",
    lambda s: s[:-1] + b', "y": ' + b"[" * 31 + b"1" + b"]" * 31 + b"}",
    lambda s: s[:-1] + b', "y": ' + b"{\"a\":" * 3000 + b"1" + b"}" * 3000 + b"}",
    lambda s: s[:-1] + b', "y": ' + b"[" * 200000 + b"}",
    lambda s: s[:-1] + b', "a/b": 1, "a": {"b": 2}}',
    lambda s: s[:-1] + b', "\\ud800": 1}',
    lambda s: s[:-1] + b', "z": "\\ud800"}',
    lambda s: s[:-1] + b', "z": "\xff\xfe"}',
    lambda s: b"\xef\xbb\xbf" + s,
    lambda s: s + b"\r",
    lambda s: s + b" " + s,
    lambda s: s.replace(b'"train_loss": ', b'"train_loss": "7", "q": ', 1),
    lambda s: s.replace(b'"train_loss": ', b'"train_loss": [1], "q": ', 1),
    lambda s: s.replace(b'"train_loss": ', b'"train_loss": true, "q": ', 1),
    lambda s: s[:-1] + b', "type": 5}',
    lambda s: s[:-1] + b', "w": {"u": [1, 2, {"layer": 1, "v": 3}, {"layer": 1, "v": 4}]}}',
    lambda s: s[:-1] + b', "w": [' + b"1," * 70000 + b"1]}",
    lambda s: s[:-1] + b', "big": "' + b"x" * (LIMIT_BYTES + 1) + b'"}',
    lambda s: b"[1, 2]",
    lambda s: b"42",
    lambda s: b"",
    lambda s: b"  \t",
    lambda s: s[: len(s) // 2],
]
SNIPPETS = [b"{", b"}", b"[", b"]", b",", b":", b'"', b"\\", b"\xff", b"\x00", b"NaN", b"1e999", b"-", b".",
            b'"step"', b"99999999999999999999", b"\n", b"\xc3", b"\\u0000", b"null", b"true"]


def case_lines(rng: random.Random) -> tuple[list, str]:
    lines, what = seed_lines(rng, rng.randint(3, 24)), []
    for _ in range(rng.randint(1, 4)):
        i = rng.randrange(len(lines))
        if rng.random() < 0.6:
            k = rng.randrange(len(STRUCTURED))
            lines[i] = STRUCTURED[k](lines[i])
            what.append(f"line{i + 1}:s{k}")
        else:
            lines[i], how = mutate_bytes(rng, lines[i], SNIPPETS, rng.randint(1, 3))
            what.append(f"line{i + 1}:{how}")
    # A byte edit may add newlines: judge the lines the file will hold.
    return b"\n".join(lines).split(b"\n"), ",".join(what)


HOSTILE = ["metrics_dir", "metrics_fifo", "metrics_dev_zero", "final_fifo", "final_dir", "config_fifo",
           "config_not_utf8", "tail_after_final", "run_dir_is_a_file"]


# ---- running the follower ----------------------------------------------------------------------

class Outcome:
    def __init__(self, kind: str, code: int, stderr: str):
        self.kind, self.code, self.stderr = kind, code, stderr


def run_follower(argv: list, hang_seconds: float, log: Path) -> Outcome:
    pid = os.fork()
    if pid == 0:  # the child: the follower, its stderr to the log
        try:
            fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(fd, 2)
            sys.stderr = io.TextIOWrapper(os.fdopen(2, "wb", 0), write_through=True)
            code = watch_metrics.main(argv)
        except SystemExit as e:
            code = 1 if isinstance(e.code, str) else (e.code or 0)
            if isinstance(e.code, str):
                print(e.code, file=sys.stderr)
        except BaseException:
            import traceback
            traceback.print_exc()
            code = 70
        sys.stderr.flush()
        os._exit(code)
    deadline = time.monotonic() + hang_seconds
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return Outcome("hang", -1, log.read_text(errors="replace"))
        time.sleep(0.01)
    stderr = log.read_text(errors="replace")
    if os.WIFSIGNALED(status):
        return Outcome("crash", -os.WTERMSIG(status), stderr)
    code = os.WEXITSTATUS(status)
    return Outcome("crash" if code == 70 or "Traceback" in stderr else "exited", code, stderr)


def written(tb_dir: Path) -> list:
    if not tb_dir.exists():
        return []
    acc = EventAccumulator(str(tb_dir), size_guidance={"scalars": 0}, purge_orphaned_data=False)
    acc.Reload()
    return sorted((tag, e.step, e.value) for tag in acc.Tags()["scalars"] for e in acc.Scalars(tag))


def float32(v: float) -> float:
    with np.errstate(over="ignore"):
        return float(np.float32(v))


def judge_lines(lines: list, outcome: Outcome, tb: list) -> str | None:
    """`lines` as the file holds them: the last one has no newline (taken, as the run has finished),
    or is empty when the file ends with one."""
    expected, refused = [], set()
    for n, raw in enumerate(lines, 1):
        if n == len(lines) and not raw:
            continue
        try:
            step, values = oracle(raw)
            expected += [(tag, step, float32(v)) for tag, v in values]
        except Refused as e:
            refused.add((n, str(e)))
    for n, why in refused:
        if f"metrics.jsonl:{n}: " not in outcome.stderr:
            return f"silent acceptance: line {n} ({why}: {lines[n - 1][:120]!r}) has no warning"
    for n in range(1, len(lines) + 1):
        if f"metrics.jsonl:{n}: " in outcome.stderr and n not in {r for r, _ in refused}:
            return f"valid line {n} refused: {lines[n - 1][:120]!r}"
    got = tb
    want = sorted(expected)
    if len(got) != len(want) or any(g[0] != w[0] or g[1] != w[1] or not same(g[2], w[2]) for g, w in zip(got, want)):
        missing = [w for w in want if w not in got][:3]
        extra = [g for g in got if g not in want][:3]
        return f"wrong numbers written: missing {missing}, extra {extra}"
    return None


def same(a: float, b: float) -> bool:
    return a == b or (math.isinf(a) and math.isinf(b) and (a > 0) == (b > 0))


def make_hostile(kind: str, run: Path, lines: list) -> tuple[list, str]:
    """Applies `kind`; returns extra argv and the words the error must hold ("" when the run is fine)."""
    metrics, final, config = run / "metrics.jsonl", run / "final.json", run / "config.yaml"
    if kind == "metrics_dir":
        metrics.unlink(), metrics.mkdir()
        return [], "metrics.jsonl is a directory"
    if kind == "metrics_fifo":
        metrics.unlink(), os.mkfifo(metrics)
        return ["--follow", "--poll", "0.01"], "metrics.jsonl is a FIFO"
    if kind == "metrics_dev_zero":
        metrics.unlink(), metrics.symlink_to("/dev/zero")
        return ["--follow", "--poll", "0.01"], "metrics.jsonl is a character device"
    if kind == "final_fifo":
        final.unlink(), os.mkfifo(final)
        return ["--follow", "--poll", "0.01"], "final.json is a FIFO"
    if kind == "final_dir":
        final.unlink(), final.mkdir()
        return ["--follow", "--poll", "0.01"], "final.json is a directory"
    if kind == "config_fifo":
        os.mkfifo(config)
        return ["--follow", "--poll", "0.01"], ""
    if kind == "config_not_utf8":
        config.write_bytes(b"seed: 1\nnote: \xff\xfe\n")
        return [], ""
    if kind == "tail_after_final":
        metrics.write_bytes(b"\n".join(lines))  # no newline after the last line
        os.utime(final)  # written after the last line
        return ["--follow", "--poll", "0.01"], ""
    if kind == "run_dir_is_a_file":
        shutil.rmtree(run)
        run.write_text("not a directory\n")
        return [], "Not a directory"
    raise ValueError(kind)


def one_case(rng: random.Random, work: Path, i: int, hang_seconds: float) -> tuple[str, str | None]:
    case = work / f"case{i:05d}"
    run, tb = case / "run", case / "tb"
    run.mkdir(parents=True)
    lines, what = case_lines(rng)
    (run / "metrics.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    (run / "final.json").write_text("{}\n")
    extra, error = [], ""
    if rng.random() < 0.25:
        kind = rng.choice(HOSTILE)
        what += f",{kind}"
        extra, error = make_hostile(kind, run, lines)
    if "tail_after_final" not in what:
        lines = lines + [b""]  # the file ends with a newline
    argv = ["--tensorboard", str(tb), *extra, "--run", json.dumps({"name": "r", "dir": str(run)})]
    outcome = run_follower(argv, hang_seconds, case / "stderr.txt")
    if outcome.kind != "exited":
        return what, f"{outcome.kind}: {outcome.stderr[-1500:]}"
    if error:
        if outcome.code != 1 or error not in outcome.stderr:
            return what, f"exit {outcome.code} without the error '{error}': {outcome.stderr[-800:]}"
        return what, None
    if outcome.code != 0:
        return what, f"exit {outcome.code}: {outcome.stderr[-800:]}"
    return what, judge_lines(lines, outcome, written(tb / "r"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--seed", default="0", help="an integer, or 'random' (printed, to replay)")
    ap.add_argument("--hang-seconds", type=float, default=30.0)
    ap.add_argument("--work", default="fuzz-watch-work", help="scratch; failing cases are kept in WORK/failures")
    args = ap.parse_args(argv)
    seed = random.SystemRandom().randrange(2**32) if args.seed == "random" else int(args.seed)
    rng = random.Random(seed)
    work = Path(args.work).resolve()
    shutil.rmtree(work, ignore_errors=True)
    (work / "failures").mkdir(parents=True)
    counts = {"cases": 0, "lines": 0, "crash": 0, "hang": 0, "silent acceptance": 0, "other": 0}
    failures = []
    deadline = time.monotonic() + args.seconds
    i = 0
    while time.monotonic() < deadline:
        what, problem = one_case(rng, work, i, args.hang_seconds)
        counts["cases"] += 1
        metrics = work / f"case{i:05d}" / "run" / "metrics.jsonl"
        if metrics.is_file() and not metrics.is_symlink():
            counts["lines"] += metrics.read_bytes().count(b"\n")
        if problem:
            kind = next((k for k in ("crash", "hang", "silent acceptance") if problem.startswith(k)), "other")
            counts[kind] += 1
            keep = work / "failures" / f"case{i:05d}"
            shutil.move(str(work / f"case{i:05d}"), keep)
            failures.append(f"{what}: {problem}\n    kept in {keep}")
        else:
            shutil.rmtree(work / f"case{i:05d}", ignore_errors=True)
        i += 1
    print(f"fuzz_watch: seed {seed}, {args.seconds:.0f} s: {counts['cases']} runs, {counts['lines']} lines; "
          f"{counts['crash']} crashes, {counts['hang']} hangs, {counts['silent acceptance']} silent acceptances, "
          f"{counts['other']} other failures")
    for f in failures[:20]:
        print("FAIL " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
