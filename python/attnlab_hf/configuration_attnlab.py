"""transformers configuration of an attnlab model (written by `attnlab export-hf`; docs/interop.md).

Every key mirrors attnlab's `model:` config, plus the arm's features spelled out (sink, gate,
gate_slot, sink_token, out_gate), so modeling_attnlab.py needs no copy of attnlab's arm table.
A windowed model (docs/windows.md) also has window, window_pattern (expanded, one letter per layer) and
window_keep_first; an export without them (every export from before windows) has no window.
"""
from transformers import PretrainedConfig


def check_window(window, pattern, keep_first):
    """The window keys' checks of attnlab's config reader (docs/windows.md, "Config keys"), each error
    naming its key, so a hand-edited config.json fails at load instead of computing another model."""
    def integer(value):  # bool is an int to Python; 32.0 and "32" are not integers to attnlab either
        return isinstance(value, int) and not isinstance(value, bool)
    if window is not None and (not integer(window) or window < 1):
        raise ValueError(f"window: must be at least 1 (null: no window), got {window!r}")
    if pattern is not None:
        if not isinstance(pattern, str) or not pattern:
            raise ValueError(f"window_pattern: must be a non-empty string of L (local) and G (global), got {pattern!r}")
        bad = next((i for i, c in enumerate(pattern) if c not in "LG"), None)
        if bad is not None:
            raise ValueError(f"window_pattern: {pattern!r} has {pattern[bad]!r} at index {bad}; only L (local) and G (global)")
        if window is None:
            raise ValueError("window_pattern: needs window")
    if not integer(keep_first) or keep_first < 0:
        raise ValueError(f"window_keep_first: must be an integer >= 0, got {keep_first!r}")
    if keep_first > 0 and window is None:
        raise ValueError("window_keep_first: needs window")


class AttnlabConfig(PretrainedConfig):
    model_type = "attnlab"

    def __init__(self, arm="baseline", sink="none", gate="none", gate_slot="value", sink_token=False, out_gate="none",
                 routing_gate="norm", norm_gate_beta=8.0, n_layer=2, n_head=2, d_model=128, block_size=256,
                 vocab_size=4096, rotary_fraction=0.0, rotary_base=10000.0, parallel_residual=False,
                 untied_head=False, gelu="tanh", layer_norm_eps=1e-5, window=None, window_pattern=None,
                 window_keep_first=0, **kwargs):
        window_keep_first = 0 if window_keep_first is None else window_keep_first  # null reads as the default
        check_window(window, window_pattern, window_keep_first)
        self.arm = arm
        self.sink = sink                  # none | fixed_zero | learned
        self.gate = gate                  # none | norm | projection
        self.gate_slot = gate_slot        # value | routing
        self.sink_token = sink_token
        self.out_gate = out_gate          # none | headwise | elementwise
        self.routing_gate = routing_gate
        self.norm_gate_beta = norm_gate_beta
        self.n_layer = n_layer
        self.n_head = n_head
        self.d_model = d_model
        self.block_size = block_size
        self.vocab_size = vocab_size
        self.rotary_fraction = rotary_fraction
        self.rotary_base = rotary_base
        self.parallel_residual = parallel_residual
        self.untied_head = untied_head
        self.gelu = gelu                  # tanh | erf
        self.layer_norm_eps = layer_norm_eps
        self.window = window              # W, or None: every layer global
        self.window_pattern = window_pattern  # L (local) / G (global) per block l % len; None: all L
        self.window_keep_first = window_keep_first  # n: the first positions every query sees
        # transformers' generic names, for tools that read them (lm-evaluation-harness reads the context).
        self.hidden_size = d_model
        self.num_hidden_layers = n_layer
        self.num_attention_heads = n_head
        self.max_position_embeddings = block_size
        kwargs["tie_word_embeddings"] = False  # the tied head is computed, not a shared parameter
        super().__init__(**kwargs)

    def to_dict(self):
        """As attnlab writes config.json: a model without a window has no window keys (transformers would
        write them at their defaults), so its config.json stays as it was before windows."""
        out = super().to_dict()
        if out.get("window") is None:
            for key in ("window", "window_pattern", "window_keep_first"):
                out.pop(key, None)
        return out
