#!/usr/bin/env python3
"""Golden values of the attention arms, computed independently of attnlab (docs/arms.md).

The shared attention form in float64 with numpy, written from the formulas of docs/arms.md and nothing
else: for an arm given by its features (sink term, gate, gate slot), the outputs o, the log-sum-exp
(natural log, sink term included), the phantom mass and, by central finite differences, the gradient
of loss = sum(o * R) with respect to q, k, v and every arm parameter.

    # recompute every arm of a golden file from its inputs and compare (exit 1 on a mismatch)
    python3 tools/golden_arms.py --check tests/data/golden/attention_arms.json

    # golden values for an arm the file does not hold, on the same inputs q, k, v, R
    python3 tools/golden_arms.py --inputs tests/data/golden/attention_arms.json \
        --arm sink_renorm:sink=learned,gate=norm,slot=routing --out /tmp/sink_renorm.json

    # the same, added to the file itself (a new registry row, docs/adding-an-arm.md)
    python3 tools/golden_arms.py --inputs tests/data/golden/attention_arms.json --merge \
        --arm sink_renorm:sink=learned,gate=norm,slot=routing --out tests/data/golden/attention_arms.json

The written file has the layout of tests/data/golden/attention_arms.json (its README), holding the
inputs and the new arms (with --merge, the input file's arms too). Parameters of a new arm are drawn from a generator seeded by the arm's
name, away from their initial values so every gradient is exercised.
"""
import argparse
import json
import sys
import zlib

import numpy as np

BETA = 8.0  # the norm gate's fixed sharpness (docs/arms.md)

# The nine arms' features (docs/arms.md, "The arms"); sink_token acts on the sequence, not here.
KNOWN = {
    "baseline": ("none", "none", "value"),
    "off_by_one": ("fixed_zero", "none", "value"),
    "sink_logit": ("learned", "none", "value"),
    "norm_gate": ("none", "norm", "value"),
    "proj_gate": ("none", "projection", "value"),
    "renorm": ("none", "norm", "routing"),
    "combo": ("learned", "norm", "value"),
    "combo2": ("learned", "projection", "value"),
}

OUTPUT_TOLERANCE = 1e-12  # the golden README's: float64 outputs of two independent implementations
GRADIENT_TOLERANCE = 1e-7  # finite differences on both sides carry about 1e-9 each
FD_STEP = 1e-5


def log_sigmoid(x):
    return -np.logaddexp(0.0, -x)


def gate_argument(features, params, v):
    """The gate's argument per (head, key): v [H, T, d] -> [H, T]."""
    _, gate, _ = features
    d = v.shape[-1]
    if gate == "norm":
        return BETA * (np.linalg.norm(v, axis=-1) / np.sqrt(d) - params["tau"][:, None])
    if gate == "projection":
        return np.einsum("htd,hd->ht", v, params["w"]) + params["c"][:, None]
    raise ValueError(gate)


def forward(features, params, q, k, v):
    """o [H, T, d], lse [H, T], phantom mass [H, T] of the shared form (docs/arms.md)."""
    sink, gate, slot = features
    H, T, d = q.shape
    s = np.einsum("hid,hjd->hij", q, k) / np.sqrt(d)
    reads = v.copy()
    if gate != "none":
        x = gate_argument(features, params, v)
        if slot == "routing":
            s = s + log_sigmoid(x)[:, None, :]  # r_j = log g_j, added to every query's score of key j
        else:
            reads = v / (1.0 + np.exp(-x))[..., None]  # g_j v_j
    causal = np.tril(np.ones((T, T), dtype=bool))
    s = np.where(causal[None], s, -np.inf)
    if sink == "none":
        b = np.full(H, -np.inf)
    elif sink == "fixed_zero":
        b = np.zeros(H)
    else:
        b = params["sink_logit"]
    m = np.maximum(s.max(axis=-1), b[:, None])  # the sink term takes part in the maximum
    e = np.exp(s - m[..., None])
    z = e.sum(axis=-1) + np.exp(b[:, None] - m)
    a = e / z[..., None]
    lse = m + np.log(z)
    phantom = np.exp(b[:, None] - lse) if sink != "none" else np.zeros((H, T))
    return np.einsum("hij,hjd->hid", a, reads), lse, phantom


def gradients(features, params, inputs, R):
    """d sum(o * R) / d x for every input and parameter, by central differences."""
    def loss(named):
        o, _, _ = forward(features, {n: named[n] for n in params}, named["q"], named["k"], named["v"])
        return float((o * R).sum())

    named = dict(inputs, **params)
    grads = {}
    for name, value in named.items():
        g = np.zeros_like(value)
        for idx in np.ndindex(value.shape):
            saved = value[idx]
            value[idx] = saved + FD_STEP
            up = loss(named)
            value[idx] = saved - FD_STEP
            down = loss(named)
            value[idx] = saved
            g[idx] = (up - down) / (2 * FD_STEP)
        grads[name] = g
    return grads


def parameter_shapes(features, H, d):
    sink, gate, _ = features
    shapes = {}
    if sink == "learned":
        shapes["sink_logit"] = (H,)
    if gate == "norm":
        shapes["tau"] = (H,)
    if gate == "projection":
        shapes["w"] = (H, d)
        shapes["c"] = (H,)
    return shapes


def draw_parameters(name, features, H, d):
    """Parameters away from their initial values, drawn from a generator seeded by the arm's name."""
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    centre = {"sink_logit": 0.5, "tau": 0.6, "w": 0.0, "c": 0.5}
    return {p: centre[p] + rng.normal(0.0, 0.5, size=shape) for p, shape in parameter_shapes(features, H, d).items()}


def case(features, params, inputs, R):
    o, lse, phantom = forward(features, params, inputs["q"], inputs["k"], inputs["v"])
    grads = gradients(features, {n: p.copy() for n, p in params.items()}, {n: x.copy() for n, x in inputs.items()}, R)
    return {"params": {n: p.tolist() for n, p in params.items()}, "o": o.tolist(), "lse": lse.tolist(),
            "phantom_mass": phantom.tolist(), "grad": {n: g.tolist() for n, g in grads.items()}}


def parse_arm(text):
    """'name:sink=learned,gate=norm,slot=routing' (omitted features: none / none / value)."""
    name, _, spec = text.partition(":")
    features = {"sink": "none", "gate": "none", "slot": "value"}
    for item in filter(None, spec.split(",")):
        key, _, value = item.partition("=")
        if key not in features:
            raise SystemExit(f"--arm {text}: unknown feature '{key}' (sink, gate, slot)")
        features[key] = value
    allowed = {"sink": ("none", "fixed_zero", "learned"), "gate": ("none", "norm", "projection"),
               "slot": ("value", "routing")}
    for key, value in features.items():
        if value not in allowed[key]:
            raise SystemExit(f"--arm {text}: {key}={value} is not one of {', '.join(allowed[key])}")
    return name, (features["sink"], features["gate"], features["slot"])


def load_inputs(golden):
    arrays = {n: np.array(golden[n], dtype=np.float64) for n in ("q", "k", "v")}
    return arrays, np.array(golden["R"], dtype=np.float64)


def check(path, extra):
    with open(path) as f:
        golden = json.load(f)
    inputs, R = load_inputs(golden)
    worst = []
    for name, stored in golden["arms"].items():
        features = extra.get(name) or KNOWN.get(name)
        if features is None:
            print(f"{name}: features unknown; pass --arm {name}:sink=...,gate=...,slot=...", file=sys.stderr)
            return 1
        params = {n: np.array(p, dtype=np.float64) for n, p in stored["params"].items()}
        if set(params) != set(parameter_shapes(features, *inputs["q"].shape[::2])):
            print(f"{name}: the file's parameters {sorted(params)} do not match its features {features}", file=sys.stderr)
            return 1
        mine = case(features, params, inputs, R)
        out_err = max(float(np.abs(np.array(mine[k]) - np.array(stored[k])).max()) for k in ("o", "lse", "phantom_mass"))
        grad_err = max(float(np.abs(np.array(mine["grad"][n]) - np.array(stored["grad"][n])).max()) for n in stored["grad"])
        ok = out_err <= OUTPUT_TOLERANCE and grad_err <= GRADIENT_TOLERANCE and set(mine["grad"]) == set(stored["grad"])
        worst.append(ok)
        print(f"{'ok  ' if ok else 'FAIL'} {name}: outputs {out_err:.1e} (<= {OUTPUT_TOLERANCE:g}), "
              f"gradients {grad_err:.1e} (<= {GRADIENT_TOLERANCE:g})")
    return 0 if all(worst) else 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", metavar="GOLDEN", help="recompute every arm of GOLDEN and compare")
    parser.add_argument("--inputs", metavar="GOLDEN", help="take q, k, v, R and the shape from GOLDEN")
    parser.add_argument("--arm", action="append", default=[], help="name:sink=...,gate=...,slot=... (repeatable)")
    parser.add_argument("--out", help="write the golden values of the --arm arms here")
    parser.add_argument("--merge", action="store_true", help="also keep the arms of --inputs in --out (adding an arm to the file)")
    args = parser.parse_args()
    arms = dict(parse_arm(a) for a in args.arm)
    if args.check:
        return check(args.check, arms)
    if not (args.inputs and args.out and arms):
        parser.error("give --check GOLDEN, or --inputs GOLDEN --arm ... --out FILE")
    with open(args.inputs) as f:
        golden = json.load(f)
    inputs, R = load_inputs(golden)
    H, _, d = inputs["q"].shape
    out = {k: golden[k] for k in ("shape", "q", "k", "v", "R")}
    out["about"] = "Golden values from tools/golden_arms.py (numpy, float64, from docs/arms.md); inputs of " + args.inputs
    out["arms"] = dict(golden["arms"]) if args.merge else {}
    out["arms"].update({name: case(f, draw_parameters(name, f, H, d), inputs, R) for name, f in arms.items()})
    if args.merge:
        out["about"] = golden["about"] + "; " + ", ".join(arms) + " added by tools/golden_arms.py"
    with open(args.out, "w") as f:
        json.dump(out, f)
    print(f"wrote {args.out}: {', '.join(arms)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
