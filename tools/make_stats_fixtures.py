#!/usr/bin/env python3
"""Reference values for the paired report's tests (include/attnlab/paired_stats.h), from scipy.

Run once, by hand, with the project's venv; the output is committed beside this script and read by
tests/unit/test_paired_stats.cpp, so the C++ tests need neither Python nor scipy:

    ~/.cache/attnlab/venv/bin/python tools/make_stats_fixtures.py --out tests/data/stats/paired_tests.json

For every case (a vector d of paired differences, one per seed):
- t_p: scipy.stats.ttest_1samp(d, 0).pvalue;
- sign_flip_p: scipy.stats.permutation_test((d,), mean, permutation_type="samples",
  n_resamples=inf, alternative="two-sided").pvalue, the exact enumeration of the 2^n sign flips
  (null beyond 24 differences, where the C++ test gives none);
- wilcoxon_p: scipy.stats.wilcoxon(d) with its defaults (zero_method="wilcox", correction=False,
  method="auto"), or, where `wilcoxon_method` says "permutation", with
  method=PermutationMethod(n_resamples=inf): the exact conditional distribution given the midranks,
  which scipy's default replaces by the normal approximation for 13 < n <= 50 with ties or zeros;
- r_plus: the sum of the midranks (scipy.stats.rankdata) of the positive non-zero differences.

For every effect size e = |mean| / sd of the power list: the power of the two-sided paired t test at
level 0.05 with n seeds at a few n, as [n, nct, quad]: nct = scipy.stats.nct.sf(c, n - 1, sqrt(n) e)
+ scipy.stats.nct.cdf(-c, n - 1, sqrt(n) e) with c = scipy.stats.t.ppf(0.975, n - 1) (null where
scipy returns NaN, which its nct.cdf does far in the lower tail), quad = the same probability
integrated over the chi-square variable of the t statistic (the two agree to 1e-8 wherever both
exist; the script checks); and seeds_for_power, the smallest n >= 2 whose power is >= 0.8, found by
scanning n = 2, 3, ...
"""
import argparse
import json
import math

import numpy as np
import scipy
import scipy.stats as st
from scipy import integrate

ALPHA, TARGET = 0.05, 0.8
MAX_SIGN_FLIP = 24  # paired_stats.h's kMaxSignFlipValues: beyond it the C++ test expects none


def case(name, d, wilcoxon_method="default"):
    d = np.asarray(d, dtype=np.float64)
    nonzero = d[d != 0]
    ranks = st.rankdata(np.abs(nonzero))
    if wilcoxon_method == "default":
        w = st.wilcoxon(d)
    else:
        w = st.wilcoxon(d, method=st.PermutationMethod(n_resamples=np.inf))
    flip = None
    if nonzero.size <= MAX_SIGN_FLIP:
        flip = st.permutation_test((d,), np.mean, permutation_type="samples", n_resamples=np.inf,
                                   alternative="two-sided", batch=1 << 16).pvalue
    return {
        "name": name,
        "d": [float(v) for v in d],
        "nonzero": int(nonzero.size),
        "t_p": float(st.ttest_1samp(d, 0.0).pvalue),
        "sign_flip_p": None if flip is None else float(flip),
        "wilcoxon_p": float(w.pvalue),
        "wilcoxon_method": wilcoxon_method,
        "r_plus": float(ranks[nonzero > 0].sum()),
    }


def power_nct(e, n):
    """From scipy.stats.nct; None where scipy returns NaN (its lower tail far below -c)."""
    c = st.t.ppf(1 - ALPHA / 2, n - 1)
    nc = math.sqrt(n) * e
    p = float(st.nct.sf(c, n - 1, nc) + st.nct.cdf(-c, n - 1, nc))
    return None if math.isnan(p) else p


def power_quad(e, n):
    """The same power as an integral over the chi-square variable V of the t statistic
    (Z + sqrt(n) e) / sqrt(V / df): P(|Z + sqrt(n) e| > c sqrt(V / df)), integrated over the quantile
    u of V (V = chi2.ppf(u, df), a bounded smooth integrand on [0, 1]) by scipy.integrate.quad."""
    df, nc = n - 1, math.sqrt(n) * e
    c = st.t.ppf(1 - ALPHA / 2, df)

    def integrand(u):
        s = c * math.sqrt(st.chi2.ppf(u, df) / df)
        return st.norm.sf(s - nc) + st.norm.cdf(-s - nc)

    return integrate.quad(integrand, 0, 1, epsabs=1e-13, epsrel=1e-11, limit=400)[0]


def power(e, n):
    nct, quad = power_nct(e, n), power_quad(e, n)
    assert nct is None or abs(nct - quad) < 1e-8, (e, n, nct, quad)
    return nct, quad


def power_case(e, at):
    n = 2  # the scan reads nct where it exists (fast); each recorded point is checked against quad
    while (power_nct(e, n) if power_nct(e, n) is not None else power_quad(e, n)) < TARGET:
        n += 1
    for m in (n - 1, n):
        if m >= 2:
            power(e, m)
    return {"effect_size": e, "seeds_for_power": n, "power_at": [[m, *power(e, m)] for m in at]}


def cases():
    rng = np.random.default_rng(23)
    out = [
        case("demo zero-option increment, 2 seeds", [0.0562, -0.0138]),
        case("3 seeds", [0.010, 0.020, -0.003]),
        case("3 seeds, mean near 0", [0.001, -0.0008, 0.0005]),
        case("5 seeds that agree", [0.012, 0.018, 0.007, 0.015, 0.011]),
        case("6 seeds, one against", [0.0131, 0.0072, -0.0044, 0.0210, 0.0093, 0.0158]),
        case("5 seeds, tied |d| (midranks)", [0.01, -0.01, 0.02, 0.02, 0.03]),
        case("6 seeds, two zeros (dropped)", [0.0, 0.004, -0.002, 0.006, 0.0, 0.009]),
        case("3 seeds, one zero", [0.0, 0.005, 0.003]),
        case("8 seeds, all ties", [0.5, -0.5, 0.5, 0.5, 0.5, -0.5, 0.5, 0.5]),
        case("14 seeds, no ties (exact)", list(np.round(rng.normal(0.004, 0.01, 14), 6))),
        case("16 seeds, ties and a zero (exact conditional)",
             list(np.round(rng.normal(0.002, 0.006, 16), 3)) + [0.0], wilcoxon_method="permutation"),
        case("20 seeds, sign flip of 2^20", list(np.round(rng.normal(0.003, 0.01, 20), 6))),
        case("51 seeds, no ties (normal approximation)", list(np.round(rng.normal(0.001, 0.01, 51), 7))),
        case("60 seeds, ties and zeros (normal approximation)", list(np.round(rng.normal(0.001, 0.01, 60), 3))),
    ]
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    demo = 0.1483 / 0.0276  # the README demo's zero-option increment
    fixture = {
        "generator": "tools/make_stats_fixtures.py",
        "scipy": scipy.__version__,
        "numpy": np.__version__,
        "alpha": ALPHA,
        "power_target": TARGET,
        "cases": cases(),
        "power": [power_case(e, at) for e, at in [
            (demo, [2, 3, 4]), (2.0, [2, 4, 5, 10]), (1.0, [2, 5, 10, 11]), (0.5, [10, 33, 34]),
            (0.3, [50, 90, 100]), (0.1, [100, 787, 788]), (0.05, [1000, 3000, 3142])]],
    }
    with open(args.out, "w") as f:
        json.dump(fixture, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
