#!/usr/bin/env python3
"""Plots of massive activations (SPEC section 5) from the JSON attnlab writes:

    python tools/plot_activations.py OUT/activations.json --out OUT   # attnlab activations
    python tools/plot_activations.py OUT/wd.json --out OUT            # attnlab report --wd

activations.json -> per run (file names carry the run's index and arm/seed):
  layers_<i>.png   top-1/2/3 and median |x_c| per layer at the final checkpoint (sink and peak states)
  heatmap_<i>.png  step x channel |x_c| at the sink state for one layer (log step axis)
  tokens_<i>.png   tokens x channels |x| for that layer at the final checkpoint
  max_<i>.png      max |x_c| of the sink and peak states per layer against step (log axes)
wd.json -> wd_curves.png (max |x| against step per run, peaks marked) and wd_fits.png (t_peak
against ln lambda, peak against lambda on log axes, with the fitted lines).
Layer l is the residual stream after block l, before the final LayerNorm; l = 0 is the embedding
output. Needs matplotlib (scripts/setup.sh's venv).
"""
import argparse
import json
import math
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.colors import LogNorm  # noqa: E402


def run_label(run):
    return f"{run['arm']} s{run['seed']} ({run['dir']})"


def plot_layers(run, path):
    final = run["checkpoints"][-1]
    layers = [entry["layer"] for entry in final["layers"]]
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    for ax, state in zip(axes, ["sink", "peak"]):
        stats = [entry[state] for entry in final["layers"]]
        for k in range(3):
            ax.plot(layers, [abs(s["top"][k][1]) if len(s["top"]) > k else float("nan") for s in stats],
                    marker="o", label=f"top-{k + 1}")
        ax.plot(layers, [s["median_abs"] for s in stats], marker="x", linestyle="--", label="median")
        ax.set_yscale("log")
        ax.set_xticks(layers)
        ax.set_xlabel("layer l (0 = embedding output)")
        ax.set_title(f"{state} state, step {final['step']}")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("|x_c|")
    axes[0].legend()
    fig.suptitle(run_label(run), fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def positive_floor(rows):
    values = [v for row in rows for v in row if v > 0]
    return min(values) if values else 1e-12


def plot_heatmap(run, path):
    maps = run["maps"]
    steps = maps["sink_heatmap"]["steps"]
    rows = maps["sink_heatmap"]["abs"]
    floor = positive_floor(rows)
    data = [[max(v, floor) for v in row] for row in rows]
    # cell edges on a log axis: geometric midpoints between checkpoint steps
    edges = [steps[0] / math.sqrt(2)] + [math.sqrt(a * b) for a, b in zip(steps, steps[1:])] + [steps[-1] * math.sqrt(2)]
    channels = list(range(len(rows[0]) + 1))
    fig, ax = plt.subplots(figsize=(10, 4))
    mesh = ax.pcolormesh(edges, channels, list(map(list, zip(*data))), norm=LogNorm(), shading="flat")
    ax.set_xscale("log")
    ax.set_xlabel("step (log)")
    ax.set_ylabel("channel c")
    ax.set_title(f"|x_c| at the sink state, layer {maps['layer']} — {run_label(run)}", fontsize=9)
    fig.colorbar(mesh, ax=ax, label="|x_c|")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_tokens(run, path):
    maps = run["maps"]
    rows = maps["tokens"]["abs"]
    if not rows:
        return
    floor = positive_floor(rows)
    fig, ax = plt.subplots(figsize=(10, 4))
    image = ax.imshow([[max(v, floor) for v in row] for row in rows], aspect="auto", norm=LogNorm(),
                      interpolation="nearest")
    ax.set_xlabel("channel c")
    ax.set_ylabel("position t")
    ax.set_title(f"|x| of probe sequence {maps['tokens']['sequence']}, layer {maps['layer']}, final checkpoint — "
                 f"{run_label(run)}", fontsize=9)
    fig.colorbar(image, ax=ax, label="|x_c|")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_max(run, path):
    steps = [c["step"] for c in run["checkpoints"]]
    n_layers = len(run["checkpoints"][0]["layers"])
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    for ax, state in zip(axes, ["sink", "peak"]):
        for layer in range(n_layers):
            ax.plot(steps, [c["layers"][layer][state]["max_abs"] for c in run["checkpoints"]], marker=".",
                    label=f"l={layer}")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("step (log)")
        ax.set_title(f"max |x_c|, {state} state")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.suptitle(run_label(run), fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_activations(report, out):
    written = []
    for i, run in enumerate(report["runs"]):
        tag = f"{i}_{run['arm']}_s{run['seed']}"
        for name, draw in [("layers", plot_layers), ("heatmap", plot_heatmap), ("tokens", plot_tokens),
                           ("max", plot_max)]:
            path = os.path.join(out, f"{name}_{tag}.png")
            draw(run, path)
            written.append(path)
    return written


def plot_wd(report, out):
    fig, ax = plt.subplots(figsize=(7, 4))
    for run in report["runs"]:
        curve = run["curve"]
        line, = ax.plot(curve["step"], curve["max_abs"], label=f"lambda={run['lambda']:g} s{run['seed']}")
        if run["peak_step"] is not None:
            ax.plot([run["peak_step"]], [run["peak"]], marker="*", markersize=12, color=line.get_color())
    ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel("max |x_c| over layers (peak state)")
    ax.set_title("Largest activation during training; * = peak")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    curves = os.path.join(out, "wd_curves.png")
    fig.savefig(curves, dpi=120)
    plt.close(fig)

    fig, (ax_t, ax_p) = plt.subplots(1, 2, figsize=(10, 4))
    for group in report["groups"]:
        runs = [r for r in report["runs"] if r["group"] == group["group"] and r["fitted"]]
        if not runs:
            continue
        lam = [r["lambda"] for r in runs]
        points = ax_t.plot([math.log(x) for x in lam], [r["peak_step"] for r in runs], "o", label=group["group"])
        ax_p.plot(lam, [r["peak"] for r in runs], "o", color=points[0].get_color(), label=group["group"])
        xs = sorted(lam)
        if group["peak_step_fit"]:
            f = group["peak_step_fit"]
            ax_t.plot([math.log(x) for x in xs], [f["a"] - f["b"] * math.log(x) for x in xs], "-",
                      color=points[0].get_color(), label=f"a={f['a']:.3g}, b={f['b']:.3g}, r={f['r'] or float('nan'):.2f}")
        if group["peak_size_fit"]:
            f = group["peak_size_fit"]
            se = f"±{f['p_se']:.2f}" if f["p_se"] is not None else ""
            ax_p.plot(xs, [math.exp(f["log_c"]) * x ** f["p"] for x in xs], "-", color=points[0].get_color(),
                      label=f"p={f['p']:.2f}{se}")
    ax_t.set_xlabel("ln lambda")
    ax_t.set_ylabel("t_peak (steps)")
    ax_t.set_title("t_peak = a - b ln lambda")
    ax_p.set_xscale("log")
    ax_p.set_yscale("log")
    ax_p.set_xlabel("lambda")
    ax_p.set_ylabel("peak max |x_c|")
    ax_p.set_title("peak ~ lambda^p")
    for ax in (ax_t, ax_p):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fits = os.path.join(out, "wd_fits.png")
    fig.savefig(fits, dpi=120)
    plt.close(fig)
    return [curves, fits]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("json", help="activations.json or wd.json")
    parser.add_argument("--out", required=True, help="directory for the PNGs")
    args = parser.parse_args()
    with open(args.json) as f:
        report = json.load(f)
    os.makedirs(args.out, exist_ok=True)
    written = plot_wd(report, args.out) if report.get("kind") == "weight_decay" else plot_activations(report, args.out)
    for path in written:
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
