#!/usr/bin/env python3
"""The extreme-token phenomena of one run along its training: `attnlab probe` on every kept
checkpoint, and one markdown row per step (docs/sweeps.md, "The phenomena on a CPU").

    python3 tools/phenomena_trajectory.py RUN_DIR [--attnlab build/attnlab] [--out FILE]

Per checkpoint (RUN_DIR/checkpoints/step_*, in step order; the probe's files go to
RUN_DIR/trajectory/step_N/ and are reused when present), from its probe.json (docs/probes.md):
- the sink head: the head with the largest first-key mass over every layer, its mass, and the value
  drain there (||v_0|| over the median value norm of that head);
- the first-key mass of the queries that are not triggers (the dormant domain), model level;
- the residual peak: the largest over layers of ||h_0|| / median_t ||h_t||;
- the sink state: the largest max_c |x_c| / median_c |x_c| at position 0 (Sun et al.'s ratio).
The table goes to stdout, and with --out to FILE.
"""
import argparse
import json
import pathlib
import re
import subprocess
import sys

COLUMNS = ["step", "sink head", "its first-key mass", "its value drain", "other first-key mass",
           "residual peak (max over layers)", "sink-state max / median"]


def checkpoints(run):
    """(step, path) of every checkpoint directory of `run`, by step."""
    found = []
    for path in (run / "checkpoints").glob("step_*"):
        m = re.fullmatch(r"step_(\d+)", path.name)
        if m and path.is_dir():
            found.append((int(m.group(1)), path))
    return sorted(found)


def row(step, probe):
    """The table's cells for one probe.json (a dict)."""
    layers = probe["summary"]["layers"]
    best = None  # (mass, layer, head)
    for layer in layers:
        for h, mass in enumerate(layer["heads"].get("first_key_mass", [])):
            if mass is not None and (best is None or mass > best[0]):
                best = (mass, layer["layer"], h)
    drain = None
    if best is not None:
        drains = layers[best[1]]["heads"].get("value_drain", [])
        drain = drains[best[2]] if best[2] < len(drains) else None
    peaks = [layer["residual_peak"] for layer in layers if layer.get("residual_peak") is not None]
    other = probe["summary"]["model"].get("other_key_mass")
    sink = probe.get("sink_state", {}).get("max_ratio")

    def pct(v):
        return "-" if v is None else f"{100 * v:.1f}%"

    def num(v, digits=3):
        return "-" if v is None else f"{v:.{digits}f}"

    return [str(step), "-" if best is None else f"L{best[1]}H{best[2]}", pct(best and best[0]), num(drain),
            pct(other), num(max(peaks) if peaks else None), num(sink, 1)]


def table(rows):
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---:|" * len(COLUMNS)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def probe_checkpoint(attnlab, checkpoint, out):
    """probe.json of `checkpoint`, probing it into `out` unless it is there already."""
    result = out / "probe.json"
    if not result.is_file():
        done = subprocess.run([str(attnlab), "probe", "--checkpoint", str(checkpoint), "--out", str(out), "--quiet"],
                              capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"phenomena_trajectory.py: attnlab probe of {checkpoint} exited {done.returncode}:\n{done.stderr}")
    return json.loads(result.read_text(encoding="utf-8"))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", type=pathlib.Path, help="a run directory with kept checkpoints")
    parser.add_argument("--attnlab", type=pathlib.Path, default=pathlib.Path(__file__).resolve().parents[1] / "build/attnlab")
    parser.add_argument("--out", type=pathlib.Path, help="also write the table to this file")
    args = parser.parse_args()
    steps = checkpoints(args.run)
    if not steps:
        sys.exit(f"phenomena_trajectory.py: {args.run / 'checkpoints'} holds no step_N checkpoint")
    rows = [row(step, probe_checkpoint(args.attnlab, path, args.run / "trajectory" / path.name)) for step, path in steps]
    text = table(rows)
    sys.stdout.write(text)
    if args.out:
        args.out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
