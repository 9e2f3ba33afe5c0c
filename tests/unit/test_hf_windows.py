"""python/attnlab_hf's sliding windows (docs/windows.md, issue 22): the config keys' checks, the exported
model against a loop written here from the rule (each query's visible keys listed one by one), windows
that hide nothing, sink_token's learned token as key 0, and the attention on the golden window cases.

Run by ctest (label unit) with the venv python (python -m unittest discover -s tests/unit); the arms come
from the attnlab binary of $ATTNLAB_BUILD_DIR (tests/unit/attnlab_cli.py).
"""
import json
import math
import os
import sys
import tempfile
import unittest

import torch
import torch.nn.functional as F

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from attnlab_cli import registry_arms  # noqa: E402
from attnlab_hf.configuration_attnlab import AttnlabConfig  # noqa: E402
from attnlab_hf.modeling_attnlab import AttnlabAttention, AttnlabForCausalLM, visible_keys  # noqa: E402

GOLDEN = os.path.join(ROOT, "tests", "data", "golden", "window_arms.json")

# The registry's arms (`attnlab arms --json`), each by its features as config.json spells them.
ARMS = {arm["name"]: {k: v for k, v in arm.items() if k not in ("name", "summary")} for arm in registry_arms()}
T, VOCAB, N_LAYER = 9, 23, 3


def config(arm, **window):
    return AttnlabConfig(arm=arm, **ARMS[arm], n_layer=N_LAYER, n_head=2, d_model=8, block_size=16,
                         vocab_size=VOCAB, **window)


def model(arm, seed=0, **window):
    """A float64 model with every parameter drawn away from its initial value (sink logits, gates and
    the learned token included), the same draw for every window of one arm and seed."""
    torch.manual_seed(seed)
    m = AttnlabForCausalLM(config(arm, **window)).double().eval()
    with torch.no_grad():
        for name, p in m.named_parameters():
            if name.endswith(("ln_1.weight", "ln_2.weight", "ln_f.weight")):
                p.copy_(1.0 + 0.1 * torch.randn_like(p))
            else:
                p.copy_(0.5 * torch.randn_like(p))
    return m


def inputs():
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, VOCAB, (2, T), generator=g)
    mask = torch.ones(2, T, dtype=torch.long)
    mask[1, :2] = 0  # left padding in the second sequence: key masks and the window together
    return ids, mask


def logits(m, ids, mask=None):
    with torch.no_grad():
        return m(input_ids=ids, attention_mask=mask).logits


def loop_logits(m, ids, mask, window, keep_first, pattern):
    """The model's logits computed here: the attention of each (sequence, head, query) as a sum over the
    keys it sees, V(i) = { j <= i, mask_j, and in a local layer i - j < W or j < n }, positions counted
    with sink_token's learned token at 0; the sink term, gates and output gate as docs/arms.md."""
    c, t = m.config, m.transformer
    H, d = c.n_head, c.d_model // c.n_head
    with torch.no_grad():
        x = t.wte(ids) + t.wpe(torch.arange(ids.shape[1]))
        seen = mask.bool()
        if c.sink_token:
            x = torch.cat((t.sink_token.expand(ids.shape[0], 1, -1), x), dim=1)
            seen = torch.cat((torch.ones(ids.shape[0], 1, dtype=torch.bool), seen), dim=1)
        P = x.shape[1]
        for l, block in enumerate(t.h):
            a = block.attn
            local = window is not None and pattern[l % len(pattern)] == "L"
            h_in = F.layer_norm(x, (c.d_model,), block.ln_1.weight, block.ln_1.bias, c.layer_norm_eps)
            q, k, v = (h_in @ a.c_attn.weight.T + a.c_attn.bias).split(c.d_model, dim=-1)
            out = torch.zeros(x.shape[0], P, H, d, dtype=x.dtype)
            for b in range(x.shape[0]):
                for h in range(H):
                    cols = slice(h * d, (h + 1) * d)
                    for i in range(P):
                        keys = [j for j in range(i + 1)
                                if seen[b, j] and (not local or i - j < window or j < keep_first)]
                        terms = []  # (logit, read) per visible key
                        for j in keys:
                            s, read = float(q[b, i, cols] @ k[b, j, cols]) / math.sqrt(d), v[b, j, cols]
                            if c.gate == "norm":
                                z = c.norm_gate_beta * (float(read.norm()) / math.sqrt(d) - float(a.gate_tau[h]))
                            elif c.gate == "projection":
                                z = float(a.gate_w[h] @ read) + float(a.gate_c[h])
                            if c.gate != "none" and c.gate_slot == "value":
                                read = read / (1.0 + math.exp(-z))
                            elif c.gate != "none":
                                s += -math.log1p(math.exp(-z))
                            terms.append((s, read))
                        sink = {"none": None, "fixed_zero": 0.0}.get(c.sink)
                        if c.sink == "learned":
                            sink = float(a.sink_logit[h])
                        top = max([s for s, _ in terms] + ([sink] if sink is not None else []), default=0.0)
                        z_i = sum(math.exp(s - top) for s, _ in terms) + (math.exp(sink - top) if sink is not None else 0.0)
                        for s, read in terms:
                            out[b, i, h] += math.exp(s - top) / z_i * read
            if c.out_gate == "headwise":
                out = out * torch.sigmoid(h_in @ a.out_gate_w + a.out_gate_c)[..., None]
            elif c.out_gate == "elementwise":
                out = out * torch.sigmoid(h_in @ a.out_gate_w + a.out_gate_c).view(out.shape)
            y = x + (out.reshape(x.shape) @ a.c_proj.weight.T + a.c_proj.bias)
            h_mid = F.layer_norm(y, (c.d_model,), block.ln_2.weight, block.ln_2.bias, c.layer_norm_eps)
            x = y + block.mlp.c_proj(F.gelu(block.mlp.c_fc(h_mid), approximate="tanh"))
        if c.sink_token:
            x = x[:, 1:]
        return F.layer_norm(x, (c.d_model,), t.ln_f.weight, t.ln_f.bias, c.layer_norm_eps) @ t.wte.weight.T


class ConfigKeys(unittest.TestCase):
    def test_refused_values_name_their_key(self):
        cases = [(dict(window=0), "window: must be at least 1"),
                 (dict(window=-3), "window: must be at least 1"),
                 (dict(window=2.0), "window: must be at least 1"),
                 (dict(window="2"), "window: must be at least 1"),
                 (dict(window=True), "window: must be at least 1"),
                 (dict(window=2, window_pattern=""), "window_pattern: must be a non-empty string"),
                 (dict(window=2, window_pattern="LgG"), "window_pattern: 'LgG' has 'g' at index 1"),
                 (dict(window_pattern="LG"), "window_pattern: needs window"),
                 (dict(window=2, window_keep_first=-1), "window_keep_first: must be an integer >= 0"),
                 (dict(window=2, window_keep_first=1.0), "window_keep_first: must be an integer >= 0"),
                 (dict(window_keep_first=1), "window_keep_first: needs window")]
        for keys, message in cases:
            with self.subTest(keys=keys), self.assertRaises(ValueError) as e:
                AttnlabConfig(**keys)
            self.assertIn(message, str(e.exception))

    def test_accepted_values_are_kept_and_missing_keys_are_no_window(self):
        c = AttnlabConfig(window=1, window_pattern="LG", window_keep_first=4)  # n >= W is not refused
        self.assertEqual((c.window, c.window_pattern, c.window_keep_first), (1, "LG", 4))
        c = AttnlabConfig()
        self.assertEqual((c.window, c.window_pattern, c.window_keep_first), (None, None, 0))
        self.assertEqual(AttnlabConfig(window=3, window_keep_first=None).window_keep_first, 0)
        # A model without a window writes no window key, so its config.json is as before windows.
        keys = {"window", "window_pattern", "window_keep_first"}
        self.assertFalse(keys & set(AttnlabConfig().to_diff_dict()))
        self.assertFalse(keys & set(json.loads(AttnlabConfig(window_keep_first=0).to_json_string())))
        self.assertTrue(keys <= set(AttnlabConfig(window=3).to_diff_dict()))

    def test_exported_keys_read_back(self):
        m = model("combo2", window=2, window_pattern="LGL", window_keep_first=1)
        ids, mask = inputs()
        with tempfile.TemporaryDirectory() as tmp:
            m.save_pretrained(tmp)
            with open(os.path.join(tmp, "config.json")) as f:
                written = json.load(f)
            self.assertEqual((written["window"], written["window_pattern"], written["window_keep_first"]),
                             (2, "LGL", 1))
            back = AttnlabForCausalLM.from_pretrained(tmp, dtype=torch.float64).eval()
        self.assertEqual([b.attn.window for b in back.transformer.h], [(2, 1), None, (2, 1)])
        self.assertTrue(torch.equal(logits(back, ids, mask), logits(m, ids, mask)))


class AbsolutePositions(unittest.TestCase):
    def test_query_rows_sit_at_the_end_of_the_keys(self):
        # Tq < Tk is what a cache would call; row i is at position Tk - Tq + i.
        for Tq, Tk, window in [(3, 9, (2, 0)), (3, 9, (3, 1)), (1, 9, (2, 2)), (9, 9, (1, 0)), (4, 6, None)]:
            got = visible_keys(Tq, Tk, window, "cpu")
            for i in range(Tq):
                p = Tk - Tq + i
                for j in range(Tk):
                    want = j <= p and (window is None or p - j < window[0] or j < window[1])
                    self.assertEqual(bool(got[i, j]), want, (Tq, Tk, window, i, j))


class LoopOracle(unittest.TestCase):
    def test_every_arm_under_a_local_global_pattern(self):
        # "LG" over 3 blocks: blocks 0 and 2 local, block 1 global (the pattern repeats over depth).
        ids, mask = inputs()
        for arm in ARMS:
            full = logits(model(arm), ids, mask)
            for window, keep_first in [(1, 0), (2, 0), (2, 1), (3, 0), (3, 1)]:
                with self.subTest(arm=arm, window=window, keep_first=keep_first):
                    m = model(arm, window=window, window_pattern="LG", window_keep_first=keep_first)
                    self.assertEqual([b.attn.window for b in m.transformer.h],
                                     [(window, keep_first), None, (window, keep_first)])
                    got = logits(m, ids, mask)
                    want = loop_logits(m, ids, mask, window, keep_first, "LG")
                    torch.testing.assert_close(got, want, rtol=0, atol=1e-10)
                    self.assertGreater((got - full).abs().max().item(), 1e-3)  # the window did act

    def test_without_a_pattern_every_layer_is_local(self):
        ids, mask = inputs()
        m = model("sink_logit", window=2)
        self.assertEqual([b.attn.window for b in m.transformer.h], [(2, 0)] * N_LAYER)
        torch.testing.assert_close(logits(m, ids, mask), loop_logits(m, ids, mask, 2, 0, "L"), rtol=0, atol=1e-10)


class NothingHidden(unittest.TestCase):
    def test_a_window_that_hides_nothing_is_full_attention_bit_for_bit(self):
        ids, mask = inputs()
        for arm in ARMS:
            keys = T + 1 if ARMS[arm].get("sink_token") else T  # the positions attention sees
            full = logits(model(arm), ids, mask)
            for window, keep_first in [(keys, 0), (keys - 1, 1), (keys + 5, 0), (1, keys - 1)]:
                with self.subTest(arm=arm, window=window, keep_first=keep_first):
                    m = model(arm, window=window, window_pattern="LG", window_keep_first=keep_first)
                    self.assertTrue(torch.equal(logits(m, ids, mask), full))
            all_global = model(arm, window=2, window_pattern="GGG", window_keep_first=1)
            self.assertTrue(torch.equal(logits(all_global, ids, mask), full))
            # One position fewer than that, and the last query loses key n.
            m = model(arm, window=keys - 1, window_pattern="LG")
            self.assertFalse(torch.equal(logits(m, ids, mask), full))


class SinkTokenKeptOrNot(unittest.TestCase):
    def test_the_learned_token_is_key_0(self):
        # Text t is model position t + 1. With n = 0 a local layer's query sees the learned token only
        # while t + 1 < W; with n = 1 always. Below that every query sees the same keys either way (all
        # of j <= t + 1), and causality carries that through the layers: those logits are equal bit for
        # bit, and every later one differs.
        ids, _ = inputs()
        for window in (2, 3, 4):
            with self.subTest(window=window):
                dropped = logits(model("sink_token", window=window, window_pattern="LG", window_keep_first=0), ids)
                kept = logits(model("sink_token", window=window, window_pattern="LG", window_keep_first=1), ids)
                same = window - 1  # text positions t < W - 1
                self.assertTrue(torch.equal(dropped[:, :same], kept[:, :same]))
                gap = (dropped[:, same:] - kept[:, same:]).abs().amax(dim=-1)
                self.assertGreater(gap.min().item(), 1e-6)

    def test_kept_first_counts_the_learned_token(self):
        # n = 1 keeps the learned token, not text 0: sink_token at n = 1 shows text 0 to a late query only
        # through its window, so it differs from n = 2, which keeps text 0 too.
        ids, _ = inputs()
        one = logits(model("sink_token", window=2, window_pattern="L", window_keep_first=1), ids)
        two = logits(model("sink_token", window=2, window_pattern="L", window_keep_first=2), ids)
        self.assertTrue(torch.equal(one[:, :2], two[:, :2]))  # text 0 and 1 see text 0 by their window
        self.assertGreater((one[:, 2:] - two[:, 2:]).abs().amax(dim=-1).min().item(), 1e-6)


class GoldenWindowArms(unittest.TestCase):
    """AttnlabAttention.attend (and gate_output for out_gate) on the golden q, k, v (H, T, d) = (2, 5, 4),
    the mask from the modeling code's own window reading: o to 1e-12, the gradients of sum(o * R) to
    1e-7, as the golden README asks of attnlab's float64 paths."""
    PARAMS = {"sink_logit": "sink_logit", "tau": "gate_tau", "w": "gate_w", "c": "gate_c",
              "out_gate_w": "out_gate_w", "out_gate_c": "out_gate_c"}

    def test_the_golden_cases(self):
        if not os.path.exists(GOLDEN):
            self.skipTest(f"no {GOLDEN}")
        with open(GOLDEN) as f:
            golden = json.load(f)
        H, T_, d = golden["shape"]
        tensor = lambda x: torch.tensor(x, dtype=torch.float64)  # noqa: E731
        self.assertEqual(len(golden["arms"]), 40)
        for name, case in golden["arms"].items():
            with self.subTest(case=name):
                c = AttnlabConfig(**ARMS[case["arm"]], n_layer=1, n_head=H, d_model=golden["d_model"],
                                  window=case["window"], window_keep_first=case["keep_first"])
                attn = AttnlabAttention(c, 0).double()
                self.assertEqual(attn.window, (case["window"], case["keep_first"]))
                with torch.no_grad():
                    for key, value in case["params"].items():
                        getattr(attn, self.PARAMS[key]).copy_(tensor(value))
                q, k, v, x = (tensor(golden[n]).requires_grad_() for n in ("q", "k", "v", "x"))
                o = attn.attend(q[None], k[None], v[None], visible_keys(T_, T_, attn.window, "cpu"))[0]
                if c.out_gate != "none":
                    o = attn.gate_output(x[None], o.transpose(0, 1)[None])[0].transpose(0, 1)
                torch.testing.assert_close(o, tensor(case["o"]), rtol=0, atol=1e-12)
                leaves = {"q": q, "k": k, "v": v, "x": x}
                leaves.update({key: getattr(attn, self.PARAMS[key]) for key in case["params"]})
                names = list(case["grad"])
                grads = torch.autograd.grad((o * tensor(golden["R"])).sum(), [leaves[n] for n in names])
                for n, g in zip(names, grads):
                    torch.testing.assert_close(g, tensor(case["grad"][n]), rtol=0, atol=1e-7, msg=f"grad {n}")


if __name__ == "__main__":
    unittest.main()
