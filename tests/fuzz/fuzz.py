#!/usr/bin/env python3
"""Mutation fuzzing of attnlab's readers (docs/fuzzing.md).

Each target (tests/fuzz/targets/<name>.py) writes mutated inputs from valid seeds, knowing for many
mutations what the reader must do; the driver (fuzz_readers, built with the tests) reads them in
batches and prints a verdict per input. A failure is a crash, a hang (an input read for longer than
--hang-seconds), a "broken" verdict (an undocumented exception, or an accepted input that a writer
cannot write back) or a judgement of the target (a corrupted input accepted silently, a value read
wrongly). Failing inputs are kept under --work/failures with the command that replays them.

    python3 tests/fuzz/fuzz.py --driver build/tests/fuzz_readers --seconds 30          # CI (ctest fuzz.readers)
    python3 tests/fuzz/fuzz.py --driver build/tests/fuzz_readers --seconds 3600 --seed random   # by hand
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import random
import selectors
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from targets import TARGETS  # noqa: E402  (the registry: one module per target)
from targets.common import Case  # noqa: E402


@dataclass
class Verdict:
    kind: str  # accepted | refused | broken | crash | hang
    error: str = ""
    summary: dict = field(default_factory=dict)


class Driver:
    """Runs fuzz_readers over a batch, pinning a crash or a hang to the input being read."""

    def __init__(self, path: str, hang_seconds: float, log: Path):
        self.path, self.hang_seconds, self.log = path, hang_seconds, log

    def run(self, target: str, inputs: list[str]) -> dict[str, Verdict]:
        verdicts: dict[str, Verdict] = {}
        while len(verdicts) < len(inputs):
            remaining = [p for p in inputs if p not in verdicts]
            verdicts.update(self._run_once(target, remaining))
        return verdicts

    def _run_once(self, target: str, inputs: list[str]) -> dict[str, Verdict]:
        verdicts: dict[str, Verdict] = {}
        with open(self.log, "wb") as stderr:
            proc = subprocess.Popen([self.path, target, *inputs], stdout=subprocess.PIPE, stderr=stderr,
                                    start_new_session=True)
        current, since, buffer = None, time.monotonic(), b""
        startup = max(60.0, self.hang_seconds)  # loading LibTorch is not an input's time
        with selectors.DefaultSelector() as sel:
            sel.register(proc.stdout, selectors.EVENT_READ)
            while True:
                limit = self.hang_seconds if current is not None else startup
                left = since + limit - time.monotonic()
                if left <= 0 or not sel.select(timeout=left):
                    if time.monotonic() - since < limit:
                        continue
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
                    victim = current if current is not None else inputs[len(verdicts)]
                    verdicts[victim] = Verdict("hang", f"no verdict after {limit:.0f} s")
                    return verdicts
                chunk = os.read(proc.stdout.fileno(), 1 << 16)
                if not chunk:
                    break
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for raw in lines:
                    try:
                        line = json.loads(raw)
                    except ValueError:
                        continue  # not the driver's protocol (a library printing to stdout)
                    if "start" in line:
                        current, since = line["start"], time.monotonic()
                    else:
                        verdicts[line["input"]] = Verdict(line["verdict"], line.get("error", ""), line.get("summary", {}))
                        current, since = None, time.monotonic()
        code = proc.wait()
        if len(verdicts) < len(inputs):
            victim = current if current is not None else inputs[len(verdicts)]
            tail = self.log.read_bytes()[-2000:].decode("utf-8", "replace")
            verdicts[victim] = Verdict("crash", f"driver exited with {code} (signal {-code} if negative): {tail}")
        return verdicts


def judge(target, case: Case, verdict: Verdict) -> str | None:
    if verdict.kind in ("crash", "hang", "broken"):
        return f"{verdict.kind}: {verdict.error}"
    if verdict.kind == "refused" and not verdict.error.strip():
        return "refused with an empty message"
    return target.judge(case, verdict)


def keep_failure(work: Path, driver: str, target_name: str, case: Case, problem: str, failures: list[str]) -> None:
    keep = work / "failures" / f"{target_name}-{len(failures):03d}"
    if keep.exists():
        shutil.rmtree(keep)
    src = Path(case.path)
    if src.is_dir():
        shutil.copytree(src, keep)
    else:
        keep.mkdir(parents=True)
        for sibling in src.parent.iterdir():  # included files sit beside the input
            if sibling.is_file():
                shutil.copy2(sibling, keep / sibling.name)
    replay = keep if src.is_dir() else keep / src.name
    failures.append(f"[{target_name}] {case.mutation}: {problem}\n    replay: {driver} {target_name} {replay}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--driver", required=True, help="the fuzz_readers executable")
    ap.add_argument("--targets", default=",".join(TARGETS), help=f"comma-separated, of {', '.join(TARGETS)}")
    ap.add_argument("--seconds", type=float, default=30.0, help="time budget (the whole run)")
    ap.add_argument("--seed", default="0", help="an integer, or 'random' (printed, to replay)")
    ap.add_argument("--hang-seconds", type=float, default=60.0, help="one input read longer than this is a hang")
    ap.add_argument("--batch", type=int, default=64, help="inputs per driver process")
    ap.add_argument("--work", default="fuzz-work", help="scratch directory; failures are kept in WORK/failures")
    args = ap.parse_args(argv)

    seed = random.SystemRandom().randrange(2**32) if args.seed == "random" else int(args.seed)
    rng = random.Random(seed)
    work = Path(args.work).resolve()
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    driver = Driver(str(Path(args.driver).resolve()), args.hang_seconds, work / "driver.stderr")
    names = [n for n in args.targets.split(",") if n]
    targets = {}
    for name in names:
        if name not in TARGETS:
            ap.error(f"unknown target {name}; known: {', '.join(TARGETS)}")
        module = importlib.import_module(f"targets.{name}")
        targets[name] = module.Target(lambda paths, n=name: driver.run(n, paths), work / f"{name}-seed")

    failures: list[str] = []
    counts = {name: {"inputs": 0, "accepted": 0, "refused": 0} for name in names}
    deadline = time.monotonic() + args.seconds
    round_ = 0
    while time.monotonic() < deadline:
        for name, target in targets.items():
            batch_dir = work / f"{name}-{round_:05d}"
            batch_dir.mkdir()
            cases = [target.generate(rng, batch_dir / f"case{i:03d}") for i in range(args.batch)]
            verdicts = driver.run(name, [c.path for c in cases])
            for case in cases:
                verdict = verdicts[case.path]
                counts[name]["inputs"] += 1
                counts[name][verdict.kind] = counts[name].get(verdict.kind, 0) + 1
                problem = judge(target, case, verdict)
                if problem:
                    keep_failure(work, driver.path, name, case, problem, failures)
            shutil.rmtree(batch_dir)
        round_ += 1

    print(f"fuzz: seed {seed}, {args.seconds:.0f} s budget")
    for name, c in counts.items():
        print(f"  {name}: " + ", ".join(f"{v} {k}" for k, v in c.items()))
    for f in failures:
        print("FAIL " + f)
    print(f"fuzz: {len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
