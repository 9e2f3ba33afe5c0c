"""transformers configuration of an attnlab model (written by `attnlab export-hf`; docs/interop.md).

Every key mirrors attnlab's `model:` config, plus the arm's features spelled out (sink, gate,
gate_slot, sink_token, out_gate), so modeling_attnlab.py needs no copy of attnlab's arm table.
"""
from transformers import PretrainedConfig


class AttnlabConfig(PretrainedConfig):
    model_type = "attnlab"

    def __init__(self, arm="baseline", sink="none", gate="none", gate_slot="value", sink_token=False, out_gate="none",
                 routing_gate="norm", norm_gate_beta=8.0, n_layer=2, n_head=2, d_model=128, block_size=256,
                 vocab_size=4096, rotary_fraction=0.0, rotary_base=10000.0, parallel_residual=False,
                 untied_head=False, gelu="tanh", layer_norm_eps=1e-5, **kwargs):
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
        # transformers' generic names, for tools that read them (lm-evaluation-harness reads the context).
        self.hidden_size = d_model
        self.num_hidden_layers = n_layer
        self.num_attention_heads = n_head
        self.max_position_embeddings = block_size
        kwargs["tie_word_embeddings"] = False  # the tied head is computed, not a shared parameter
        super().__init__(**kwargs)
