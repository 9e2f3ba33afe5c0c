#!/usr/bin/env python3
"""The transformers side of attnlab's Hugging Face interop tests (tests/e2e/test_hf_interop.cpp runs it).

Everything here is computed by transformers, safetensors, tiktoken and lm-evaluation-harness
themselves, offline, on tiny random models built in-process; the C++ test compares attnlab's numbers
with these. Subcommands:

  models OUT        tiny GPT-2 and GPT-NeoX models (save_pretrained) + tokens, logits, per-layer hidden
                    states and activation statistics on them (OUT/<name>/, OUT/<name>.reference.safetensors,
                    OUT/<name>.stats.json)
  series OUT        two GPT-NeoX "training runs" of three revisions each (OUT/seed<s>/step<N>/), a
                    validation shard, and the activation statistics, lock-in steps, Spearman correlations
                    and Jaccard overlaps attnlab's `activations` must report (OUT/series_expected.json)
  loss SHARD SEQ_LEN TOKENS DIR...
                    the loss of transformers' logits on attnlab eval's sequences of SHARD (and, when
                    SEQ_LEN + 1 positions fit, transformers' own loss with labels = input_ids, which
                    must agree), for each exported DIR; prints JSON {dir: {"loss", "class"}}
  generate DIR...    greedy `generate` of each exported DIR equals the argmax of its logits, step by step
  tokenizer DIR TIKTOKEN
                    DIR's tokenizer files encode sample texts exactly as tiktoken does with TIKTOKEN's ranks
  safetensors ATTNLAB_FILE PYTHON_FILE
                    ATTNLAB_FILE's tensors hold the byte patterns below, bit for bit; writes the same
                    patterns (another offset) with Python's safetensors to PYTHON_FILE
  lm-eval DIR WORK  lm-evaluation-harness's `lm_eval` command on a local multiple-choice task; its
                    per-choice log-likelihoods and accuracy equal a direct transformers computation
  sp-corpus WORK VOCAB
                    generated documents (WORK/texts/) tokenized by tools/prepare_data.py with a
                    SentencePiece BPE of VOCAB tokens into WORK/data/, as scripts/prepare_corpus.sh does
  corpus-ids DIR DATA TEXTS
                    DIR's tokenizer (loaded with sentencepiece and protobuf unimportable) gives, for each
                    document of TEXTS, the ids DATA's shards hold for it: the separator, then its tokens
  lm-eval-corpus DIR WORK DATA
                    docs/interop.md's lm_eval command, offline, on a task made of DATA's documents; checks
                    that its token ids are the corpus's and its log-likelihoods transformers', and writes
                    WORK/requests.json (each request's tokens and lm_eval's value) for attnlab to compare
  task-scores DIR WORK TIKTOKEN
                    the same lm_eval run's per-choice log-likelihoods, acc and acc_norm, and its items
                    converted by tools/task_convert.py (GPT-2 BPE) into an eval.tasks file
"""
import json
import os
import subprocess
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

LAYOUT_DTYPES = ["float64", "float32", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool"]
SHARD_MAGIC, SHARD_VERSION = 20240520, 1


def warm_up_vector_math():
    """Settles oneMKL's VML dispatch on one thread before any parallel op, as attnlab's C++ programs do
    (include/attnlab/cpu_math.h): otherwise the first parallel exp / log / tanh can run a low-accuracy
    kernel on one thread's chunk (pytorch/pytorch#188792), and transformers' side of a comparison
    would be off by up to 1.5e-4 relative in float32."""
    ops = [torch.exp, torch.expm1, torch.log, torch.log2, torch.log10, torch.log1p, torch.sqrt, torch.sin,
           torch.cos, torch.tan, torch.tanh, torch.asin, torch.acos, torch.atan, torch.erf, torch.erfc,
           torch.erfinv, torch.abs, torch.trunc]
    for dtype in (torch.float32, torch.float64):
        x = torch.full((16,), 0.5, dtype=dtype)
        for op in ops:
            op(x)


def fail(message):
    print(f"hf_reference: FAIL: {message}", file=sys.stderr)
    sys.exit(1)


# ---- tiny models --------------------------------------------------------------------------------------

def perturbed(model, seed, scale=0.1):
    """Random init, then every parameter (LayerNorm gains and biases too) moved off its init value."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=g) * scale)
    return model.eval()


def gpt2_model(seed, **extra):
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(seed)
    cfg = GPT2Config(vocab_size=100, n_positions=32, n_embd=32, n_layer=2, n_head=4, initializer_range=0.2,
                     bos_token_id=0, eos_token_id=0, **extra)
    return perturbed(GPT2LMHeadModel(cfg), seed)


def neox_model(seed, parallel, **extra):
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM
    torch.manual_seed(seed)
    cfg = GPTNeoXConfig(vocab_size=100, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=256, max_position_embeddings=64, rotary_pct=0.25,
                        use_parallel_residual=parallel, initializer_range=0.1, bos_token_id=0, eos_token_id=0,
                        **extra)
    # Smaller than GPT-2's draws: the wider MLP would otherwise grow the residual stream to ~30, where
    # float32's spacing alone approaches the 1e-5 the comparisons allow.
    return perturbed(GPTNeoXForCausalLM(cfg), seed, scale=0.05)


def residuals(model, tokens):
    """Residual stream after each block, l = 0 the embedding output, l = L before the final LayerNorm.

    transformers' hidden_states give l = 0 .. L-1; its last entry is after the final LayerNorm, so the
    last block's own output is taken with a forward hook.
    """
    blocks = model.transformer.h if hasattr(model, "transformer") else model.gpt_neox.layers
    last = {}
    hook = blocks[-1].register_forward_hook(lambda m, i, o: last.__setitem__("x", o[0] if isinstance(o, tuple) else o))
    with torch.no_grad():
        out = model(tokens, output_hidden_states=True)
    hook.remove()
    states = list(out.hidden_states[:-1]) + [last["x"]]
    return out.logits, states, out.hidden_states[-1]


def stats_of(x):
    """docs/spec.md section 5's statistics of one state x [d_model], in float64 numpy."""
    a = np.abs(x.double().numpy())
    m = float(a.max())
    med = float(np.median(a))
    return {"max_abs": m, "argmax": int(np.argmax(a)), "median_abs": med, "ratio": m / med,
            "abs": a.tolist()}


def capture(states):
    """Per layer: the sink state (sequence 0, position 0) and the peak (largest |x_c| in the batch)."""
    layers = []
    for layer, h in enumerate(states):
        a = h.abs()
        flat = int(torch.argmax(a.amax(dim=-1)).item())  # first in (sequence, position) order on ties
        seq, pos = divmod(flat, h.shape[1])
        layers.append({"layer": layer, "sink": stats_of(h[0, 0]), "peak": stats_of(h[seq, pos]),
                       "peak_sequence": seq, "peak_position": pos})
    return layers


def cmd_models(out):
    from safetensors.torch import save_file
    os.makedirs(out, exist_ok=True)
    models = {
        "gpt2": gpt2_model(1),
        "gpt2_untied_erf": gpt2_model(2, tie_word_embeddings=False, activation_function="gelu"),
        "neox_parallel": neox_model(3, True),
        "neox_sequential": neox_model(4, False),
        "neox_tied_tanh": neox_model(5, True, tie_word_embeddings=True, hidden_act="gelu_new"),
    }
    tokens = torch.randint(0, 100, (3, 24), generator=torch.Generator().manual_seed(7))
    for name, model in models.items():
        model.save_pretrained(os.path.join(out, name))
        logits, states, final_normed = residuals(model, tokens)
        tensors = {"tokens": tokens, "logits": logits.contiguous(), "final_normed": final_normed.contiguous()}
        for layer, h in enumerate(states):
            tensors[f"hidden.{layer}"] = h.contiguous()
        save_file(tensors, os.path.join(out, f"{name}.reference.safetensors"))
        with open(os.path.join(out, f"{name}.stats.json"), "w") as f:
            json.dump(capture(states), f)
    print(json.dumps(sorted(models)))


# ---- a checkpoint series ------------------------------------------------------------------------------

def write_shard(path, tokens):
    header = np.zeros(256, dtype="<i4")
    header[0], header[1], header[2] = SHARD_MAGIC, SHARD_VERSION, len(tokens)
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(np.asarray(tokens, dtype="<u2").tobytes())


def read_shard(path):
    with open(path, "rb") as f:
        header = np.frombuffer(f.read(1024), dtype="<i4")
        return np.frombuffer(f.read(), dtype="<u2")[: header[2]].astype(np.int64)


def lock_in(steps, argmax):
    """The first step from which the dominant channel equals the final one at every later checkpoint."""
    i = len(argmax) - 1
    while i > 0 and argmax[i - 1] == argmax[-1]:
        i -= 1
    return steps[i]


def cmd_series(out, sequences=2, seq_len=16, top_k=4):
    from scipy.stats import spearmanr
    steps = [0, 1000, 143000]
    val = np.random.default_rng(11).integers(0, 100, size=sequences * seq_len + 1)
    os.makedirs(out, exist_ok=True)
    write_shard(os.path.join(out, "series_val_000000.bin"), val)
    with open(os.path.join(out, "tokenizer.json"), "w") as f:  # what attnlab checks the model's vocabulary against
        json.dump({"tokenizer": "hf", "vocab_size": 100}, f)
    probe = torch.tensor(val[: sequences * seq_len].reshape(sequences, seq_len))
    expected = {"steps": steps, "sequences": sequences, "seq_len": seq_len, "top_k": top_k, "runs": {}}
    finals = {}
    for seed in (1, 2):
        per_step = []
        for i, step in enumerate(steps):
            # From the second revision on, channel 5 (both seeds) and channel 10 * seed of every embedding
            # are large, so the dominant channel locks in there and the seeds share part of their top set.
            model = neox_model(100 * seed + i, True)
            with torch.no_grad():
                model.gpt_neox.embed_in.weight[:, 5] += 6.0 * min(i, 1)
                model.gpt_neox.embed_in.weight[:, 10 * seed] += 4.0 * min(i, 1)
            model.save_pretrained(os.path.join(out, f"seed{seed}", f"step{step}"))
            _, states, _ = residuals(model, probe)
            per_step.append(capture(states))
        n_layers = len(per_step[-1])
        run = {"checkpoints": per_step, "lock_in": [], "spearman_final": []}
        for layer in range(n_layers):
            argmax = [c[layer]["sink"]["argmax"] for c in per_step]
            run["lock_in"].append(lock_in(steps, argmax))
            final = per_step[-1][layer]["sink"]["abs"]
            run["spearman_final"].append([float(spearmanr(c[layer]["sink"]["abs"], final)[0]) for c in per_step])
        finals[seed] = [np.argsort(-np.array(c["sink"]["abs"]), kind="stable")[:top_k] for c in per_step[-1]]
        expected["runs"][str(seed)] = run
    expected["jaccard"] = [len(set(a) & set(b)) / len(set(a) | set(b)) for a, b in zip(finals[1], finals[2])]
    with open(os.path.join(out, "series_expected.json"), "w") as f:
        json.dump(expected, f)


# ---- exported models ------------------------------------------------------------------------------------

def needs_custom_code(path):
    with open(os.path.join(path, "config.json")) as f:
        return "auto_map" in json.load(f)


def load_exported(path):
    """transformers' own classes without custom code for plain exports; attnlab's with trust_remote_code."""
    from transformers import AutoModelForCausalLM
    return AutoModelForCausalLM.from_pretrained(path, trust_remote_code=needs_custom_code(path)).eval()


def cmd_loss(shard, seq_len, tokens, dirs):
    data = read_shard(shard)
    used = min(tokens, len(data))
    n = (used - 1) // seq_len  # attnlab's ValidationSet: whole sequences of seq_len + 1 tokens
    windows = torch.tensor(np.stack([data[i * seq_len: i * seq_len + seq_len + 1] for i in range(n)]))
    result = {}
    for path in dirs:
        model = load_exported(path)
        with torch.no_grad():
            logits = model(input_ids=windows[:, :-1]).logits
            loss = float(torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), windows[:, 1:].reshape(-1)))
            if seq_len + 1 <= model.config.max_position_embeddings:  # transformers' own loss needs seq_len + 1 positions
                labels_loss = float(model(input_ids=windows, labels=windows).loss)
                if abs(labels_loss - loss) > 1e-6:
                    fail(f"{path}: the loss with labels, {labels_loss}, is not the loss of the logits, {loss}")
        result[path] = {"loss": loss, "class": type(model).__name__, "targets": n * seq_len}
    print(json.dumps(result))


def cmd_generate(dirs):
    result = {}
    for path in dirs:
        model = load_exported(path)
        ids = torch.randint(0, model.config.vocab_size, (2, 3), generator=torch.Generator().manual_seed(5))
        with torch.no_grad():
            got = model.generate(ids, max_new_tokens=5, do_sample=False, pad_token_id=0)
            want = ids
            for _ in range(5):
                want = torch.cat([want, model(want).logits[:, -1].argmax(-1, keepdim=True)], dim=1)
        if got.tolist() != want.tolist():
            fail(f"{path}: generate gave {got.tolist()}, the logits' argmax {want.tolist()}")
        result[path] = got.tolist()
    print(json.dumps(result))


def cmd_tokenizer(path, tiktoken_file):
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe
    from tiktoken_ext.openai_public import r50k_pat_str
    from transformers import AutoTokenizer
    ranks = load_tiktoken_bpe(tiktoken_file)
    reference = tiktoken.Encoding("gpt2_local", pat_str=r50k_pat_str, mergeable_ranks=ranks,
                                  special_tokens={"<|endoftext|>": len(ranks)})
    tok = AutoTokenizer.from_pretrained(path, trust_remote_code=needs_custom_code(path))
    texts = ["Hello world", "  leading spaces and\ttabs\n\nnew lines", "naïve café, Zürich — 東京 🙂 emoji",
             "numbers 1234567 3.14159 and CamelCaseWords", "it's they're we'll I'd", "a" * 50 + " b" * 7]
    for text in texts:
        want = reference.encode_ordinary(text)
        got = tok.encode(text, add_special_tokens=False)
        if got != want:
            fail(f"tokenizer of {path} encodes {text!r} as {got}, tiktoken as {want}")
        if tok.decode(got) != text:
            fail(f"tokenizer of {path} decodes {got} as {tok.decode(got)!r}, not {text!r}")
    if tok.convert_tokens_to_ids("<|endoftext|>") != len(ranks) or tok.eos_token_id != len(ranks):
        fail(f"<|endoftext|> is not id {len(ranks)} in {path}")
    print(json.dumps({"texts": len(texts), "vocab": len(tok)}))


# ---- safetensors, bit for bit ------------------------------------------------------------------------------

def pattern(dtype, shape, offset):
    """The tensor whose raw little-endian bytes are (37 i + offset) mod 256 (mod 2 for bool): every bit
    pattern, NaN payloads, infinities, -0 and subnormals included. tests/e2e/test_hf_interop.cpp makes
    the same bytes."""
    torch_dtype = getattr(torch, dtype)
    count = int(np.prod(shape)) * torch.tensor([], dtype=torch_dtype).element_size()
    raw = (np.arange(count, dtype=np.int64) * 37 + offset) % (2 if dtype == "bool" else 256)
    return torch.frombuffer(bytearray(raw.astype(np.uint8).tobytes()), dtype=torch_dtype).reshape(shape) if count \
        else torch.empty(shape, dtype=torch_dtype)


def shapes():
    return {"matrix": [3, 5], "scalar": [], "empty": [0, 4]}


def cmd_safetensors(attnlab_file, python_file):
    from safetensors import safe_open
    from safetensors.torch import load_file, save_file
    got = load_file(attnlab_file)
    with safe_open(attnlab_file, "pt") as f:
        metadata = f.metadata()
    if metadata != {"format": "pt", "written_by": "attnlab"}:
        fail(f"{attnlab_file}: metadata {metadata}")
    written = {}
    for dtype in LAYOUT_DTYPES:
        for kind, shape in shapes().items():
            name = f"{dtype}.{kind}"
            want = pattern(dtype, shape, 11)
            if name not in got:
                fail(f"{attnlab_file} lacks {name}")
            t = got[name]
            if t.dtype != want.dtype or list(t.shape) != shape:
                fail(f"{name}: {t.dtype} {list(t.shape)}, expected {want.dtype} {shape}")
            if t.contiguous().reshape(-1).view(torch.uint8).tolist() != want.reshape(-1).view(torch.uint8).tolist():
                fail(f"{name}: bytes differ")
            written[name] = pattern(dtype, shape, 101)
    if len(got) != len(written):
        fail(f"{attnlab_file} holds {len(got)} tensors, expected {len(written)}")
    save_file(written, python_file, metadata={"written_by": "python"})
    print(json.dumps({"checked": len(got), "written": len(written)}))


# ---- lm-evaluation-harness -----------------------------------------------------------------------------------

ITEMS = [
    {"question": "The capital of France is", "choices": ["Paris", "a river", "blue"], "answer": 0},
    {"question": "Two plus two equals", "choices": ["four", "seven", "the moon"], "answer": 0},
    {"question": "Water freezes at zero degrees", "choices": ["Celsius", "Kelvin"], "answer": 0},
    {"question": "A cat says", "choices": ["meow", "woof", "moo", "quack"], "answer": 0},
]

TASK_YAML = """task: attnlab_local_mc
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: multiple_choice
doc_to_text: "{{{{question}}}}"
doc_to_choice: "{{{{choices}}}}"
doc_to_target: "{{{{answer}}}}"
metric_list:
  - metric: acc
    aggregation: mean
    higher_is_better: true
  - metric: acc_norm
    aggregation: mean
    higher_is_better: true
"""


def direct_loglikelihood(model, tok, context, continuation):
    """log p(continuation | context) as lm-eval defines it: trailing spaces of the context move to the
    continuation, the continuation's tokens are those of the whole text after the context's."""
    spaces = len(context) - len(context.rstrip())
    if spaces:
        continuation, context = context[-spaces:] + continuation, context[:-spaces]
    whole = tok.encode(context + continuation, add_special_tokens=False)
    ctx = tok.encode(context, add_special_tokens=False)
    cont = whole[len(ctx):]
    ids = torch.tensor([ctx + cont])
    with torch.no_grad():
        logprobs = torch.log_softmax(model(ids).logits[0].double(), dim=-1)
    return float(sum(logprobs[len(ctx) - 1 + i, t] for i, t in enumerate(cont)))


def run_lm_eval(path, work):
    """lm_eval's command on ITEMS as a local task: its samples (by doc_id) and aggregate results."""
    os.makedirs(work, exist_ok=True)
    data = os.path.join(work, "items.jsonl")
    with open(data, "w") as f:
        for item in ITEMS:
            f.write(json.dumps(item) + "\n")
    tasks = os.path.join(work, "tasks")
    os.makedirs(tasks, exist_ok=True)
    with open(os.path.join(tasks, "attnlab_local_mc.yaml"), "w") as f:
        f.write(TASK_YAML.format(data=data))
    results = os.path.join(work, "results")
    lm_eval = os.path.join(os.path.dirname(sys.executable), "lm_eval")
    command = [lm_eval, "--model", "hf", "--model_args", f"pretrained={path},trust_remote_code=True,dtype=float32",
               "--tasks", "attnlab_local_mc", "--include_path", tasks, "--device", "cpu", "--batch_size", "2",
               "--output_path", results, "--log_samples"]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        fail(f"lm_eval exited with {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    samples, aggregate = None, None
    for root, _, files in os.walk(results):
        for name in files:
            if name.startswith("samples_attnlab_local_mc") and name.endswith(".jsonl"):
                samples = [json.loads(line) for line in open(os.path.join(root, name))]
            elif name.startswith("results") and name.endswith(".json"):
                aggregate = json.load(open(os.path.join(root, name)))
    if samples is None or aggregate is None:
        fail(f"lm_eval wrote no samples or results under {results}")
    return sorted(samples, key=lambda s: s["doc_id"]), aggregate


def sample_loglikelihoods(sample):
    return [float(r[0][0] if isinstance(r[0], list) else r[0]) for r in sample["resps"]]


def cmd_lm_eval(path, work):
    from transformers import AutoTokenizer
    samples, aggregate = run_lm_eval(path, work)
    model = load_exported(path)
    tok = AutoTokenizer.from_pretrained(path, trust_remote_code=needs_custom_code(path))
    correct, worst = 0, 0.0
    for sample in samples:
        item = ITEMS[sample["doc_id"]]
        got = sample_loglikelihoods(sample)
        want = [direct_loglikelihood(model, tok, item["question"], " " + c) for c in item["choices"]]
        worst = max(worst, max(abs(float(g) - w) for g, w in zip(got, want)))
        correct += int(np.argmax(want) == item["answer"])
    acc = aggregate["results"]["attnlab_local_mc"]["acc,none"]
    if worst > 1e-4:
        fail(f"lm_eval's log-likelihoods differ from transformers' by up to {worst}")
    if abs(acc - correct / len(ITEMS)) > 1e-12:
        fail(f"lm_eval's acc {acc} differs from the direct computation's {correct / len(ITEMS)}")
    print(json.dumps({"acc": acc, "docs": len(samples), "max_loglikelihood_diff": worst}))


# ---- the project's own SentencePiece tokenizer ----------------------------------------------------------------

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
WORDS = ("the a list of file object returns value module function class string number open read write close "
         "python import call print type error raise loop index key dict set tuple bytes path name data line").split()


def corpus_documents(n=40, seed=7):
    """Deterministic documents with what tokenizers trip over: a leading space or none, runs of spaces,
    tabs, indented code, blank lines, punctuation, digits, accents, CJK, an emoji, literal "<s>"."""
    rng = np.random.default_rng(seed)
    docs = []
    for d in range(n):
        lines = []
        for _ in range(int(rng.integers(8, 20))):
            words = [WORDS[i] for i in rng.integers(0, len(WORDS), int(rng.integers(3, 14)))]
            kind = int(rng.integers(0, 6))
            if kind == 0:
                lines.append("    " + words[0] + "(" + ", ".join(words[1:3]) + ")  # " + str(int(rng.integers(0, 10**6))))
            elif kind == 1:
                lines.append("")
            elif kind == 2:
                lines.append("\t" + "  ".join(words) + ".")
            else:
                lines.append(" ".join(words).capitalize() + rng.choice([".", ",", "?", ":", " --"]))
        extra = ["café naïve Zürich", "東京 データ", "🙂 <s> </s> <unk>", "x = [1, 22, 333]"][d % 4]
        docs.append((" " if d % 5 == 0 else "") + "\n".join(lines) + "\n" + extra + ("\n" if d % 3 else ""))
    return docs


def cmd_sp_corpus(work, vocab):
    texts = os.path.join(work, "texts")
    os.makedirs(texts, exist_ok=True)
    for i, doc in enumerate(corpus_documents()):
        with open(os.path.join(texts, f"doc{i:03d}.txt"), "w", encoding="utf-8") as f:
            f.write(doc)
    done = subprocess.run([sys.executable, os.path.join(REPO, "tools/prepare_data.py"), "text", "--inputs",
                           os.path.join(texts, "*.txt"), "--out", os.path.join(work, "data"), "--name", "tiny",
                           "--tokenizer", "sentencepiece", "--vocab-size", vocab, "--val-fraction", "0.2",
                           "--quiet"], capture_output=True, text=True)
    if done.returncode != 0:
        fail(f"prepare_data.py exited with {done.returncode}:\n{done.stderr[-3000:]}")
    print(json.dumps({"documents": len(os.listdir(texts))}))


def corpus_spans(data):
    """Each document's ids as the shards hold them, by document key: val documents (tokenizer.json's
    "val_documents") then train ones, each split in path order, each span starting at a separator."""
    with open(os.path.join(data, "tokenizer.json")) as f:
        meta = json.load(f)
    spans = {}
    for split in ("val", "train"):
        stream = np.concatenate([read_shard(os.path.join(data, s)) for s in meta["shards"] if f"_{split}_" in s])
        starts = list(np.flatnonzero(stream == meta["eot"])) + [len(stream)]
        spans[split] = [stream[a:b].tolist() for a, b in zip(starts[:-1], starts[1:])]
    return meta, spans


def load_fast_tokenizer_without_sentencepiece(path):
    """AutoTokenizer with sentencepiece and protobuf made unimportable: the export must not need them."""
    for name in ("sentencepiece", "google.protobuf"):
        sys.modules[name] = None
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(path, trust_remote_code=needs_custom_code(path))
    for name in ("sentencepiece", "google.protobuf"):
        del sys.modules[name]
    if not tok.is_fast:
        fail(f"{path}: transformers loaded a slow tokenizer ({type(tok).__name__})")
    return tok


def cmd_corpus_ids(path, data, texts):
    tok = load_fast_tokenizer_without_sentencepiece(path)
    meta, spans = corpus_spans(data)
    keys = sorted(os.listdir(texts))
    order = {"val": [k for k in keys if k in meta["val_documents"]], "train": [k for k in keys if k not in meta["val_documents"]]}
    checked = tokens = 0
    for split, names in order.items():
        if len(names) != len(spans[split]):
            fail(f"{split}: {len(names)} documents but {len(spans[split])} separators in the shards")
        for name, want in zip(names, spans[split]):
            with open(os.path.join(texts, name), encoding="utf-8") as f:
                text = f.read()
            got = tok(text)["input_ids"]  # transformers' default: special tokens on, the separator first
            if got != want:
                k = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
                fail(f"{name}: ids differ from the corpus's at {k}: {got[k:k + 6]} vs {want[k:k + 6]}")
            if tok(text, add_special_tokens=False)["input_ids"] != want[1:]:
                fail(f"{name}: without special tokens the ids are not the corpus's after its separator")
            if tok.decode(want[1:]) != text or tok(tok.decode(want[1:]))["input_ids"] != want:
                fail(f"{name}: decoding the corpus's ids and encoding again does not give them back")
            checked, tokens = checked + 1, tokens + len(want)
    print(json.dumps({"documents": checked, "tokens": tokens, "eot": meta["eot"]}))


def corpus_items(n=6):
    """Multiple-choice items from the corpus's documents: the first four words of a line as the
    question, its next three words as the right choice, those of other lines as the wrong ones."""
    lines = [line.split() for doc in corpus_documents() for line in doc.split("\n") if len(line.split()) >= 7]
    items = []
    for i in range(n):
        words = lines[3 * i]
        choices = [" ".join(words[4:7])] + [" ".join(lines[3 * i + k][4:7]) for k in (1, 2)]
        items.append({"question": " ".join(words[:4]), "choices": choices, "answer": 0})
    return items


def cmd_lm_eval_corpus(path, work, data):
    import sentencepiece as spm
    meta, _ = corpus_spans(data)
    sp = spm.SentencePieceProcessor(model_file=os.path.join(data, meta["model"]))
    items = corpus_items()
    os.makedirs(os.path.join(work, "tasks"), exist_ok=True)
    items_file = os.path.join(work, "items.jsonl")
    with open(items_file, "w") as f:
        for item in items:
            f.write(json.dumps(item) + "\n")
    with open(os.path.join(work, "tasks", "attnlab_local_mc.yaml"), "w") as f:
        f.write(TASK_YAML.format(data=items_file))
    results = os.path.join(work, "out", "lm_eval")
    lm_eval = os.path.join(os.path.dirname(sys.executable), "lm_eval")
    # docs/interop.md's command, as written there (the model and the task's place filled in).
    command = [lm_eval, "--model", "hf", "--model_args", f"pretrained={path},trust_remote_code=True,dtype=float32",
               "--tasks", "attnlab_local_mc", "--include_path", os.path.join(work, "tasks"), "--device", "cpu",
               "--batch_size", "16", "--output_path", results, "--log_samples"]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        fail(f"lm_eval exited with {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    samples = [json.loads(line) for root, _, files in os.walk(results) for name in files
               if name.startswith("samples_attnlab_local_mc") for line in open(os.path.join(root, name))]
    if len(samples) != len(items):
        fail(f"lm_eval logged {len(samples)} samples for {len(items)} items under {results}")

    model = load_exported(path)
    tok = load_fast_tokenizer_without_sentencepiece(path)
    requests, worst = [], 0.0
    for sample in samples:
        item = items[sample["doc_id"]]
        for choice, resp in zip(item["choices"], sample["resps"]):
            # The corpus's rule: a document is the separator, then SentencePiece's ids of its text.
            context = [meta["eot"]] + sp.encode(item["question"])
            whole = [meta["eot"]] + sp.encode(item["question"] + " " + choice)
            if tok(item["question"])["input_ids"] != context or tok(item["question"] + " " + choice)["input_ids"] != whole:
                fail(f"the exported tokenizer's ids for {item['question']!r} + {choice!r} are not the corpus's")
            got = float(resp[0][0] if isinstance(resp[0], list) else resp[0])
            with torch.no_grad():
                logprobs = torch.log_softmax(model(torch.tensor([whole])).logits[0].double(), dim=-1)
            direct = float(sum(logprobs[i - 1, whole[i]] for i in range(len(context), len(whole))))
            worst = max(worst, abs(got - direct))
            requests.append({"tokens": whole, "context": len(context), "lm_eval": got, "transformers": direct})
    with open(os.path.join(work, "requests.json"), "w") as f:
        json.dump(requests, f)
    if worst > 1e-4:
        fail(f"lm_eval's log-likelihoods differ from transformers' by up to {worst} nats")
    print(json.dumps({"requests": len(requests), "max_lm_eval_vs_transformers": worst}))


def cmd_task_scores(path, work, tiktoken_file):
    """lm_eval on ITEMS (per-choice log-likelihoods, acc, acc_norm), and ITEMS converted by
    tools/task_convert.py with GPT-2 BPE (TIKTOKEN's ranks) into the task file attnlab's trainer scores."""
    samples, aggregate = run_lm_eval(path, work)
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
    import task_convert
    text = os.path.join(work, "items_text.jsonl")
    with open(text, "w") as f:
        for item in ITEMS:
            f.write(json.dumps({"context": item["question"], "choices": item["choices"], "gold": item["answer"]}) + "\n")
    tokenizer_json = os.path.join(work, "tokenizer.json")
    with open(tokenizer_json, "w") as f:
        json.dump({"tokenizer": "gpt2", "vocab_size": 50257, "eot": 50256, "model": os.path.abspath(tiktoken_file)}, f)
    task_file = os.path.join(work, "attnlab_local_mc.jsonl")
    task_convert.main(["text", "--input", text, "--tokenizer-json", tokenizer_json, "--out", task_file])
    results = aggregate["results"]["attnlab_local_mc"]
    print(json.dumps({"task_file": task_file, "loglikelihoods": [sample_loglikelihoods(s) for s in samples],
                      "acc": results["acc,none"], "acc_norm": results["acc_norm,none"]}))


def main(argv):
    command, args = argv[0], argv[1:]
    if command == "models":
        cmd_models(*args)
    elif command == "series":
        cmd_series(*args)
    elif command == "loss":
        cmd_loss(args[0], int(args[1]), int(args[2]), args[3:])
    elif command == "generate":
        cmd_generate(args)
    elif command == "tokenizer":
        cmd_tokenizer(*args)
    elif command == "safetensors":
        cmd_safetensors(*args)
    elif command == "lm-eval":
        cmd_lm_eval(*args)
    elif command == "sp-corpus":
        cmd_sp_corpus(*args)
    elif command == "corpus-ids":
        cmd_corpus_ids(*args)
    elif command == "lm-eval-corpus":
        cmd_lm_eval_corpus(*args)
    elif command == "task-scores":
        cmd_task_scores(*args)
    else:
        fail(f"unknown command {command}")


if __name__ == "__main__":
    warm_up_vector_math()
    main(sys.argv[1:])
