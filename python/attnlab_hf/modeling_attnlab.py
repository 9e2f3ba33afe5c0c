"""attnlab's attention arms as a transformers causal LM, in plain PyTorch (docs/interop.md).

`attnlab export-hf` copies this file and configuration_attnlab.py beside config.json and
model.safetensors, so `AutoModelForCausalLM.from_pretrained(dir, trust_remote_code=True)` (and
lm-evaluation-harness's `hf` model) run any arm. Written from the shared attention form of
docs/design.md: for one head, with s_ij = q_i . k_j / sqrt(d),

    a_ij = exp(s_ij + r_j) / ( [sink] exp(b_h) + sum_{k<=i} exp(s_ik + r_k) ),   o_i = sum_j a_ij (g_j v_j)

  sink term  none | fixed_zero (b_h = 0) | learned (b_h = sink_logit[h]); it takes part in the row max
  gate       z_j = beta (||v_j|| / sqrt(d) - tau_h) (norm) or w_h . v_j + c_h (projection), g_j = sigmoid(z_j)
  slot       value: the read becomes g_j v_j;  routing: r_j = log g_j = logsigmoid(z_j), reads unchanged
  sink_token a learned embedding e_sink at position 0 of every sequence, with no position embedding;
             its output is dropped
  out_gate   none | headwise | elementwise: o'_i = o_i * sigmoid(x_i W_g + c_g) from the attention's
             own input x_i, per head (W_g [d_model, H]) or per channel ([d_model, H d]), before c_proj
  window     (docs/windows.md) in a local layer the sums over k <= i run over V(i) = { j <= i : i - j < W
             or j < n } instead, positions counted as attention sees them (sink_token's e_sink is 0); the
             sink term, the gates and the output gate are unchanged

The rest is GPT-2 (pre-LayerNorm blocks, learned positions, tied head, tanh GELU), or, per config,
rotary positions on the first floor(rotary_fraction * head_dim) channels of q and k (GPT-NeoX's
rotate-half form, angles computed in float32), a parallel residual, an untied head, exact GELU.
Tensor names are attnlab's parameter names under "transformer." (the untied head: "lm_head.weight").
"""
import math

import torch
import torch.nn.functional as F
from torch import nn
from transformers import GenerationMixin, PreTrainedModel
from transformers.modeling_outputs import CausalLMOutputWithPast

from .configuration_attnlab import AttnlabConfig


def rotate(x, first_position, rotary_dims, base):
    """x [B, H, T, d]: channels i and i + r/2 (i < r/2) of position p turn by p * base^(-2i/r)."""
    angle_type = torch.float64 if x.dtype == torch.float64 else torch.float32
    steps = torch.arange(0, rotary_dims, 2, dtype=angle_type, device=x.device) / rotary_dims
    inv_freq = 1.0 / (base ** steps)
    positions = torch.arange(first_position, first_position + x.shape[2], dtype=angle_type, device=x.device)
    freqs = positions[:, None] * inv_freq[None, :]
    angles = torch.cat((freqs, freqs), dim=-1)
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    rot, rest = x[..., :rotary_dims], x[..., rotary_dims:]
    half = rotary_dims // 2
    rotated_half = torch.cat((-rot[..., half:], rot[..., :half]), dim=-1)
    return torch.cat((rot * cos + rotated_half * sin, rest), dim=-1)


def layer_window(config, layer):
    """(W, n) for a local block, None for a global one or a model without a window (older exports have
    no window keys): block l is local when window_pattern[l % len] is L, every block without a pattern."""
    window = getattr(config, "window", None)
    if window is None:
        return None
    pattern = getattr(config, "window_pattern", None) or "L"
    if pattern[layer % len(pattern)] != "L":
        return None
    return window, getattr(config, "window_keep_first", 0) or 0


def visible_keys(Tq, Tk, window, device):
    """[Tq, Tk] bool: query row i, at position p = Tk - Tq + i, sees key j when j <= p and, under a
    window (W, n), p - j < W or j < n. A window that hides nothing for this call (Tk <= W + n) is left
    out, so such a layer is the global one exactly."""
    p = torch.arange(Tk - Tq, Tk, device=device)[:, None]
    j = torch.arange(Tk, device=device)[None, :]
    visible = j <= p
    if window is not None and Tk > window[0] + window[1]:
        visible = visible & ((p - j < window[0]) | (j < window[1]))
    return visible


class AttnlabAttention(nn.Module):
    def __init__(self, config, layer=0):
        super().__init__()
        self.config = config
        self.window = layer_window(config, layer)  # (W, n) in a local layer, else None
        self.n_head, self.d_model = config.n_head, config.d_model
        self.head_dim = config.d_model // config.n_head
        self.rotary_dims = int(self.head_dim * config.rotary_fraction)
        self.c_attn = nn.Linear(config.d_model, 3 * config.d_model)
        self.c_proj = nn.Linear(config.d_model, config.d_model)
        if config.sink == "learned":
            self.sink_logit = nn.Parameter(torch.zeros(config.n_head))
        if config.gate == "norm":
            self.gate_tau = nn.Parameter(torch.zeros(config.n_head))
        elif config.gate == "projection":
            self.gate_w = nn.Parameter(torch.zeros(config.n_head, self.head_dim))
            self.gate_c = nn.Parameter(torch.zeros(config.n_head))
        out_gate = getattr(config, "out_gate", "none")
        if out_gate != "none":
            width = config.n_head if out_gate == "headwise" else config.d_model
            self.out_gate_w = nn.Parameter(torch.zeros(config.d_model, width))
            self.out_gate_c = nn.Parameter(torch.zeros(width))

    def gate_logits(self, v):
        """z [B, H, T] of the per-key gate from the raw reads v [B, H, T, d] (float32 or float64)."""
        if self.config.gate == "norm":
            norms = torch.linalg.vector_norm(v, dim=-1)
            return self.config.norm_gate_beta * (norms / math.sqrt(self.head_dim) - self.gate_tau.to(v.dtype)[None, :, None])
        return torch.einsum("bhtd,hd->bht", v, self.gate_w.to(v.dtype)) + self.gate_c.to(v.dtype)[None, :, None]

    def sink_term(self, dtype, device):
        """b_h [H], or None without a sink term."""
        if self.config.sink == "learned":
            return self.sink_logit.to(dtype)
        if self.config.sink == "fixed_zero":
            return torch.zeros(self.n_head, dtype=dtype, device=device)
        return None

    def attend(self, q, k, v, visible):
        """o [B, H, Tq, d] of the shared form before the output gate, from q [B, H, Tq, d], k and v
        [B, H, Tk, d] (float32 or float64) and visible, a bool mask broadcasting to [B, H, Tq, Tk]."""
        dtype = q.dtype
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)  # [B, H, Tq, Tk]
        if self.config.gate != "none":
            z = self.gate_logits(v)
            if self.config.gate_slot == "value":
                v = v * torch.sigmoid(z)[..., None]
            else:
                scores = scores + F.logsigmoid(z)[:, :, None, :]
        scores = scores.masked_fill(~visible, float("-inf"))

        # Row maximum over the keys and the sink term; 0 for a row with neither (all keys masked).
        sink = self.sink_term(dtype, q.device)
        row_max = scores.amax(dim=-1)
        if sink is not None:
            row_max = torch.maximum(row_max, sink[None, :, None])
        row_max = torch.where(torch.isfinite(row_max), row_max, torch.zeros_like(row_max)).detach()
        weights = torch.exp(scores - row_max[..., None])
        denominator = weights.sum(dim=-1)
        if sink is not None:
            denominator = denominator + torch.exp(sink[None, :, None] - row_max)
        denominator = torch.where(denominator > 0, denominator, torch.ones_like(denominator))
        return (weights / denominator[..., None]) @ v

    def gate_output(self, x, out):
        """out [B, T, H, d] times the output gate read from the attention's input x [B, T, d_model]."""
        out_gate = getattr(self.config, "out_gate", "none")
        if out_gate == "none":
            return out
        B, T, _ = x.shape
        gamma = torch.sigmoid(x @ self.out_gate_w + self.out_gate_c)  # [B, T, H] or [B, T, H d]
        return out * (gamma[..., None] if out_gate == "headwise" else gamma.view(B, T, self.n_head, self.head_dim))

    def forward(self, x, key_mask=None):
        B, T, _ = x.shape
        q, k, v = self.c_attn(x).split(self.d_model, dim=2)
        q, k, v = (t.view(B, T, self.n_head, self.head_dim).transpose(1, 2) for t in (q, k, v))
        if self.rotary_dims > 0:
            q = rotate(q, 0, self.rotary_dims, self.config.rotary_base)
            k = rotate(k, 0, self.rotary_dims, self.config.rotary_base)
        dtype = torch.float64 if x.dtype == torch.float64 else torch.float32
        q, k, v = q.to(dtype), k.to(dtype), v.to(dtype)
        # No KV cache here: every call is the whole sequence, so Tq = Tk = T (with sink_token, the
        # learned token is position 0 of x, as the window counts it).
        visible = visible_keys(T, T, self.window, x.device)[None, None]
        if key_mask is not None:
            visible = visible & key_mask[:, None, None, :].bool()
        out = self.attend(q, k, v, visible).to(x.dtype).transpose(1, 2)  # [B, T, H, d]
        return self.c_proj(self.gate_output(x, out).reshape(B, T, self.d_model))


class AttnlabMLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.c_fc = nn.Linear(config.d_model, 4 * config.d_model)
        self.c_proj = nn.Linear(4 * config.d_model, config.d_model)
        self.approximate = "none" if config.gelu == "erf" else "tanh"

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate=self.approximate))


class AttnlabBlock(nn.Module):
    def __init__(self, config, layer=0):
        super().__init__()
        self.parallel_residual = config.parallel_residual
        self.ln_1 = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
        self.attn = AttnlabAttention(config, layer)
        self.ln_2 = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
        self.mlp = AttnlabMLP(config)

    def forward(self, x, key_mask=None):
        a = self.attn(self.ln_1(x), key_mask)
        if self.parallel_residual:
            return self.mlp(self.ln_2(x)) + a + x
        y = x + a
        return y + self.mlp(self.ln_2(y))


class AttnlabModel(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.wte = nn.Embedding(config.vocab_size, config.d_model)
        if int(config.d_model // config.n_head * config.rotary_fraction) == 0:
            self.wpe = nn.Embedding(config.block_size, config.d_model)
        self.h = nn.ModuleList(AttnlabBlock(config, l) for l in range(config.n_layer))
        self.ln_f = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
        if config.sink_token:
            self.sink_token = nn.Parameter(torch.zeros(config.d_model))

    def forward(self, input_ids, key_mask=None):
        """Residual states [B, T (+1 with the sink token), d_model] after each block, l = 0 the embeddings."""
        B, T = input_ids.shape
        if T > self.config.block_size:
            raise ValueError(f"sequence of {T} tokens exceeds block_size = {self.config.block_size}")
        x = self.wte(input_ids)
        if hasattr(self, "wpe"):
            x = x + self.wpe(torch.arange(T, device=input_ids.device))
        if self.config.sink_token:
            x = torch.cat((self.sink_token.view(1, 1, -1).expand(B, 1, -1), x), dim=1)
            if key_mask is not None:
                key_mask = torch.cat((key_mask.new_ones(B, 1), key_mask), dim=1)
        states = [x]
        for block in self.h:
            x = block(x, key_mask)
            states.append(x)
        return states


class AttnlabPreTrainedModel(PreTrainedModel):
    config_class = AttnlabConfig
    base_model_prefix = "transformer"
    _no_split_modules = ["AttnlabBlock"]

    def _init_weights(self, module):
        pass  # every weight comes from model.safetensors


class AttnlabForCausalLM(AttnlabPreTrainedModel, GenerationMixin):
    def __init__(self, config):
        super().__init__(config)
        self.transformer = AttnlabModel(config)
        if config.untied_head:
            self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        self.post_init()

    def prepare_inputs_for_generation(self, input_ids, attention_mask=None, **kwargs):
        """The whole sequence at every step: there is no KV cache to continue from."""
        return {"input_ids": input_ids, "attention_mask": attention_mask}

    def get_input_embeddings(self):
        return self.transformer.wte

    def forward(self, input_ids=None, attention_mask=None, labels=None, output_hidden_states=None,
                return_dict=None, **kwargs):
        """logits [B, T, vocab_size]; loss = mean cross-entropy of labels shifted by one (-100 ignored);
        hidden_states: the embedding output and each block's output (sink position dropped), the last
        one after the final LayerNorm, as transformers' GPT-2 gives them."""
        states = self.transformer(input_ids, attention_mask)
        if self.config.sink_token:
            states = [s[:, 1:] for s in states]
        x = self.transformer.ln_f(states[-1])
        head = self.lm_head.weight if self.config.untied_head else self.transformer.wte.weight
        logits = F.linear(x, head)
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.size(-1)).float(),
                                   labels[:, 1:].reshape(-1), ignore_index=-100)
        hidden_states = tuple(states[:-1]) + (x,) if output_hidden_states else None
        return CausalLMOutputWithPast(loss=loss, logits=logits, hidden_states=hidden_states)
