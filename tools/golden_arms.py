#!/usr/bin/env python3
"""Golden values of the attention arms, computed independently of attnlab (docs/arms.md).

The shared attention form in float64 with numpy, written from the formulas of docs/arms.md and nothing
else: for an arm given by its features (sink term, gate, gate slot, output gate and, docs/windows.md, a
sliding window with kept first positions), the outputs o, the
log-sum-exp (natural log, sink term included), the phantom mass and, by central finite differences, the
gradient of loss = sum(o * R) with respect to q, k, v, the output gate's input x (where the arm has an
output gate) and every arm parameter.

    # recompute every arm of a golden file from its inputs and compare (exit 1 on a mismatch)
    python3 tools/golden_arms.py --check tests/data/golden/attention_arms.json

    # golden values for an arm the file does not hold, on the same inputs q, k, v, R
    python3 tools/golden_arms.py --inputs tests/data/golden/attention_arms.json \
        --arm sink_renorm:sink=learned,gate=norm,slot=routing --out /tmp/sink_renorm.json

    # the same, added to the file itself (a new registry row, docs/adding-an-arm.md)
    python3 tools/golden_arms.py --inputs tests/data/golden/attention_arms.json --merge \
        --arm sink_renorm:sink=learned,gate=norm,slot=routing --out tests/data/golden/attention_arms.json

    # the output-gate arms (docs/arms.md, "The output gate"): same q, k, v, R, plus the gate's input x
    python3 tools/golden_arms.py --inputs tests/data/golden/attention_arms.json \
        --arm out_gate:out_gate=headwise --arm out_gate_elem:out_gate=elementwise \
        --arm sink_out_gate:sink=learned,out_gate=headwise --out tests/data/golden/output_gate_arms.json

    # an arm under a sliding window (docs/windows.md): query i sees keys j <= i with i - j < window or
    # j < keep_first; arm=NAME takes a known arm's features (or give sink=..., gate=... as above)
    python3 tools/golden_arms.py --inputs tests/data/golden/attention_arms.json \
        --arm sink_logit_w2_n1:arm=sink_logit,window=2,keep_first=1 --out /tmp/windowed.json

    # a new arm and a windowed case of it (arm= may name an earlier --arm of the same call)
    python3 tools/golden_arms.py --inputs tests/data/golden/attention_arms.json \
        --arm sink_route:sink=learned,gate=norm,slot=routing \
        --arm sink_route_w2_n1:arm=sink_route,window=2,keep_first=1 --out /tmp/sink_route.json

The written file has the layout of tests/data/golden/attention_arms.json (its README), holding the
inputs and the new arms (with --merge, the input file's arms too). Parameters of a new arm are drawn from a generator seeded by the arm's
name, away from their initial values so every gradient is exercised. An output gate also needs the block's
normalised input x [T, d_model] (d_model = H * d): taken from --inputs when it holds one, else drawn from a
generator seeded by the name "x", so the other inputs and every stored value stay as they are.

A windowed case also stores "arm" (the arm whose features it has: arm=NAME, else the known arm with those
features, else its own name), "window" and "keep_first"; --check takes the window from the file and the
features from "arm". All windowed cases of one arm share that arm's parameters: the --inputs file's own
when it holds the arm, else drawn by the arm's name (not the case's), so a case whose window hides nothing
reproduces the arm's values without a window.
"""
import argparse
import json
import sys
import zlib
from collections import namedtuple

import numpy as np

BETA = 8.0  # the norm gate's fixed sharpness (docs/arms.md)

# An arm's features (docs/arms.md): sink term, per-key gate, that gate's slot, output gate; and the
# sliding window applied to the causal mask (docs/windows.md): window None is full causal attention.
Features = namedtuple("Features", "sink gate slot out_gate window keep_first", defaults=("none", None, 0))

# The features of paper 000's arms (docs/arms.md, "The arms"); sink_token acts on the sequence, not here.
KNOWN = {
    "baseline": Features("none", "none", "value"),
    "off_by_one": Features("fixed_zero", "none", "value"),
    "sink_logit": Features("learned", "none", "value"),
    "norm_gate": Features("none", "norm", "value"),
    "proj_gate": Features("none", "projection", "value"),
    "renorm": Features("none", "norm", "routing"),
    "combo": Features("learned", "norm", "value"),
    "combo2": Features("learned", "projection", "value"),
}

# The output-gate arms (docs/arms.md, "The output gate"), whose values live in
# tests/data/golden/output_gate_arms.json; --check knows them so that file checks without --arm.
SPECIFIED = {
    "out_gate": Features("none", "none", "value", "headwise"),
    "out_gate_elem": Features("none", "none", "value", "elementwise"),
    "sink_out_gate": Features("learned", "none", "value", "headwise"),
}

OUTPUT_TOLERANCE = 1e-12  # the golden README's: float64 outputs of two independent implementations
GRADIENT_TOLERANCE = 1e-7  # finite differences on both sides carry about 1e-9 each
FD_STEP = 1e-5


def log_sigmoid(x):
    return -np.logaddexp(0.0, -x)


def gate_argument(features, params, v):
    """The gate's argument per (head, key): v [H, T, d] -> [H, T]."""
    gate = features.gate
    d = v.shape[-1]
    if gate == "norm":
        return BETA * (np.linalg.norm(v, axis=-1) / np.sqrt(d) - params["tau"][:, None])
    if gate == "projection":
        return np.einsum("htd,hd->ht", v, params["w"]) + params["c"][:, None]
    raise ValueError(gate)


def output_gate(features, params, x, H, d):
    """The output gate sigma(x_i W_g + c_g) per (head, query): [H, T] headwise, [H, T, d] elementwise.

    x [T, d_model]; column h * d + c of W_g [d_model, H * d] is head h's channel c (the head-major order
    in which the heads' outputs meet the output projection).
    """
    arg = x @ params["out_gate_w"] + params["out_gate_c"]  # [T, H] or [T, H * d]
    gate = 1.0 / (1.0 + np.exp(-arg))
    if features.out_gate == "headwise":
        return gate.T
    return gate.reshape(x.shape[0], H, d).transpose(1, 0, 2)


def visible(T, window, keep_first):
    """[T, T] bool: query i sees key j (docs/windows.md): j <= i, and i - j < window or j < keep_first."""
    i = np.arange(T)[:, None]
    j = np.arange(T)[None, :]
    causal = j <= i
    if window is None:
        return causal
    return causal & ((i - j < window) | (j < keep_first))


def forward(features, params, q, k, v, x=None):
    """o [H, T, d], lse [H, T], phantom mass [H, T] of the shared form (docs/arms.md).

    With an output gate, o is the gated output o'; lse and the phantom mass are those of the attention
    before it (the gate acts after the softmax and leaves them unchanged).
    """
    sink, gate, slot, out_gate = features.sink, features.gate, features.slot, features.out_gate
    H, T, d = q.shape
    s = np.einsum("hid,hjd->hij", q, k) / np.sqrt(d)
    reads = v.copy()
    if gate != "none":
        arg = gate_argument(features, params, v)
        if slot == "routing":
            s = s + log_sigmoid(arg)[:, None, :]  # r_j = log g_j, added to every query's score of key j
        else:
            reads = v / (1.0 + np.exp(-arg))[..., None]  # g_j v_j
    s = np.where(visible(T, features.window, features.keep_first)[None], s, -np.inf)
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
    o = np.einsum("hij,hjd->hid", a, reads)
    if out_gate == "headwise":
        o = o * output_gate(features, params, x, H, d)[..., None]  # one scale per (head, query)
    elif out_gate == "elementwise":
        o = o * output_gate(features, params, x, H, d)
    return o, lse, phantom


def gradients(features, params, inputs, R):
    """d sum(o * R) / d (every input and parameter), by central differences."""
    def loss(named):
        o, _, _ = forward(features, {n: named[n] for n in params}, named["q"], named["k"], named["v"],
                          named.get("x"))
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


def parameter_shapes(features, H, d, d_model):
    shapes = {}
    if features.sink == "learned":
        shapes["sink_logit"] = (H,)
    if features.gate == "norm":
        shapes["tau"] = (H,)
    if features.gate == "projection":
        shapes["w"] = (H, d)
        shapes["c"] = (H,)
    if features.out_gate != "none":
        width = H if features.out_gate == "headwise" else H * d
        shapes["out_gate_w"] = (d_model, width)
        shapes["out_gate_c"] = (width,)
    return shapes


def draw_parameters(name, features, H, d, d_model):
    """Parameters away from their initial values, drawn from a generator seeded by the arm's name."""
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    # out_gate_c centred at 0.5, not at its initial 4, so the gates spread over (0, 1) and sigma' is large
    centre = {"sink_logit": 0.5, "tau": 0.6, "w": 0.0, "c": 0.5, "out_gate_w": 0.0, "out_gate_c": 0.5}
    return {p: centre[p] + rng.normal(0.0, 0.5, size=shape)
            for p, shape in parameter_shapes(features, H, d, d_model).items()}


def gate_input(golden, H, T, d):
    """The output gate's input x [T, d_model]: the file's own, else drawn from a generator seeded by "x".

    d_model = H * d, as in the model. Drawing it by its own name leaves q, k, v and R as they are.
    """
    if "x" in golden:
        return np.array(golden["x"], dtype=np.float64)
    return np.random.default_rng(zlib.crc32(b"x")).normal(0.0, 1.0, size=(T, H * d))


def case(features, params, inputs, R, arm=None):
    """One golden case; a windowed one starts with the arm whose features it has and its window."""
    used = {n: x.copy() for n, x in inputs.items() if n != "x" or features.out_gate != "none"}
    o, lse, phantom = forward(features, params, used["q"], used["k"], used["v"], used.get("x"))
    grads = gradients(features, {n: p.copy() for n, p in params.items()}, used, R)
    out = {}
    if features.window is not None:  # absent without a window, so the files without one stay as they are
        out.update(arm=arm, window=features.window, keep_first=features.keep_first)
    out.update({"params": {n: p.tolist() for n, p in params.items()}, "o": o.tolist(), "lse": lse.tolist(),
                "phantom_mass": phantom.tolist(), "grad": {n: g.tolist() for n, g in grads.items()}})
    if features.out_gate != "none":  # the gate values themselves, for the gate probes' tests
        H, _, d = used["q"].shape
        out["out_gate"] = output_gate(features, params, used["x"], H, d).tolist()
    return out


def known_arm_with(features):
    """The name of the known arm with these features (the window aside), or None."""
    plain = features._replace(window=None, keep_first=0)
    return next((name for name, f in {**KNOWN, **SPECIFIED}.items() if f == plain), None)


def window_value(text, key, value, least):
    try:
        number = int(value)
    except ValueError:
        number = None
    if number is None or number < least:
        raise SystemExit(f"--arm {text}: {key}={value} is not an integer >= {least}")
    return number


def parse_arm(text, earlier=None):
    """'name:sink=learned,gate=norm,slot=routing,out_gate=headwise,window=W,keep_first=n'.

    Omitted: none / none / value / none, no window, keep_first 0. 'arm=NAME' takes the features of a
    known arm, or of an earlier --arm of the same call (`earlier`: name -> features), instead of sink,
    gate, slot and out_gate. Returns (name, features, arm): arm is NAME, else the known arm with these
    features, else the name itself.
    """
    name, _, spec = text.partition(":")
    features = {"sink": "none", "gate": "none", "slot": "value", "out_gate": "none"}
    given, like, window, keep_first = set(), None, None, None
    for item in filter(None, spec.split(",")):
        key, _, value = item.partition("=")
        if key == "arm":
            like = value
        elif key == "window":
            window = window_value(text, key, value, 1)
        elif key == "keep_first":
            keep_first = window_value(text, key, value, 0)
        elif key in features:
            features[key] = value
            given.add(key)
        else:
            raise SystemExit(f"--arm {text}: unknown feature '{key}' (sink, gate, slot, out_gate, arm, window, keep_first)")
    if like is not None:
        known = {**KNOWN, **SPECIFIED, **{n: f._replace(window=None, keep_first=0) for n, f in (earlier or {}).items()}}
        if like not in known:
            raise SystemExit(f"--arm {text}: arm={like} is not one of {', '.join(known)}")
        if given:
            raise SystemExit(f"--arm {text}: arm={like} gives the features; drop {', '.join(sorted(given))}")
        features = known[like]._asdict()
    allowed = {"sink": ("none", "fixed_zero", "learned"), "gate": ("none", "norm", "projection"),
               "slot": ("value", "routing"), "out_gate": ("none", "headwise", "elementwise")}
    for key in allowed:
        if features[key] not in allowed[key]:
            raise SystemExit(f"--arm {text}: {key}={features[key]} is not one of {', '.join(allowed[key])}")
    if keep_first is not None and window is None:
        raise SystemExit(f"--arm {text}: keep_first needs a window")
    features.update(window=window, keep_first=keep_first or 0)
    features = Features(**features)
    return name, features, like or known_arm_with(features) or name


def load_inputs(golden, need_x):
    """q, k, v (and x, where an arm needs it or the file holds it) and R of a golden file."""
    arrays = {n: np.array(golden[n], dtype=np.float64) for n in ("q", "k", "v")}
    if need_x or "x" in golden:
        H, T, d = arrays["q"].shape
        arrays["x"] = gate_input(golden, H, T, d)
    return arrays, np.array(golden["R"], dtype=np.float64)


def compare(mine, stored):
    """Largest differences of the outputs and of the gradients between two cases of one arm."""
    outputs = [k for k in ("o", "lse", "phantom_mass", "out_gate") if k in stored or k in mine]
    if any(k not in stored or k not in mine for k in outputs):
        return float("inf"), float("inf")
    out_err = max(float(np.abs(np.array(mine[k]) - np.array(stored[k])).max()) for k in outputs)
    grad_err = max(float(np.abs(np.array(mine["grad"][n]) - np.array(stored["grad"][n])).max()) for n in stored["grad"])
    return out_err, grad_err


def stored_features(name, stored, features_of):
    """The features of a file's case: by its name, or, for a windowed case, its arm's plus its window."""
    if "window" not in stored:
        return features_of.get(name), name
    arm, window, keep_first = stored.get("arm"), stored["window"], stored.get("keep_first")
    if not (isinstance(window, int) and window >= 1 and isinstance(keep_first, int) and keep_first >= 0):
        raise SystemExit(f"{name}: window {window!r} and keep_first {keep_first!r} must be integers >= 1 and >= 0")
    if arm not in features_of:
        return None, arm
    return features_of[arm]._replace(window=window, keep_first=keep_first), arm


def check(path, extra):
    with open(path) as f:
        golden = json.load(f)
    features_of = {**KNOWN, **SPECIFIED, **extra}
    cases = {}
    for name, stored in golden["arms"].items():
        features, arm = stored_features(name, stored, features_of)
        if features is None:
            print(f"{arm}: features unknown; pass --arm {arm}:sink=...,gate=...,slot=...,out_gate=...", file=sys.stderr)
            return 1
        cases[name] = features
    need_x = any(f.out_gate != "none" for f in cases.values())
    inputs, R = load_inputs(golden, need_x)
    if need_x and "x" not in golden:
        print(f"{path}: an arm has an output gate but the file holds no x", file=sys.stderr)
        return 1
    H, _, d = inputs["q"].shape
    d_model = inputs["x"].shape[1] if "x" in inputs else H * d
    worst = []
    for name, stored in golden["arms"].items():
        features = cases[name]
        params = {n: np.array(p, dtype=np.float64) for n, p in stored["params"].items()}
        if set(params) != set(parameter_shapes(features, H, d, d_model)):
            print(f"{name}: the file's parameters {sorted(params)} do not match its features {tuple(features)}",
                  file=sys.stderr)
            return 1
        mine = case(features, params, inputs, R, stored.get("arm"))
        out_err, grad_err = compare(mine, stored)
        ok = out_err <= OUTPUT_TOLERANCE and grad_err <= GRADIENT_TOLERANCE and set(mine["grad"]) == set(stored["grad"])
        worst.append(ok)
        print(f"{'ok  ' if ok else 'FAIL'} {name}: outputs {out_err:.1e} (<= {OUTPUT_TOLERANCE:g}), "
              f"gradients {grad_err:.1e} (<= {GRADIENT_TOLERANCE:g})")
    return 0 if all(worst) else 1


def case_parameters(name, features, arm, golden, H, d, d_model):
    """A new case's parameters: drawn by its name; a windowed case's are its arm's (module docstring).

    The arm's are those of the --inputs file's case of that name, else of a windowed case of that arm in
    the file (with --merge, a new window of an arm joins the ones already there), else drawn by the arm's
    name.
    """
    if features.window is None:
        return draw_parameters(name, features, H, d, d_model)
    stored = golden["arms"]
    own = stored.get(arm) if "window" not in stored.get(arm, {"window": None}) else None
    own = own or next((c for c in stored.values() if "window" in c and c.get("arm") == arm), None)
    if own is not None:
        return {n: np.array(p, dtype=np.float64) for n, p in own["params"].items()}
    return draw_parameters(arm, features, H, d, d_model)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", metavar="GOLDEN", help="recompute every arm of GOLDEN and compare")
    parser.add_argument("--inputs", metavar="GOLDEN", help="take q, k, v, R (and x if it has one) and the shape from GOLDEN")
    parser.add_argument("--arm", action="append", default=[],
                        help="name:sink=...,gate=...,slot=...,out_gate=...[,window=W,keep_first=n], or "
                             "name:arm=KNOWN[,window=W,keep_first=n] (repeatable)")
    parser.add_argument("--out", help="write the golden values of the --arm arms here")
    parser.add_argument("--merge", action="store_true", help="also keep the arms of --inputs in --out (adding an arm to the file)")
    args = parser.parse_args()
    parsed = []
    for a in args.arm:
        parsed.append(parse_arm(a, {name: f for name, f, _ in parsed}))
    arms = {name: f for name, f, _ in parsed}
    base = {name: arm for name, _, arm in parsed}
    if args.check:
        return check(args.check, arms)
    if not (args.inputs and args.out and arms):
        parser.error("give --check GOLDEN, or --inputs GOLDEN --arm ... --out FILE")
    with open(args.inputs) as f:
        golden = json.load(f)
    inputs, R = load_inputs(golden, any(f.out_gate != "none" for f in arms.values()))
    H, _, d = inputs["q"].shape
    d_model = inputs["x"].shape[1] if "x" in inputs else H * d
    out = {k: golden[k] for k in ("shape", "q", "k", "v", "R")}
    if "x" in inputs:  # the output gate's input, beside the others (the README's layout)
        out["d_model"] = d_model
        out["x"] = inputs["x"].tolist()
    out["about"] = "Golden values from tools/golden_arms.py (numpy, float64, from docs/arms.md); inputs of " + args.inputs
    if any(f.window is not None for f in arms.values()):
        out["about"] += "; sliding windows as docs/windows.md"
    out["arms"] = dict(golden["arms"]) if args.merge else {}
    out["arms"].update({name: case(f, case_parameters(name, f, base[name], golden, H, d, d_model), inputs, R, base[name])
                        for name, f in arms.items()})
    if args.merge:
        out["about"] = golden["about"] + "; " + ", ".join(arms) + " added by tools/golden_arms.py"
    with open(args.out, "w") as f:
        json.dump(out, f)
    print(f"wrote {args.out}: {', '.join(arms)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
