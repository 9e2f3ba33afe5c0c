#!/usr/bin/env python3
"""Mutation fuzzing of attnlab's checkpoint readers (docs/checkpoints.md, "Fuzzing the readers").

A tiny run with checkpoints at steps 1 and 2 is made once (fuzz_checkpoint_reader make). Each
iteration copies it, damages the newest checkpoint, and asks the reader (fuzz_checkpoint_reader
serve) to resume from the run, or to load one model.safetensors alone or inside its checkpoint:

  raw        bytes of any file of step 2 flipped, set, inserted, cut, appended; a file emptied,
             deleted or swapped for step 1's
  sealed     a field of state.json, a safetensors header entry, a tensor value or the optimizer's
             metadata changed, then every checksum recomputed (as a buggy writer would leave it),
             so only the readers' field and restore checks stand between the damage and the model

A failure is a crash of the reader, a hang (no answer within --hang-seconds), an error other than
CheckpointError, a damaged step 2 accepted when the damage must be refused (silent acceptance),
a resume that does not fall back to the intact step 1, or a change that leaves step 2 valid
refused all the same. Failing inputs are kept under
--failures. Exit status 1 when any iteration failed.
"""
import argparse
import copy
import hashlib
import json
import os
import random
import select
import shutil
import struct
import subprocess
import sys
import tempfile
import time

MODEL, OPT, STATE, SIDECAR = "model.safetensors", "optimizer.safetensors", "state.json", "state.json.sha256"
NEWEST, OLDER = "checkpoints/step_000002", "checkpoints/step_000001"
DTYPE_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1}
SAME_SIZE = {"F32": ["I32"], "I64": ["F64"], "F64": ["I64"], "I32": ["F32"]}


# ---- safetensors and sealing ---------------------------------------------------------------------

def read_st(path):
    raw = open(path, "rb").read()
    n = struct.unpack_from("<Q", raw, 0)[0]
    return json.loads(raw[8:8 + n]), bytearray(raw[8 + n:])


def write_st(path, header, data):
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    open(path, "wb").write(struct.pack("<Q", len(text)) + text + bytes(data))


def tensors(header):
    return [k for k in header if k != "__metadata__"]


def reseal(ckpt, edit=None):
    """Recomputes the tensor files' records in state.json, applies `edit`, writes the sidecar."""
    state = json.load(open(os.path.join(ckpt, STATE)))
    for name in (MODEL, OPT):
        raw = open(os.path.join(ckpt, name), "rb").read()
        state["files"][name] = {"sha256": hashlib.sha256(raw).hexdigest(), "bytes": len(raw)}
    if edit:
        edit(state)
    text = json.dumps(state, indent=2) + "\n"
    open(os.path.join(ckpt, STATE), "w").write(text)
    open(os.path.join(ckpt, SIDECAR), "w").write(hashlib.sha256(text.encode()).hexdigest() + "  state.json\n")


# ---- mutations: each returns (description, must_refuse) or None when it does not apply -------------

def raw_mutation(rng, path):
    data = bytearray(open(path, "rb").read()) if os.path.exists(path) else None
    kind = rng.choice(["flip", "set", "insert", "cut", "append", "truncate", "empty", "delete"])
    if kind == "delete":
        os.remove(path)
        return f"raw: delete {os.path.basename(path)}", True
    if not data:
        return None
    at = rng.randrange(len(data))
    before = bytes(data)
    if kind == "flip":
        data[at] ^= 1 << rng.randrange(8)
    elif kind == "set":
        data[at] = rng.randrange(256)
    elif kind == "insert":
        data[at:at] = os.urandom(rng.randint(1, 16))
    elif kind == "cut":
        del data[at:at + rng.randint(1, 16)]
    elif kind == "append":
        data += os.urandom(rng.randint(1, 64))
    elif kind == "truncate":
        del data[at:]
    elif kind == "empty":
        data = bytearray()
    open(path, "wb").write(data)
    return f"raw: {kind} at byte {at} of {os.path.basename(path)}", bytes(data) != before


BAD_FIELDS = {
    "step": [-1, 1, 3, 2.0, "2", None, 2 ** 63, -2 ** 63, [], {}],
    "tokens_seen": [-1, 1, -2 ** 63, 1.5, "64", None, True],
    "data_position": [-1, -2 ** 63, 0.5, None, "2"],
    "val_loss": [-1.0, 3.0, "nan", [], {}, True],  # 3.0: best_val_loss 3.8 would lie above it
    "best_val_loss": [-0.5, 4.0, None, "x", []],
    "format": ["other", None, 1],
    "format_version": [0, 3, -1, "2", None, 2.5],
    "git_revision": [None, 5, []],
    "rng": [None, {}, [], {"cpu": "zz", "cuda": []}, {"cpu": "", "cuda": []}, {"cpu": "abc", "cuda": []}],
    "config": [None, [], "x", 1],
    "extra": [None, [], 3],
    "files": [None, [], {}],
}
BAD_MODEL = {"n_layer": [0, -1, 2, "1", None], "n_head": [0, 3, 4, -2], "d_model": [0, 31, 64, 1.5],
             "block_size": [0, -16, 32], "vocab_size": [0, 63, 65, -64], "arm": ["nope", "", "baseline", 3],
             "routing_gate": ["nope", 1, None]}
NEUTRAL_FIELDS = {"val_loss": [5.0, 3.8, None], "git_revision": ["elsewhere"], "extra": [{"note": "x"}],
                  "attnlab_version": ["0.0", None], "saved_at": ["yesterday"]}


def sealed_state_mutation(rng, ckpt):
    choice = rng.random()
    if choice < 0.5:
        field = rng.choice(list(BAD_FIELDS))
        value = copy.deepcopy(rng.choice(BAD_FIELDS[field]))
        reseal(ckpt, lambda s: s.__setitem__(field, value))
        return f"sealed: state.json {field} = {json.dumps(value)}", True
    if choice < 0.65:
        field = rng.choice(list(BAD_FIELDS))
        reseal(ckpt, lambda s: s.pop(field))
        return f"sealed: state.json without {field}", True
    if choice < 0.8:
        key = rng.choice(list(BAD_MODEL))
        value = rng.choice(BAD_MODEL[key])
        reseal(ckpt, lambda s: s["model"].__setitem__(key, value))
        return f"sealed: state.json model.{key} = {json.dumps(value)}", True
    if choice < 0.9:
        return rng_position_mutation(rng, ckpt)
    field = rng.choice(list(NEUTRAL_FIELDS))
    value = rng.choice(NEUTRAL_FIELDS[field])
    reseal(ckpt, lambda s: s.__setitem__(field, value))
    return f"sealed: state.json {field} = {json.dumps(value)} (valid)", False


def rng_position_mutation(rng, ckpt):
    """The CPU generator's mt19937 position: `left` (int32 at byte 8), `next` (uint64 at byte 16)."""
    left = rng.choice([rng.randint(-3, 700), rng.randint(-2 ** 31, 2 ** 31 - 1)])
    nxt = rng.choice([rng.randint(0, 700), rng.randint(0, 2 ** 64 - 1)])
    def edit(s):
        cpu = bytearray.fromhex(s["rng"]["cpu"])
        struct.pack_into("<iIQ", cpu, 8, left, struct.unpack_from("<I", cpu, 12)[0], nxt)
        s["rng"]["cpu"] = cpu.hex()
    reseal(ckpt, edit)
    invalid = left < 1 or nxt > 624 or nxt + left > 625
    return f"sealed: RNG mt19937 left {left}, next {nxt}", invalid


def header_mutation(rng, header, data):
    """Changes one tensor entry of a safetensors header (or its data); returns (text, must_refuse)."""
    name = rng.choice(tensors(header))
    entry = header[name]
    kind = rng.choice(["dtype_same_size", "dtype_other_size", "shape", "rename", "extra", "remove", "value",
                       "offsets"])
    if kind == "dtype_same_size":
        if entry["dtype"] not in SAME_SIZE:
            return None
        entry["dtype"] = rng.choice(SAME_SIZE[entry["dtype"]])
    elif kind == "dtype_other_size":
        entry["dtype"] = rng.choice([d for d in DTYPE_BYTES if DTYPE_BYTES[d] != DTYPE_BYTES[entry["dtype"]]])
    elif kind == "shape":
        numel = 1
        for d in entry["shape"]:
            numel *= d
        shapes = [[numel], [1, numel], [numel, 1]] + ([list(reversed(entry["shape"]))] if len(entry["shape"]) == 2 else [])
        shapes = [s for s in shapes if s != entry["shape"]]
        if not shapes:
            return None
        entry["shape"] = rng.choice(shapes)
    elif kind == "rename":
        header[name + rng.choice(["x", ".0", "_"])] = header.pop(name)
    elif kind == "extra":
        end = len(data)
        data += struct.pack("<4f", 0, 0, 0, 0)
        header[rng.choice(["extra", "exp_avg.extra", "h.9.attn.c_attn.weight", "wte.bias"])] = {
            "dtype": "F32", "shape": [4], "data_offsets": [end, end + 16]}
    elif kind == "remove":
        begin, end = entry["data_offsets"]
        del data[begin:end]
        del header[name]
        for other in tensors(header):
            b, e = header[other]["data_offsets"]
            if b >= end:
                header[other]["data_offsets"] = [b - (end - begin), e - (end - begin)]
    elif kind == "value":
        return value_mutation(rng, name, entry, data)
    elif kind == "offsets":
        b, e = entry["data_offsets"]
        delta = rng.choice([-4, -1, 1, 4, 8])
        entry["data_offsets"] = [b, e + delta] if rng.random() < 0.5 else [b + delta, e + delta]
    return f"{kind} of tensor '{name}'", True


def value_mutation(rng, name, entry, data):
    begin, end = entry["data_offsets"]
    if entry["dtype"] == "I64":  # an AdamW step count
        value = rng.choice([0, -1, -2 ** 63, 7, 2 ** 40])
        struct.pack_into("<q", data, begin, value)
        return f"value {value} in tensor '{name}'", value < 1
    if entry["dtype"] != "F32" or end == begin:
        return None
    at = begin + 4 * rng.randrange((end - begin) // 4)
    value = rng.choice([float("nan"), float("inf"), -float("inf"), -1.0, 123.0])
    struct.pack_into("<f", data, at, value)
    invalid = value != value or abs(value) == float("inf") or (value < 0 and name.startswith(("exp_avg_sq.", "max_exp_avg_sq.")))
    return f"value {value} in tensor '{name}'", invalid


def groups_mutation(rng, header):
    meta = header.setdefault("__metadata__", {})
    groups = json.loads(meta["attnlab.param_groups"])
    kind = rng.choice(["not_json", "swap", "lr_negative", "lr_string", "drop_group", "drop_key", "lr_valid"])
    if kind == "not_json":
        meta["attnlab.param_groups"] = "[{"
    elif kind == "swap":
        groups[0]["params"], groups[1]["params"] = groups[1]["params"], groups[0]["params"]
    elif kind == "lr_negative":
        groups[rng.randrange(2)]["lr"] = -1.0
    elif kind == "lr_string":
        groups[rng.randrange(2)]["lr"] = "fast"
    elif kind == "drop_group":
        groups.pop()
    elif kind == "drop_key":
        del meta["attnlab.param_groups"]
    elif kind == "lr_valid":
        groups[rng.randrange(2)]["lr"] = 0.5
    if kind not in ("not_json", "drop_key"):
        meta["attnlab.param_groups"] = json.dumps(groups)
    return f"param_groups {kind}", kind != "lr_valid"


def lone_metadata_mutation(rng, header):
    meta = header.setdefault("__metadata__", {})
    key, value = rng.choice([("attnlab.model", "{"), ("attnlab.model", "[]"), ("attnlab.model", '{"arm": "baseline"}'),
                             ("attnlab.step", "abc"), ("attnlab.step", "-1"), ("attnlab.step", "1e3"),
                             ("attnlab.config", "{")])
    meta[key] = value
    return f"metadata {key} = {value}", True


def sealed_tensor_mutation(rng, ckpt, lone=False):
    """A header, value or metadata change of a tensor file, resealed when in a checkpoint."""
    which = MODEL if lone or rng.random() < 0.5 else OPT
    path = os.path.join(ckpt, which) if not lone else ckpt
    header, data = read_st(path)
    if which == OPT and rng.random() < 0.25:
        result = groups_mutation(rng, header)
    elif lone and rng.random() < 0.2:
        result = lone_metadata_mutation(rng, header)
    else:
        result = header_mutation(rng, header, data)
    if result is None:
        return None
    write_st(path, header, data)
    if not lone:
        reseal(ckpt)
    text, must = result
    return f"sealed: {os.path.basename(path)} {text}", must


# ---- the reader ---------------------------------------------------------------------------------

class Reader:
    """fuzz_checkpoint_reader serve, restarted after a crash or a hang."""

    def __init__(self, driver):
        self.driver, self.proc = driver, None

    def ask(self, kind, path, timeout):
        if self.proc is None or self.proc.poll() is not None:
            self.proc = subprocess.Popen([self.driver, "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.DEVNULL, text=True, bufsize=1,
                                         encoding="utf-8", errors="backslashreplace")  # messages quote raw bytes
        try:
            self.proc.stdin.write(f"{kind} {path}\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            return self.crashed()
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            self.proc.kill()
            self.proc.wait()
            self.proc = None
            return "hang", ""
        line = self.proc.stdout.readline()
        if not line:
            return self.crashed()
        word, _, rest = line.rstrip("\n").partition(" ")
        return word, rest

    def crashed(self):
        code = self.proc.wait()
        self.proc = None
        return "crash", f"exit status {code}"

    def close(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait()


# ---- one iteration --------------------------------------------------------------------------------

def mutate(rng, base, work):
    """Copies the base run into `work` and damages it; returns (kind, path, description, must_refuse)."""
    run = os.path.join(work, "run")
    shutil.copytree(base, run)
    newest = os.path.join(run, NEWEST)
    mode = rng.choices(["run", "lone", "in_checkpoint"], weights=[6, 3, 1])[0]
    if mode == "lone":
        lone = os.path.join(work, "weights.safetensors")
        shutil.copy(os.path.join(newest, MODEL), lone)
        if rng.random() < 0.7:
            result = sealed_tensor_mutation(rng, lone, lone=True)
        else:
            text, _ = raw_mutation(rng, lone) or ("raw: none", False)
            result = (text, False)  # data bytes of a lone file carry no checksum: undetectable by design
        return ("lone", lone) + (result or ("none", False))
    if mode == "in_checkpoint":
        result = raw_mutation(rng, os.path.join(newest, MODEL))
        return ("lone", os.path.join(newest, MODEL)) + (result or ("none", False))
    descriptions, must = [], False
    if rng.random() < 0.6:  # sealed first: a raw change after it must still be caught by a checksum
        result = sealed_state_mutation(rng, newest) if rng.random() < 0.5 else sealed_tensor_mutation(rng, newest)
        if result:
            descriptions.append(result[0])
            must = must or result[1]
    if not descriptions or rng.random() < 0.3:
        if rng.random() < 0.1:
            for name in (STATE, SIDECAR):
                shutil.copy(os.path.join(run, OLDER, name), os.path.join(newest, name))
            result = ("raw: state.json and its sidecar swapped for step 1's", True)
        else:
            result = raw_mutation(rng, os.path.join(newest, rng.choice([MODEL, OPT, STATE, SIDECAR])))
        if result:
            descriptions.append(result[0])
            must = must or result[1]
    return "run", run, "; ".join(descriptions) or "none", must


def judge(kind, must_refuse, answer):
    """The failure an answer shows, or None."""
    word, rest = answer
    if word in ("crash", "hang"):
        return word
    if word == "unexpected":
        return "not a CheckpointError"
    if word not in ("accepted", "refused"):
        return f"unreadable answer {word!r}"
    if kind == "run":
        if word == "refused":
            return "no fallback to the intact step 1"
        if must_refuse and rest == "2":
            return "silent acceptance"
        if not must_refuse and rest != "2":
            return "a valid step 2 refused"
    elif must_refuse and word == "accepted":
        return "silent acceptance"
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--driver", required=True, help="the fuzz_checkpoint_reader program")
    parser.add_argument("--seconds", type=float, default=30, help="time budget (CI: 30; by hand: 3600 or more)")
    parser.add_argument("--seed", type=int, default=None, help="random seed (default: from the clock, printed)")
    parser.add_argument("--hang-seconds", type=float, default=60, help="an answer later than this is a hang")
    parser.add_argument("--failures", default=None, help="keep failing inputs here (default: a temp dir)")
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else int(time.time())
    rng = random.Random(seed)
    root = tempfile.mkdtemp(prefix="attnlab_fuzz_ckpt_")
    failures_dir = args.failures or os.path.join(root, "failures")
    reader = Reader(args.driver)
    counts = {"iterations": 0, "accepted": 0, "refused": 0}
    failures = []
    try:
        base = os.path.join(root, "base")
        subprocess.run([args.driver, "make", base], check=True)
        for kind, path in (("run", base), ("lone", os.path.join(base, NEWEST, MODEL))):
            answer = reader.ask(kind, path, args.hang_seconds)
            if answer != ("accepted", "2"):
                sys.exit(f"the undamaged run is not read back as step 2 ({kind}): {answer}")
        deadline = time.monotonic() + args.seconds
        while time.monotonic() < deadline:
            work = os.path.join(root, "work")
            shutil.rmtree(work, ignore_errors=True)
            os.makedirs(work)
            kind, path, description, must_refuse = mutate(rng, base, work)
            answer = reader.ask(kind, path, args.hang_seconds)
            counts["iterations"] += 1
            if answer[0] in ("accepted", "refused"):
                counts[answer[0]] += 1
            failure = judge(kind, must_refuse, answer)
            if failure:
                kept = os.path.join(failures_dir, f"{len(failures):04d}")
                shutil.copytree(work, kept)
                record = {"failure": failure, "kind": kind, "damage": description, "answer": " ".join(answer),
                          "path": os.path.relpath(path, work), "seed": seed}
                json.dump(record, open(os.path.join(kept, "failure.json"), "w"), indent=2)
                failures.append(record)
                print(f"FAIL {failure}: {description} -> {' '.join(answer)} (kept in {kept})", flush=True)
    finally:
        reader.close()
    by_type = {}
    for f in failures:
        by_type[f["failure"]] = by_type.get(f["failure"], 0) + 1
    print(f"fuzz_checkpoint: seed {seed}, {counts['iterations']} inputs in {args.seconds:.0f} s: "
          f"{counts['accepted']} accepted, {counts['refused']} refused; failures: {by_type or 0}")
    if not failures:
        shutil.rmtree(root, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
