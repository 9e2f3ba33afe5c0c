#!/usr/bin/env python3
"""Plots of an `attnlab report` (report.json): loss curves per arm, one figure per tier, and the
paired differences of SPEC section 3 against tier (with the paper's figures when the report was made
with --compare-paper).

    python tools/plot_report.py runs/sweeps/demo/report/report.json --out runs/sweeps/demo/report

Writes val_curves_<tier>.png (each run's training loss and validation loss, and each arm's paired
difference with baseline against step: one thin line per seed, the mean over seeds bold) and
increments.png (mean and paired t 95% interval per difference). Needs matplotlib (scripts/setup.sh's
venv).
"""
import argparse
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

# Panels of increments.png: (title, difference ids).
PANELS = [
    ("Zero option and filtering", ["zero_option", "filtering_norm", "filtering_proj"]),
    ("Standalone gains and 2x2 overlap",
     ["gain_norm_gate", "gain_proj_gate", "gain_off_by_one", "gain_sink_token", "gain_renorm",
      "overlap_norm", "overlap_proj"]),
]


def arm_colors(report):
    """One colour per arm, stable across figures (first appearance order)."""
    arms = []
    for group in report["groups"]:
        for arm in group["arms"]:
            if arm["arm"] not in arms:
                arms.append(arm["arm"])
    cmap = plt.get_cmap("tab10")
    return {arm: cmap(i % 10) for i, arm in enumerate(arms)}


def paired_gain(run, baseline):
    """L(baseline) - L(run) at the evaluations both made (same seed), by step: > 0 when the arm is ahead."""
    base = {p[0]: p[2] for p in baseline["val_curve"]}
    return {p[0]: base[p[0]] - p[2] for p in run["val_curve"] if p[0] in base}


def mean_over_seeds(gains_by_seed):
    """The mean paired gain at each step that every seed evaluated (so no step mixes seed sets)."""
    steps = sorted(set.intersection(*(set(g) for g in gains_by_seed)))
    return steps, [sum(g[s] for g in gains_by_seed) / len(gains_by_seed) for s in steps]


def plot_curves(report, group, colors, out_dir):
    runs = [report["runs"][i] for i in group["runs"]]
    baselines = {r["seed"]: r for r in runs if r["arm"] == "baseline"}
    fig, (train, full, paired) = plt.subplots(1, 3, figsize=(16, 4.4))
    labelled = set()
    gains = {}  # arm -> [per-seed {step: gain}]
    for run in runs:
        style = dict(color=colors[run["arm"]], alpha=0.85, linewidth=1.2)
        label = run["arm"] if run["arm"] not in labelled else None
        if run.get("train_curve"):
            curve = run["train_curve"]
            train.plot([p[0] for p in curve], [p[2] for p in curve], label=label, **dict(style, linewidth=0.9))
            labelled.add(run["arm"])
        curve = run["val_curve"]
        if not curve:
            continue
        full.plot([p[0] for p in curve], [p[2] for p in curve], marker="o", markersize=2.5,
                  label=None if run.get("train_curve") else label, **style)
        labelled.add(run["arm"])
        if run["arm"] != "baseline" and run["seed"] in baselines:
            gain = paired_gain(run, baselines[run["seed"]])
            if gain:
                gains.setdefault(run["arm"], []).append(gain)
                steps = sorted(gain)
                paired.plot(steps, [gain[s] for s in steps], color=colors[run["arm"]], alpha=0.35, linewidth=0.8)
    for arm, per_seed in gains.items():
        steps, mean = mean_over_seeds(per_seed)
        paired.plot(steps, mean, color=colors[arm], linewidth=2.0, marker="o", markersize=3,
                    label=f"{arm} (mean of {len(per_seed)} seed{'s' if len(per_seed) != 1 else ''})")
    title = "tier " + group["tier"] + (" (" + group["variant"] + ")" if group["variant"] else "")
    train.set_title(title + ": training loss, one line per seed", fontsize=10)
    train.set_ylabel("training loss (nats/token)")
    full.set_title("validation loss, one line per seed", fontsize=10)
    full.set_ylabel("validation loss (nats/token)")
    paired.set_title("paired with baseline: L(baseline) - L(arm), same seed", fontsize=10)
    paired.set_ylabel("gain over baseline (nats; > 0: arm better)")
    paired.axhline(0.0, color=colors.get("baseline", "grey"), linewidth=1.0)
    for ax in (train, full, paired):
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    train.legend(fontsize=8)
    if gains:
        paired.legend(fontsize=7)
    # The last half of training, where the arms separate, on its own scale.
    last = max((p[0] for r in runs for p in r["val_curve"]), default=0)
    late = [p[2] for r in runs for p in r["val_curve"] if p[0] >= last / 2]
    early = [p for r in runs for p in r["val_curve"] if p[0] < last / 2]
    if early and len(late) > 1 and min(late) < max(late):
        pad = 0.05 * (max(late) - min(late))
        inset = full.inset_axes([0.45, 0.45, 0.5, 0.45])
        for run in runs:
            pts = [p for p in run["val_curve"] if p[0] >= last / 2]
            inset.plot([p[0] for p in pts], [p[2] for p in pts], color=colors[run["arm"]], alpha=0.85,
                       linewidth=1.0, marker="o", markersize=2)
        inset.set_ylim(min(late) - pad, max(late) + pad)
        inset.tick_params(labelsize=7)
        inset.grid(alpha=0.3)
    fig.tight_layout()
    name = "val_curves_" + group["tier"] + ("_" + group["variant"].replace("/", "_") if group["variant"] else "") + ".png"
    fig.savefig(os.path.join(out_dir, name), dpi=120)
    plt.close(fig)
    return name


def interval_bars(differences):
    """id -> (mean, mean - low, high - mean) of the paired t 95% interval; no bar (0, 0) for one seed."""
    bars = {}
    for d in differences:
        if d["stats"]["n"] > 0:
            mean = d["stats"]["mean"]
            ci = (d.get("paired_t") or {}).get("ci")  # null for one seed
            bars[d["id"]] = (mean, mean - ci[0], ci[1] - mean) if ci else (mean, 0.0, 0.0)
    return bars


def plot_increments(report, out_dir):
    tiers = report["tier_order"]
    x = {t: i for i, t in enumerate(tiers)}
    groups = [g for g in report["groups"] if not g["variant"]]
    paper = (report.get("paper") or {}).get("differences", {})
    quantity = {d["id"]: d["quantity"] for g in report["groups"] for d in g["differences"]}
    fig, axes = plt.subplots(1, len(PANELS), figsize=(12, 4.5))
    cmap = plt.get_cmap("tab10")
    for ax, (title, ids) in zip(axes, PANELS):
        for k, diff_id in enumerate(ids):
            color = cmap(k % 10)
            xs, ys, errs, label = [], [], [[], []], None
            for g in groups:
                bars = interval_bars(g["differences"])
                for d in g["differences"]:
                    if d["id"] == diff_id and d["id"] in bars:
                        mean, below, above = bars[d["id"]]
                        xs.append(x[g["tier"]] + 0.06 * (k - len(ids) / 2))
                        ys.append(mean)
                        errs[0].append(below)
                        errs[1].append(above)
                        label = d["quantity"]
            if xs:
                ax.errorbar(xs, ys, yerr=errs, color=color, marker="o", capsize=3, linestyle="-", label=label)
            points = [(x[t], v) for t, v in paper.get(diff_id, {}).items() if t in x]
            if points:
                px = [p[0] + 0.06 * (k - len(ids) / 2) for p in points]
                lows = [v["low"] for _, v in points]
                highs = [v["high"] for _, v in points]
                mids = [(a + b) / 2 for a, b in zip(lows, highs)]
                ax.errorbar(px, mids, yerr=[[m - a for m, a in zip(mids, lows)], [b - m for m, b in zip(mids, highs)]],
                            color=color, marker="s", markerfacecolor="none", linestyle="--", alpha=0.7, capsize=2,
                            label=None if xs else quantity.get(diff_id, diff_id) + " (paper only)")
        ax.axhline(0.0, color="grey", linewidth=0.8)
        ax.set_xticks(range(len(tiers)))
        ax.set_xticklabels(tiers)
        ax.set_xlabel("tier")
        ax.set_ylabel("paired difference (nats; > 0: second arm better)")
        ax.set_title(title + "\nfilled: ours (mean, paired t 95% interval; no bar for one seed)"
                     + ("; hollow dashed: paper" if paper else ""), fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "increments.png"), dpi=120)
    plt.close(fig)
    return "increments.png"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("report", help="report.json written by `attnlab report`")
    parser.add_argument("--out", default=None, help="directory for the PNGs (default: the report's directory)")
    args = parser.parse_args()
    with open(args.report) as f:
        report = json.load(f)
    if report.get("format") != "attnlab-report":
        sys.exit(f"{args.report}: not an attnlab report (format {report.get('format')!r})")
    out_dir = args.out or os.path.dirname(os.path.abspath(args.report))
    os.makedirs(out_dir, exist_ok=True)
    colors = arm_colors(report)
    written = [plot_curves(report, g, colors, out_dir) for g in report["groups"]]
    written.append(plot_increments(report, out_dir))
    print("plot_report: wrote " + ", ".join(os.path.join(out_dir, w) for w in written))


if __name__ == "__main__":
    main()
