#!/usr/bin/env python3
"""Plots of `attnlab report --probes --inject` (probes.json): layer x head heatmaps of first-key mass
(one panel per run) and junk-injection dose-response curves (one panel per cutoff and junk kind,
one line per arm, mean over seeds).

    python tools/plot_probes.py runs/sweeps/demo/report/probes.json --out runs/sweeps/demo/report

Writes first_key_mass_<tier>.png and dose_response_<tier>.png. Needs matplotlib (scripts/setup.sh's venv).
"""
import argparse
import json
import os
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ARM_ORDER = []  # the registry's order, from probes.json's "arm_order" (set in main)


def group_of(run):
    return run["tier"] + (f"_{run['variant'].replace('/', '_')}" if run["variant"] else "")


def arm_key(arm):
    return ARM_ORDER.index(arm) if arm in ARM_ORDER else len(ARM_ORDER)


def heatmaps(runs, group, out_dir):
    runs = sorted([r for r in runs if r.get("probe")], key=lambda r: (arm_key(r["arm"]), r["seed"]))
    if not runs:
        return None
    arms = sorted({r["arm"] for r in runs}, key=arm_key)
    seeds = sorted({r["seed"] for r in runs})
    matrices = {id(r): [[v if v is not None else float("nan") for v in layer["heads"]["first_key_mass"]]
                        for layer in r["probe"]["summary"]["layers"]] for r in runs}
    # One colour scale for every panel, so arms compare; at least 1% so noise is not stretched.
    vmax = max([0.01] + [v for m in matrices.values() for row in m for v in row if v == v])
    fig, axes = plt.subplots(len(arms), len(seeds), figsize=(2.8 * len(seeds) + 1.2, 2.4 * len(arms)), squeeze=False,
                             constrained_layout=True)
    for ax in axes.flat:
        ax.axis("off")
    image = None
    for r in runs:
        ax = axes[arms.index(r["arm"])][seeds.index(r["seed"])]
        matrix = matrices[id(r)]
        ax.axis("on")
        image = ax.imshow(matrix, vmin=0.0, vmax=vmax, cmap="viridis", aspect="auto")
        if len(matrix) * len(matrix[0]) <= 64:
            for li, row in enumerate(matrix):
                for hi, v in enumerate(row):
                    ax.text(hi, li, f"{100 * v:.1f}%", ha="center", va="center", fontsize=7,
                            color="white" if v < 0.6 * vmax else "black")
        ax.set_title(f"{r['arm']} s{r['seed']}", fontsize=9)
        ax.set_xlabel("head", fontsize=8)
        ax.set_ylabel("layer", fontsize=8)
        ax.set_xticks(range(len(matrix[0])))
        ax.set_yticks(range(len(matrix)))
    fig.suptitle(f"First-key mass (mean a_i0 over queries i >= 1), tier {group}")
    fig.colorbar(image, ax=axes, shrink=0.8, label="first-key mass")
    path = os.path.join(out_dir, f"first_key_mass_{group}.png")
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def dose_response(runs, group, out_dir):
    # (cutoff, kind) -> arm -> eps -> [increase per seed]
    curves = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for r in runs:
        for inj in r.get("inject", []):
            key = (inj["options"]["cutoff"], inj["options"]["kind"])
            for d in inj["result"]["doses"]:
                curves[key][r["arm"]][d["eps"]].append(d["increase"])
    if not curves:
        return None
    cutoffs = sorted({k[0] for k in curves}, reverse=True)  # p25 first, as the paper
    kinds = [k for k in ("structured", "gaussian", "gate_direction") if any(key[1] == k for key in curves)]
    fig, axes = plt.subplots(len(cutoffs), len(kinds), figsize=(4.4 * len(kinds), 3.6 * len(cutoffs)), squeeze=False,
                             constrained_layout=True)
    cmap = plt.get_cmap("tab10")
    for ax in axes.flat:
        ax.axis("off")
    for key in curves:
        ax = axes[cutoffs.index(key[0])][kinds.index(key[1])]
        ax.axis("on")
        for arm in sorted(curves[key], key=arm_key):
            points = sorted(curves[key][arm].items())
            xs = [0.0] + [e for e, _ in points]
            ys = [0.0] + [sum(v) / len(v) for _, v in points]
            ax.plot(xs, ys, marker="o", markersize=3, label=arm, color=cmap(arm_key(arm) % 10))
        ax.set_yscale("symlog", linthresh=1e-3)
        ax.set_title(f"{key[1]} junk, below {key[0]}", fontsize=10)
        ax.set_xlabel("eps (junk norm / median read norm)")
        ax.set_ylabel("loss increase (nats)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(f"Junk injection dose-response, tier {group} (mean over seeds)")
    path = os.path.join(out_dir, f"dose_response_{group}.png")
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("probes_json")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    with open(args.probes_json) as f:
        results = json.load(f)
    ARM_ORDER[:] = results["arm_order"]
    os.makedirs(args.out, exist_ok=True)
    groups = defaultdict(list)
    for r in results["runs"]:
        groups[group_of(r)].append(r)
    for group, runs in sorted(groups.items()):
        for path in (heatmaps(runs, group, args.out), dose_response(runs, group, args.out)):
            if path:
                print(f"wrote {path}")


if __name__ == "__main__":
    main()
