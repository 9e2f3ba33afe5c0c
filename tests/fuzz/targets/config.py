"""Run configs (attnlab::load_run_config), judged against docs/config.md's rules restated here.

The seed is the full resolved form of a small valid config (every key on its own line, so it holds
whatever keys the build knows). Mutations with a known answer: a key written twice (refused, naming
it), an integer in any spelling (YAML 1.2: decimal, 0o, 0x; never octal), a float (finite or
refused), a string (valid UTF-8 without control characters, or refused), a list where a scalar
belongs, a misspelt key. Byte-level mutations (of one value, or anywhere) have no known answer: they must not crash or hang,
and whatever is accepted must obey the documented ranges and read back from the resolved YAML
(the driver checks that).
"""
from __future__ import annotations

import math
import random
import re
from pathlib import Path

from .common import Case, mutate_bytes

ANY = "*"  # must_refuse: any refusal will do (a parse error is as good as a range check)
INT64 = (-(2**63), 2**63 - 1)
UINT64 = (0, 2**64 - 1)
UNSIGNED_KEYS = {"seed"}

MINIMAL = """model: {arm: baseline, n_layer: 2, n_head: 2, d_model: 64, block_size: 64, vocab_size: 256}
data: {train: 'x_train_*.bin', val: 'x_val_*.bin', val_tokens: 1024}
train: {batch_size: 2, seq_len: 32, max_steps: 20}
optim: {warmup_steps: 5}
"""

INT_TEXTS = ["010", "0100", "08", "007", "+7", "-0", "0", "00", "0x1F", "0o17", "0o8", "0x", "1e3", "1.0", "1_000",
             "9223372036854775807", "9223372036854775808", "-9223372036854775808", "-9223372036854775809",
             "18446744073709551615", "18446744073709551616", "4294967296", "0b101", "~", "null", ".inf", "true",
             "-1", "0x7FFFFFFFFFFFFFFF", "0x8000000000000000", "0o777777777777777777777"]
FLOAT_TEXTS = [".inf", "-.inf", "+.inf", ".Inf", ".INF", ".nan", ".NaN", ".NAN", "inf", "nan", "1e400", "-1e400",
               "1e-400", "5e-324", "010", "0x10", "1_0.5", "3e-4", "0.0003", "1.", ".5", "+.5", "-0.0", "1e+2",
               "1E2", "~", "0.1", "0.95", "1", "0"]
# (YAML text, the bytes it denotes); corrupt ones must be refused.
STRING_TEXTS = [(b'"\\xff"', "\u00ff".encode()), (b"a\xffb", b"a\xffb"), (b"\xc3", b"\xc3"),
                (b"\xed\xa0\x80", b"\xed\xa0\x80"), (b"\xf4\x90\x80\x80", b"\xf4\x90\x80\x80"), (b"\xc0\xaf", b"\xc0\xaf"),
                (b'"a\\x01"', b"a\x01"), (b'"a\\0b"', b"a\x00b"), (b'"tab\\there"', b"tab\there"), (b'"a\\nb"', b"a\nb"),
                (b'"\\u00e9t\\u00e9"', "\u00e9t\u00e9".encode()), (b"\xc3\xa9t\xc3\xa9", "\u00e9t\u00e9".encode()),
                (b'"\\U0001F600"', "\U0001F600".encode()), (b'"\\ud800"', None), (b"'it''s'", b"it's"),
                (b"a\x01b", b"a\x01b"), (b'"\x7f"', b"\x7f")]
SNIPPETS = [b":", b": ", b"\n", b"{", b"}", b"[", b"]", b"&a ", b"*a", b"!!str ", b"!!int ", b"- ", b"#", b"\t",
            b"\xff", b"\x00", b"? ", b"|", b">", b"'", b'"', b"%YAML 1.1\n---\n", b"---\n", b"...\n", b"010",
            b"0x10", b".inf", b".nan", b"9223372036854775807", b"4294967296", b"-1", b"~", b"<<: *a\n",
            b"include: [x.yaml]\n", b"include: [.]\n", b"  ", b",", b"\\", b"\xc3", b"\xe2\x80\xa8"]

YAML12_INT = [(re.compile(r"^[-+]?[0-9]+$"), 10, 0), (re.compile(r"^0x[0-9a-fA-F]+$"), 16, 2),
              (re.compile(r"^0o[0-7]+$"), 8, 2)]
YAML12_FLOAT = re.compile(r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$")
YAML_INF_NAN = re.compile(r"^([-+]?\.(inf|Inf|INF)|\.(nan|NaN|NAN))$")


def flatten(tree: dict, prefix: str = ""):
    for key, value in tree.items():
        if isinstance(value, dict):
            yield from flatten(value, prefix + key + ".")
        else:
            yield prefix + key, value


def lookup(tree: dict, path: str):
    for part in path.split("."):
        tree = tree[part]
    return tree


def scalar_text(value) -> bytes:
    if isinstance(value, bool):
        return b"true" if value else b"false"
    if isinstance(value, int):
        return str(value).encode()
    if isinstance(value, float):
        return repr(value).encode()
    import json
    return json.dumps(value).encode()  # a JSON string is a YAML double-quoted scalar


def block_lines(tree: dict, depth: int = 0, prefix: str = "") -> list[dict]:
    """One line per key: {indent, key, value (bytes, None for a section), path, top}."""
    lines = []
    for key, value in tree.items():
        path = prefix + key
        if isinstance(value, dict):
            lines.append({"indent": depth, "key": key, "value": None, "path": path})
            lines += block_lines(value, depth + 2, path + ".")
        else:
            lines.append({"indent": depth, "key": key, "value": scalar_text(value), "path": path, "seed": value})
    return lines


def render(lines: list[dict]) -> bytes:
    out = b""
    for line in lines:
        out += b" " * line["indent"] + line["key"].encode() + b":"
        out += (b" " + line["value"] if line["value"] is not None else b"") + b"\n"
    return out


def expected_int(text: str):
    """The value YAML 1.2 gives `text` as an integer, or None when it is not one."""
    for pattern, base, skip in YAML12_INT:
        if pattern.match(text):
            return int(text[skip:] if skip else text, base)
    return None


def problems_of(s: dict) -> list[str]:
    """docs/config.md's rules, restated independently of the C++ checks."""
    bad = []
    for path, value in flatten(s):
        if path.startswith("_"):
            continue
        if isinstance(value, float) and not math.isfinite(value):
            bad.append(f"{path} = {value} is not finite")
        if isinstance(value, str):
            if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in value):
                bad.append(f"{path} holds a control character")
    m, t, o, d, c = s["model"], s["train"], s["optim"], s["data"], s["checkpoint"]
    for key in ("n_layer", "n_head", "d_model", "block_size", "vocab_size"):
        if m[key] <= 0:
            bad.append(f"model.{key} = {m[key]} is not positive")
    if m["n_head"] > 0 and m["d_model"] % m["n_head"]:
        bad.append("model.d_model is not divisible by model.n_head")
    micro = t["batch_size"] * t["seq_len"]
    per_step = t["tokens_per_step"] or micro
    if t["batch_size"] <= 0 or t["seq_len"] <= 0 or t["seq_len"] > m["block_size"]:
        bad.append("train.batch_size / train.seq_len out of range")
    if micro >= 2**63 or t["tokens_per_step"] < 0 or per_step % max(micro, 1):
        bad.append("train.tokens_per_step is not a multiple of batch_size * seq_len within 64 bits")
    if t["max_steps"] < 0 or t["token_budget"] < 0 or (t["max_steps"] == 0 and t["token_budget"] == 0):
        bad.append("no budget")
    steps = t["max_steps"] if t["max_steps"] > 0 else -(-t["token_budget"] // max(per_step, 1))
    if s["_total_steps"] != steps:
        bad.append(f"total_steps {s['_total_steps']} != {steps}")
    if steps * per_step >= 2**63:
        bad.append("the run's tokens overflow 64 bits")
    if d["val_tokens"] <= t["seq_len"]:
        bad.append("data.val_tokens is shorter than one sequence")
    if not (o["lr"] > 0 and 0 <= o["min_lr_ratio"] <= 1 and o["warmup_steps"] >= 0 and o["weight_decay"] >= 0
            and 0 <= o["beta1"] < 1 and 0 <= o["beta2"] < 1 and o["eps"] > 0 and o["grad_clip"] >= 0):
        bad.append("an optim.* value out of range")
    if o["warmup_steps"] >= steps and not s["_warnings"]:
        bad.append("a warm-up not shorter than the run without a warning")
    if not (0 <= t["threads"] <= 1024 and t["log_every"] > 0 and s["eval"]["every"] > 0):
        bad.append("train.threads / train.log_every / eval.every out of range")
    if not (c["every"] > 0 and c["keep_last"] >= 1 and 1 <= c["log_spaced_until"] < 2**62 and c["keep_every"] >= 0):
        bad.append("a checkpoint.* value out of range")
    a = s["track"]["activations"]
    if not (a["every"] >= 0 and a["sequences"] > 0 and a["top_k"] > 0 and a["massive_max"] >= 0
            and a["massive_ratio"] >= 1):
        bad.append("a track.activations.* value out of range")
    return bad


class Target:
    def __init__(self, run, workdir: Path):
        workdir.mkdir(parents=True)
        seed = workdir / "seed.yaml"
        seed.write_text(MINIMAL)
        verdict = run([str(seed)])[str(seed)]
        if verdict.kind != "accepted":
            raise RuntimeError(f"the config seed is refused: {verdict.kind}: {verdict.error}")
        self.schema = {k: v for k, v in verdict.summary.items() if not k.startswith("_")}
        self.lines = block_lines(self.schema)

    # -- mutations with a known answer -------------------------------------------------------------
    @staticmethod
    def _leaf(rng: random.Random, lines: list[dict], kind=None) -> int:
        """A random line holding a value (of Python type `kind` in the seed, when given)."""
        return rng.choice([k for k, line in enumerate(lines) if line["value"] is not None
                           and (kind is None or type(line["seed"]) is kind)])

    def _int(self, rng, lines, case):
        i = self._leaf(rng, lines, int)
        path = lines[i]["path"]
        text = rng.choice(INT_TEXTS + [("0" * rng.randint(1, 3)) + str(rng.randint(0, 10**6))])
        lines[i]["value"] = text.encode()
        case.mutation = f"int {path}={text}"
        value = expected_int(text)
        lo, hi = UINT64 if path in UNSIGNED_KEYS else INT64
        if value is None or not lo <= value <= hi:
            case.must_refuse = ANY
        else:
            case.check = lambda s: None if lookup(s, path) == value else f"{path}: '{text}' read as {lookup(s, path)}, not {value}"

    def _float(self, rng, lines, case):
        i = self._leaf(rng, lines, float)
        path = lines[i]["path"]
        text = rng.choice(FLOAT_TEXTS + [repr(rng.uniform(0, 1)), f"{rng.random():.{rng.randint(1, 20)}e}"])
        lines[i]["value"] = text.encode()
        case.mutation = f"float {path}={text}"
        if YAML_INF_NAN.match(text):
            case.must_refuse = "must be a finite number"
        elif YAML12_FLOAT.match(text) and math.isfinite(float(text)):
            value = float(text)
            case.check = lambda s: None if lookup(s, path) == value else f"{path}: '{text}' read as {lookup(s, path)!r}"
        else:
            case.must_refuse = ANY  # not a YAML 1.2 float, or beyond a double

    def _string(self, rng, lines, case):
        i = self._leaf(rng, lines, str)
        path = lines[i]["path"]
        text, denoted = rng.choice(STRING_TEXTS)
        lines[i]["value"] = text
        case.mutation = f"string {path}={text!r}"
        try:
            value = denoted.decode("utf-8") if denoted is not None else None
        except UnicodeDecodeError:
            value = None
        if denoted is None or value is None or any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in value):
            case.must_refuse = ANY
        else:
            case.check = lambda s: None if lookup(s, path) == value else f"{path}: {text!r} read as {lookup(s, path)!r}"

    def generate(self, rng: random.Random, path: Path) -> Case:
        path.mkdir()
        lines = [dict(line) for line in self.lines]
        case = Case(str(path / "run.yaml"), "")
        top_level_dup = False
        kind = rng.choices(["dup_leaf", "dup_section", "int", "float", "string", "structure", "unknown", "value_bytes",
                            "bytes"], [10, 4, 15, 15, 10, 5, 5, 16, 20])[0]
        if kind == "dup_leaf":
            i = self._leaf(rng, lines)
            copy = dict(lines[i])
            if rng.random() < 0.5:
                copy["value"] = rng.choice([b"1", b"0.5", b"x", b"true"])
            lines.insert(i + 1, copy)  # right after: the same mapping
            top_level_dup = copy["indent"] == 0
            case.mutation, case.must_refuse = f"duplicate {copy['path']}", "duplicate key"
        elif kind == "dup_section":
            sections = [k for k, line in enumerate(lines) if line["value"] is None and line["indent"] == 0]
            i = rng.choice(sections)
            lines += [dict(lines[i]), dict(lines[i + 1])]
            case.mutation, case.must_refuse = f"duplicate section {lines[i]['path']}", "duplicate key"
        elif kind == "int":
            self._int(rng, lines, case)
        elif kind == "float":
            self._float(rng, lines, case)
        elif kind == "string":
            self._string(rng, lines, case)
        elif kind == "structure":
            i = self._leaf(rng, lines)
            key = lines[i]["path"]
            lines[i]["value"] = rng.choice([b"[1, 2]", b"{a: 1}", b"[]", b"{}"])
            case.mutation, case.must_refuse = f"structure at {key}", f"{key}: expected"
        elif kind == "value_bytes":  # no known answer: the ranges must hold if it is accepted
            i = self._leaf(rng, lines)
            lines[i]["value"], ops = mutate_bytes(rng, lines[i]["value"], SNIPPETS, rng.randint(1, 2))
            case.mutation = f"{ops} in {lines[i]['path']}"
        elif kind == "unknown":
            i = self._leaf(rng, lines)
            key = lines[i]["path"]
            lines[i]["key"] += rng.choice(["_", "s", "x"])
            case.mutation, case.must_refuse = f"misspelt {key}", "unknown key"
        text = render(lines)
        if kind == "bytes":
            text, case.mutation = mutate_bytes(rng, text, SNIPPETS, rng.randint(1, 4))
        elif kind != "dup_section" and not top_level_dup and rng.random() < 0.3:  # a split may part the two
            text = self._split_include(rng, text, path)
            case.mutation += " (through include)"
        Path(case.path).write_bytes(text)
        return case

    def _split_include(self, rng, text: bytes, path: Path) -> bytes:
        """Moves a run of whole top-level sections into tier.yaml, included by run.yaml."""
        blocks, current = [], b""
        for line in text.splitlines(keepends=True):
            if not line.startswith(b" ") and current:
                blocks.append(current)
                current = b""
            current += line
        blocks.append(current)
        cut = rng.randint(1, len(blocks))
        (path / "tier.yaml").write_bytes(b"".join(blocks[:cut]))
        return b"include: [tier.yaml]\n" + b"".join(blocks[cut:])

    def judge(self, case: Case, verdict) -> str | None:
        if verdict.kind == "refused":
            if case.must_refuse and case.must_refuse != ANY and case.must_refuse not in verdict.error:
                return f"refused, but the message lacks '{case.must_refuse}': {verdict.error}"
            return None
        if case.must_refuse:
            return "accepted a corrupted config silently"
        problems = problems_of(verdict.summary)
        if case.check:
            problem = case.check(verdict.summary)
            if problem:
                problems.append(problem)
        return "; ".join(problems) or None
