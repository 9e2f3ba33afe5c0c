#!/usr/bin/env python3
"""Where a paired difference's variance comes from, in a sweep with null pairs (docs/sweeps.md).

Reads an `attnlab report --format json` file. For a contrast of two arms A and B that both have null
twins (the same arm under init_seed + offset, on the same data order), with d_s = L(A, s) - L(B, s)
at seed s and d'_s the same difference of the twins:
  - Var(d) over the seeds: the difference's whole variance (init and data order both vary);
  - Var(d - d') / 2: the part the init seeds cause with the data held fixed (d and d' share the data);
  - the rest, Var(d) - Var(d - d') / 2: what the data order adds (can come out negative with few
    seeds: it is an estimate).
Standard library only; prints one line per figure.
"""
import argparse
import json
import statistics
import sys


def losses(report, tier, variant):
    """{(arm, seed): final_val_loss} of the finished runs of one tier and variant."""
    out = {}
    for run in report["runs"]:
        if run["tier"] == tier and run["variant"] == variant and run["status"] == "finished":
            out[(run["arm"], run["seed"])] = run["final_val_loss"]
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report_json")
    parser.add_argument("--tier", default="micro")
    parser.add_argument("--variant", default="", help="the originals' variant ('' for a plain grid)")
    parser.add_argument("--arms", nargs=2, default=["baseline", "sink_logit"], metavar=("A", "B"))
    args = parser.parse_args(argv)
    with open(args.report_json, encoding="utf-8") as f:
        report = json.load(f)
    twin_variant = args.variant + "/null" if args.variant else "null"
    own, twin = losses(report, args.tier, args.variant), losses(report, args.tier, twin_variant)
    a, b = args.arms
    seeds = sorted(s for (arm, s) in own if arm == a and (b, s) in own and (a, s) in twin and (b, s) in twin)
    if len(seeds) < 2:
        sys.exit(f"need at least 2 seeds with {a}, {b} and both twins finished; have {seeds}")
    d = [own[(a, s)] - own[(b, s)] for s in seeds]
    d_twin = [twin[(a, s)] - twin[(b, s)] for s in seeds]
    null = [twin[(arm, s)] - own[(arm, s)] for arm in (a, b) for s in seeds]
    var_d = statistics.variance(d)
    var_init = statistics.variance([x - y for x, y in zip(d, d_twin)]) / 2
    print(f"seeds {seeds}; d = L({a}) - L({b})")
    print(f"d per seed: {', '.join(f'{x:+.4f}' for x in d)}; twins' d': {', '.join(f'{x:+.4f}' for x in d_twin)}")
    print(f"mean d {statistics.mean(d):+.4f}, sd {var_d ** 0.5:.4f}")
    print(f"noise floor (sd of the {len(null)} null differences): {statistics.stdev(null):.4f}")
    print(f"Var(d) {var_d:.3e}; init part Var(d - d')/2 {var_init:.3e} ({var_init / var_d:.0%}); "
          f"data-order part {var_d - var_init:.3e} ({(var_d - var_init) / var_d:.0%})")


if __name__ == "__main__":
    main()
