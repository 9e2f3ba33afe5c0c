"""Hugging Face directories for `attnlab import-hf` (attnlab::import_hf, then the run opened).

A case is a small GPT-2 or GPT-NeoX directory written here (config.json and a model.safetensors of
float32 values that are multiples of 1/4, so their sums are exact), then mutated. Mutations with a
known answer, restated from docs/interop.md rather than taken from the C++ code:
- a flag against the tensors: a tied head that differs from the embedding, an untied config without
  its head, GPT-NeoX attention_bias false beside nonzero biases or true without them (refused, naming
  the flag), and the same flags where nothing contradicts them (a head equal to the embedding, zero
  biases: accepted);
- sizes: a dimension of 10^9, 2^40, 2^62, 0, -1, one more or fewer than the tensors (refused; the
  huge ones before anything is allocated, so within the hang limit);
- types: a dimension as a string, a float, a boolean, null, a list or an object; a flag as a string;
  NaN, 1e400, nesting 100 deep; an unknown model_type (refused); an unknown key (accepted);
- the safetensors header: a dtype unknown, integer or of another size, a shape or offset changed, a
  tensor dropped or added (a buffer name is accepted), the header length beyond the file, the header
  not JSON; a NaN among the weights (refused).
Random byte edits of config.json or of the safetensors header have no known answer unless Python's
own reading of the edited header shows the same tensors (then accepted, with the same values). Any
accepted case must hold the files' values: the sum of the model's parameters is the sum of the tensors
it places (every tensor but buffers and a tied head), computed here from the files.
"""
from __future__ import annotations

import json
import math
import random
import struct
from pathlib import Path

import numpy as np

from .common import Case, mutate_bytes

ANY = "*"
V, D, H, P = 70, 8, 2, 16  # vocab, width, heads, positions
BUFFER_SUFFIXES = (".attn.bias", ".attn.masked_bias", ".attention.bias", ".attention.masked_bias",
                   ".rotary_emb.inv_freq")


def values(rng: random.Random, shape: tuple) -> np.ndarray:
    n = int(np.prod(shape)) if shape else 1
    return (np.array([rng.randint(-16, 16) for _ in range(n)], dtype=np.float32) / 4).reshape(shape)


def gpt2_tensors(rng: random.Random, layers: int) -> dict:
    t = {"transformer.wte.weight": values(rng, (V, D)), "transformer.wpe.weight": values(rng, (P, D)),
         "transformer.ln_f.weight": values(rng, (D,)), "transformer.ln_f.bias": values(rng, (D,))}
    for l in range(layers):
        h = f"transformer.h.{l}."
        for name, shape in [("ln_1.weight", (D,)), ("ln_1.bias", (D,)), ("ln_2.weight", (D,)), ("ln_2.bias", (D,)),
                            ("attn.c_attn.weight", (D, 3 * D)), ("attn.c_attn.bias", (3 * D,)),
                            ("attn.c_proj.weight", (D, D)), ("attn.c_proj.bias", (D,)),
                            ("mlp.c_fc.weight", (D, 4 * D)), ("mlp.c_fc.bias", (4 * D,)),
                            ("mlp.c_proj.weight", (4 * D, D)), ("mlp.c_proj.bias", (D,))]:
            t[h + name] = values(rng, shape)
    return t


def neox_tensors(rng: random.Random, layers: int) -> dict:
    t = {"gpt_neox.embed_in.weight": values(rng, (V, D)), "embed_out.weight": values(rng, (V, D)),
         "gpt_neox.final_layer_norm.weight": values(rng, (D,)), "gpt_neox.final_layer_norm.bias": values(rng, (D,))}
    for l in range(layers):
        p = f"gpt_neox.layers.{l}."
        for name, shape in [("input_layernorm.weight", (D,)), ("input_layernorm.bias", (D,)),
                            ("post_attention_layernorm.weight", (D,)), ("post_attention_layernorm.bias", (D,)),
                            ("attention.query_key_value.weight", (3 * D, D)), ("attention.query_key_value.bias", (3 * D,)),
                            ("attention.dense.weight", (D, D)), ("attention.dense.bias", (D,)),
                            ("mlp.dense_h_to_4h.weight", (4 * D, D)), ("mlp.dense_h_to_4h.bias", (4 * D,)),
                            ("mlp.dense_4h_to_h.weight", (D, 4 * D)), ("mlp.dense_4h_to_h.bias", (D,))]:
            t[p + name] = values(rng, shape)
    return t


def gpt2_config(layers: int) -> dict:
    return {"model_type": "gpt2", "n_embd": D, "n_layer": layers, "n_head": H, "n_positions": P, "vocab_size": V,
            "activation_function": "gelu_new"}


def neox_config(layers: int) -> dict:
    return {"model_type": "gpt_neox", "hidden_size": D, "num_hidden_layers": layers, "num_attention_heads": H,
            "intermediate_size": 4 * D, "vocab_size": V, "max_position_embeddings": P, "rotary_pct": 0.5,
            "use_parallel_residual": True, "tie_word_embeddings": False, "hidden_act": "gelu", "layer_norm_eps": 1e-5}


def safetensors_bytes(tensors: dict, dtypes: dict | None = None) -> tuple[bytes, dict]:
    """The file, and its header as a dict (to mutate and write again with header_file)."""
    header, offset, data = {}, 0, b""
    for name in sorted(tensors):
        raw = tensors[name].astype("<f4").tobytes()
        header[name] = {"dtype": (dtypes or {}).get(name, "F32"), "shape": list(tensors[name].shape),
                        "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
        data += raw
    header["__metadata__"] = {"format": "pt"}
    return header_file(json.dumps(header).encode(), data), header


def header_file(header: bytes, data: bytes, length: int | None = None) -> bytes:
    header += b" " * ((8 - len(header) % 8) % 8)
    return struct.pack("<Q", len(header) if length is None else length) + header + data


def parsed_entries(blob: bytes):
    """Python's reading of a safetensors file by the format's rules: {name: (dtype, shape, begin, end)} and
    the data bytes, or None where a reader must refuse it."""
    if len(blob) < 8:
        return None
    n = struct.unpack_from("<Q", blob)[0]
    if n > len(blob) - 8:
        return None
    try:
        header = json.loads(blob[8:8 + n].decode("utf-8"), parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    if not isinstance(header, dict):
        return None
    sizes = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1}
    entries = {}
    for name, e in header.items():
        if name == "__metadata__":
            if not isinstance(e, dict) or not all(isinstance(v, str) for v in e.values()):
                return None
            continue
        if not isinstance(e, dict) or e.get("dtype") not in sizes or not isinstance(e.get("shape"), list):
            return None
        shape, offsets = e["shape"], e.get("data_offsets")
        if not all(type(d) is int and d >= 0 for d in shape) or not isinstance(offsets, list) or len(offsets) != 2:
            return None
        if not all(type(o) is int and o >= 0 for o in offsets) or offsets[1] < offsets[0]:
            return None
        if offsets[1] - offsets[0] != sizes[e["dtype"]] * math.prod(shape):
            return None
        entries[name] = (e["dtype"], tuple(shape), offsets[0], offsets[1])
    covered = 0
    for name, (_, _, begin, end) in sorted(entries.items(), key=lambda kv: (kv[1][2], kv[1][3])):
        if begin != covered:
            return None
        covered = end
    if covered != len(blob) - 8 - n:
        return None
    return entries


class Target:
    def __init__(self, run, workdir: Path):
        self.run = run

    def generate(self, rng: random.Random, path: Path) -> Case:
        path.mkdir()
        kind = rng.choice(["gpt2", "gpt_neox"])
        layers = rng.choice([1, 2])
        config = gpt2_config(layers) if kind == "gpt2" else neox_config(layers)
        tensors = gpt2_tensors(rng, layers) if kind == "gpt2" else neox_tensors(rng, layers)
        roll = rng.random()
        if roll < 0.35:
            mutation, must_refuse = self._flags_or_sizes(rng, kind, config, tensors)
        elif roll < 0.5:
            mutation, must_refuse = self._types(rng, config)
        else:
            mutation, must_refuse = "valid", ""
        blob, header = safetensors_bytes(tensors)
        config_text = json.dumps(config).encode()
        roll = rng.random()
        if mutation == "valid" and roll < 0.45:
            mutation, must_refuse, blob = self._header(rng, tensors, header, blob)
        elif mutation == "valid" and roll < 0.7:
            config_text, ops = mutate_bytes(rng, config_text, [b"NaN", b"1e400", b"\xff", b"{", b"}", b"[", b"\"",
                                                               b",", b"-1", b"1" * 30], rng.randint(1, 3))
            mutation, must_refuse = f"config.json {ops}", None
            try:
                json.loads(config_text.decode("utf-8"), parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
            except (ValueError, UnicodeDecodeError, RecursionError):
                must_refuse = ANY
        (path / "config.json").write_bytes(config_text)
        (path / "model.safetensors").write_bytes(blob)
        return Case(str(path), f"{kind}: {mutation}", must_refuse=must_refuse or "",
                    extra={"unknown": must_refuse is None, "kind": kind, "config": config})

    # ---- structured mutations with a known answer ----------------------------------------------

    def _flags_or_sizes(self, rng, kind, config, tensors) -> tuple[str, str]:
        gpt2 = kind == "gpt2"
        head, embedding = ("lm_head.weight", "transformer.wte.weight") if gpt2 else ("embed_out.weight",
                                                                                       "gpt_neox.embed_in.weight")
        choice = rng.randrange(9)
        if choice == 0:  # a head beside a tied flag, differing from the embedding
            if not gpt2:
                config["tie_word_embeddings"] = True
            tensors[head] = tensors[embedding] + 0.25
            return "tied flag, another head", "tie_word_embeddings"
        if choice == 1:  # the same, equal to it: nothing contradicts
            if not gpt2:
                config["tie_word_embeddings"] = True
            tensors[head] = tensors[embedding].copy()
            return "tied flag, head equal to the embedding", ""
        if choice == 2:  # untied without a head
            config["tie_word_embeddings"] = False
            tensors.pop(head, None)
            return "untied flag, no head", "tie_word_embeddings"
        if choice == 3 and not gpt2:
            config["attention_bias"] = False
            return "attention_bias false, nonzero biases", "attention_bias"
        if choice == 4 and not gpt2:
            config["attention_bias"] = rng.choice([False, True])
            for name in [n for n in tensors if n.endswith((".attention.query_key_value.bias", ".attention.dense.bias"))]:
                if config["attention_bias"]:
                    del tensors[name]
                else:
                    tensors[name] = np.zeros_like(tensors[name]) if rng.random() < 0.5 else None
            for name in [n for n, t in tensors.items() if t is None]:
                del tensors[name]
            return f"attention_bias {config['attention_bias']}, biases {'absent' if config['attention_bias'] else 'zero or absent'}", \
                ("attention_bias" if config["attention_bias"] else "")
        keys = (["n_layer", "n_embd", "n_head", "vocab_size", "n_positions"] if gpt2 else
                ["num_hidden_layers", "hidden_size", "num_attention_heads", "vocab_size", "max_position_embeddings"])
        key = rng.choice(keys)
        value = rng.choice([10**9, 2**40, 2**62, 2**63 - 1, 0, -1, config[key] + 1, config[key] - 1, config[key] * 2])
        if value == config[key]:
            value += 1
        config[key] = value
        if key in ("n_embd", "hidden_size") and not gpt2:
            config["intermediate_size"] = 4 * value
        # No tensor holds the head count, nor GPT-NeoX's positions (rotary): a valid one is another model
        # these files describe as well.
        shapeless = key in ("n_head", "num_attention_heads", "max_position_embeddings")
        return f"{key}={value}", (None if shapeless and value > 0 else ANY)

    def _types(self, rng, config) -> tuple[str, str]:
        choice = rng.randrange(5)
        if choice == 0:
            key = rng.choice([k for k, v in config.items() if type(v) is int])
            value = rng.choice([str(config[key]), float(config[key]) + 0.5, True, [config[key]], {"v": 1}])
            config[key] = value
            return f"{key}={value!r}", ANY
        if choice == 1:
            numeric = ["layer_norm_epsilon"] if config["model_type"] == "gpt2" else ["layer_norm_eps", "rotary_pct"]
            other = (["activation_function", "tie_word_embeddings", "scale_attn_weights"] if config["model_type"] == "gpt2"
                     else ["hidden_act", "tie_word_embeddings", "use_parallel_residual"])
            key = rng.choice(numeric + other)
            config[key] = rng.choice(["yes", [1], {"a": 1}] + ([] if key in numeric else [5]))
            return f"{key}={config[key]!r}", ANY
        if choice == 2:
            config["model_type"] = rng.choice(["llama", "", 7, None])
            return f"model_type={config['model_type']!r}", ANY
        if choice == 3:
            value = {"x": 1}
            for _ in range(100):
                value = {"x": value}
            config["notes"] = value
            return "a key nested 100 deep", ANY
        config["some_future_key"] = rng.choice([1, "text", [1, 2], {"a": None}])
        return "an unknown key", ""

    def _header(self, rng, tensors, header, blob) -> tuple[str, str | None, bytes]:
        n = struct.unpack_from("<Q", blob)[0]
        data = blob[8 + n:]
        names = sorted(k for k in header if k != "__metadata__")
        name = rng.choice(names)
        choice = rng.randrange(9)
        if choice == 0:
            header[name]["dtype"] = rng.choice(["F99", "f32", "I32", "F64", "F16", 4])
            return f"{name} dtype {header[name]['dtype']!r}", ANY, header_file(json.dumps(header).encode(), data)
        if choice == 1:
            shape = header[name]["shape"]
            header[name]["shape"] = rng.choice([shape[::-1] if len(shape) > 1 else [shape[0] + 1], shape + [1],
                                                [shape[0] + 1] + shape[1:], [-1] + shape[1:], [2**62] + shape[1:]])
            same = header[name]["shape"] == shape  # a square matrix reversed
            return f"{name} shape {header[name]['shape']}", "" if same else ANY, header_file(json.dumps(header).encode(), data)
        if choice == 2:
            header[name]["data_offsets"][1] += rng.choice([-4, 4, 2**40])
            return f"{name} data_offsets", ANY, header_file(json.dumps(header).encode(), data)
        if choice == 3:  # a tensor gone, bytes and all
            del tensors[name]
            blob, _ = safetensors_bytes(tensors)
            return f"without {name}", ANY, blob
        if choice == 4:
            extra = rng.choice(["transformer.h.0.attn.bias", "gpt_neox.layers.0.attention.bias",
                                "transformer.h.0.mlp.gate.weight", "gpt_neox.layers.0.mlp.up_proj.weight"])
            tensors[extra] = values(rng, (4,))
            blob, _ = safetensors_bytes(tensors)
            buffer = extra.endswith(BUFFER_SUFFIXES)
            return f"with {extra}", "" if buffer else "no place for", blob
        if choice == 5:
            return "header length beyond the file", ANY, header_file(json.dumps(header).encode(), data,
                                                                        length=rng.choice([2**63, len(blob), 10**8 + 1]))
        if choice == 6:
            flat = tensors[name].reshape(-1)
            flat[rng.randrange(flat.size)] = rng.choice([np.nan, np.inf, -np.inf])
            blob, _ = safetensors_bytes(tensors)
            return f"{name} holds a non-finite value", ANY, blob
        if choice == 7:
            return "header not JSON", ANY, header_file(json.dumps(header).encode()[:-3], data)
        # random byte edits of the header: known only when Python reads the same tensors from it
        text, ops = mutate_bytes(rng, json.dumps(header).encode(), [b"\"", b"{", b"}", b"[", b"]", b",", b":", b"0",
                                                                    b"-1", b"1e400", b"\xff", b"NaN"], rng.randint(1, 3))
        mutated = header_file(text, data)
        before, after = parsed_entries(blob), parsed_entries(mutated)
        if after is None:
            return f"header {ops}", ANY, mutated
        return f"header {ops}", ("" if after == before else None), mutated

    # ---- judging ---------------------------------------------------------------------------------

    def judge(self, case: Case, verdict) -> str | None:
        if verdict.kind == "refused":
            if case.extra["unknown"]:
                return None
            if not case.must_refuse:
                return f"refused a valid directory: {verdict.error}"
            if case.must_refuse != ANY and case.must_refuse not in verdict.error:
                return f"refused, but the message lacks '{case.must_refuse}': {verdict.error}"
            return None
        if case.must_refuse:
            return "accepted silently"
        want = self._placed_sum(Path(case.path), verdict.summary)
        if want is None:
            return "accepted files Python cannot read"
        if abs(verdict.summary.get("sum", math.nan) - want) > 1e-6 * max(1.0, abs(want)):
            return f"the model's parameters sum to {verdict.summary.get('sum')}, the placed tensors to {want}"
        return None

    @staticmethod
    def _placed_sum(case_dir: Path, summary: dict) -> float | None:
        blob = (case_dir / "model.safetensors").read_bytes()
        entries = parsed_entries(blob)
        if entries is None:
            return None
        n = struct.unpack_from("<Q", blob)[0]
        total = 0.0
        for name, (dtype, shape, begin, end) in entries.items():
            if name.endswith(BUFFER_SUFFIXES):
                continue
            if name in ("lm_head.weight", "embed_out.weight") and not summary.get("untied_head"):
                continue  # a tied head: equal to the embedding, counted once
            if dtype != "F32":
                return None
            total += float(np.frombuffer(blob[8 + n + begin:8 + n + end], dtype="<f4").astype(np.float64).sum())
        return total
