"""tools/prepare_data.py: shard layout, known token ids, SentencePiece round trip, the split.

Run by ctest (label unit) with the venv python: python -m unittest discover -s tests/unit -p 'test_*.py'.
Shards are read back with numpy, independently of the writer, in llm.c's layout.
"""
import glob
import hashlib
import json
import os
import sys
import tempfile
import unittest

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools"))
import prepare_data as pd  # noqa: E402

# Real text: the newest python3.X-doc installed (scripts/setup.sh installs the release's own).
PYDOC = (sorted(glob.glob("/usr/share/doc/python3.*-doc/html/_sources"),
                key=lambda p: [int(x) for x in p.split("python3.")[1].split("-")[0].split(".")]) or [""])[-1]
HAVE_GPT2 = os.path.isfile(pd.DEFAULT_GPT2_TIKTOKEN)
NO_GPT2 = f"no GPT-2 vocabulary at {pd.DEFAULT_GPT2_TIKTOKEN} (scripts/setup.sh fetches it)"


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def read_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def read_shard(path):
    raw = read_bytes(path)
    header = np.frombuffer(raw[:1024], dtype="<i4")
    assert header[0] == 20240520 and header[1] == 1, header[:3]
    assert len(raw) == 1024 + 2 * header[2], (len(raw), header[2])
    return np.frombuffer(raw[1024:], dtype="<u2").astype(np.int64)


def read_split(out, split):
    files = sorted(glob.glob(os.path.join(out, f"*_{split}_*.bin")))
    return np.concatenate([read_shard(f) for f in files]) if files else np.array([], np.int64)


def write_docs(root, docs):
    for name, text in docs.items():
        path = os.path.join(root, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)


def run_text(tmp, inputs, *extra):
    out = os.path.join(tmp, "out")
    pd.main(["text", "--inputs", *inputs, "--out", out, *extra])
    return out, read_json(os.path.join(out, "tokenizer.json"))


def gpt2_byte_chars():
    """GPT-2's printable stand-in for each byte in encoder.json/vocab.bpe: printable Latin-1 bytes
    stand for themselves, the other 68 take the code points 256, 257, ... in byte order."""
    kept = [b for b in range(256) if 33 <= b <= 126 or 161 <= b <= 172 or 174 <= b <= 255]
    others = [b for b in range(256) if b not in kept]
    return {**{b: chr(b) for b in kept}, **{b: chr(256 + i) for i, b in enumerate(others)}}


def write_data_gym_files(ranks, out_dir):
    """encoder.json and vocab.bpe that give `ranks`. tiktoken only concatenates each merge's two
    halves, so any split point of a token reproduces its rank."""
    chars = gpt2_byte_chars()
    text = {token: "".join(chars[b] for b in token) for token in ranks}
    encoder = {text[t]: r for t, r in ranks.items()}
    encoder["<|endoftext|>"] = pd.GPT2_EOT
    merges = [f"{text[t][:1]} {text[t][1:]}" for t, _ in sorted(ranks.items(), key=lambda kv: kv[1])
              if len(t) > 1]
    paths = os.path.join(out_dir, "encoder.json"), os.path.join(out_dir, "vocab.bpe")
    with open(paths[0], "w", encoding="utf-8") as f:
        json.dump(encoder, f)
    with open(paths[1], "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n" + "\n".join(merges) + "\n")
    return paths


class ShardFormat(unittest.TestCase):
    def test_header_and_tokens_match_llmc_layout(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "x_val_000000.bin")
            pd.write_shard(path, np.array([50256, 15496, 995, 0], np.uint16))
            raw = read_bytes(path)
            self.assertEqual(len(raw), 1024 + 8)
            self.assertEqual(raw[:12], (20240520).to_bytes(4, "little") + (1).to_bytes(4, "little")
                             + (4).to_bytes(4, "little"))
            self.assertEqual(raw[12:1024], bytes(1012))
            self.assertEqual(read_shard(path).tolist(), [50256, 15496, 995, 0])

    def test_writer_cuts_exact_shards_across_documents(self):
        with tempfile.TemporaryDirectory() as tmp:
            w = pd.ShardWriter(tmp, "d", 4, lambda i: "val" if i == 0 else "train")
            for doc in ([1, 2, 3], [4, 5, 6], [7, 8, 9, 10, 11]):
                w.add(np.array(doc, np.uint16))
            w.flush()
            names = [os.path.basename(p) for p, _, _ in w.written]
            self.assertEqual(names, ["d_val_000000.bin", "d_train_000001.bin", "d_train_000002.bin"])
            self.assertEqual([read_shard(p).tolist() for p, _, _ in w.written],
                             [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11]])


class KnownIds(unittest.TestCase):
    def test_bytes_ids_are_utf8_bytes_after_separator(self):
        with tempfile.TemporaryDirectory() as tmp:
            docs = {"a.txt": "Hello world", "b.txt": "naïve café", "c.txt": "x" * 200}
            write_docs(tmp, docs)
            out, meta = run_text(tmp, [os.path.join(tmp, "*.txt")], "--tokenizer", "bytes")
            self.assertEqual((meta["tokenizer"], meta["vocab_size"], meta["eot"]), ("bytes", 257, 256))
            stream = np.concatenate([read_split(out, "val"), read_split(out, "train")]).tolist()
            for text in docs.values():
                ids = [256] + list(text.encode("utf-8"))
                self.assertTrue(any(stream[i:i + len(ids)] == ids for i in range(len(stream))), text)
            self.assertEqual(pd.bytes_tokenizer().encode("Hello world"),
                             [72, 101, 108, 108, 111, 32, 119, 111, 114, 108, 100])

    @unittest.skipUnless(HAVE_GPT2, NO_GPT2)
    def test_gpt2_known_ids(self):
        tok = pd.gpt2_tokenizer(pd.gpt2_ranks(pd.DEFAULT_GPT2_TIKTOKEN, None, None))
        self.assertEqual(tok.encode("Hello world"), [15496, 995])
        self.assertEqual(tok.encode("The quick brown fox jumps over the lazy dog."),
                         [464, 2068, 7586, 21831, 18045, 625, 262, 16931, 3290, 13])
        self.assertEqual((tok.vocab_size, tok.eot), (50257, 50256))

    @unittest.skipUnless(HAVE_GPT2, NO_GPT2)
    def test_gpt2_from_encoder_json_and_vocab_bpe(self):
        """The other route to GPT-2 BPE: OpenAI's encoder.json + vocab.bpe, made here from the ranks."""
        ranks = pd.gpt2_ranks(pd.DEFAULT_GPT2_TIKTOKEN, None, None)
        with tempfile.TemporaryDirectory() as tmp:
            encoder, vocab = write_data_gym_files(ranks, tmp)
            tok = pd.gpt2_tokenizer(pd.gpt2_ranks(None, encoder, vocab))
            self.assertEqual(tok.encode("Hello world"), [15496, 995])

    @unittest.skipUnless(HAVE_GPT2, NO_GPT2)
    def test_gpt2_shards_hold_known_ids(self):
        with tempfile.TemporaryDirectory() as tmp:
            write_docs(tmp, {"a.txt": "Hello world", "b.txt": "Hello world"})
            out, meta = run_text(tmp, [os.path.join(tmp, "*.txt")], "--tokenizer", "gpt2",
                                 "--gpt2-tiktoken", pd.DEFAULT_GPT2_TIKTOKEN)
            self.assertEqual((meta["tokenizer"], meta["vocab_size"], meta["model"]), ("gpt2", 50257, None))
            self.assertEqual(read_split(out, "val").tolist(), [50256, 15496, 995])
            self.assertEqual(read_split(out, "train").tolist(), [50256, 15496, 995])


class HfTokenizer(unittest.TestCase):
    """--tokenizer hf: a saved transformers tokenizer (here a word-level one made in-process, offline)."""

    def test_shards_hold_the_tokenizers_ids_and_the_models_vocab_size(self):
        from tokenizers import Tokenizer as RawTokenizer
        from tokenizers.models import WordLevel
        from tokenizers.pre_tokenizers import Whitespace
        from transformers import PreTrainedTokenizerFast
        vocab = {"<eot>": 0, "[UNK]": 1, "hello": 2, "world": 3, "again": 4}
        raw = RawTokenizer(WordLevel(vocab, unk_token="[UNK]"))
        raw.pre_tokenizer = Whitespace()
        with tempfile.TemporaryDirectory() as tmp:
            saved = os.path.join(tmp, "tok")
            PreTrainedTokenizerFast(tokenizer_object=raw, eos_token="<eot>", unk_token="[UNK]").save_pretrained(saved)
            with open(os.path.join(saved, "config.json"), "w") as f:
                json.dump({"vocab_size": 64}, f)  # the model's embedding is larger than the tokenizer
            write_docs(tmp, {"docs/a.txt": "hello world", "docs/b.txt": "world hello again"})
            out, meta = run_text(tmp, [os.path.join(tmp, "docs", "*.txt")], "--tokenizer", "hf",
                                 "--hf-tokenizer", saved)
            self.assertEqual((meta["tokenizer"], meta["vocab_size"], meta["eot"]), ("hf", 64, 0))
            stream = sorted([read_split(out, "val").tolist(), read_split(out, "train").tolist()])
            self.assertEqual(stream, [[0, 2, 3], [0, 3, 2, 4]])

    def test_hf_needs_a_directory(self):
        with tempfile.TemporaryDirectory() as tmp:
            write_docs(tmp, {"a.txt": "x", "b.txt": "y"})
            with self.assertRaises(SystemExit):
                run_text(tmp, [os.path.join(tmp, "*.txt")], "--tokenizer", "hf")


@unittest.skipUnless(os.path.isdir(PYDOC), "no /usr/share/doc/python3.*-doc (the Debian package python3.X-doc)")
class SentencePiece(unittest.TestCase):
    def test_round_trip_on_unseen_real_text(self):
        with tempfile.TemporaryDirectory() as tmp:
            out, meta = run_text(tmp, [os.path.join(PYDOC, "tutorial", "*.rst.txt")],
                                 "--vocab-size", "600", "--val-fraction", "0.1")
            self.assertEqual((meta["tokenizer"], meta["vocab_size"], meta["eot"]), ("sentencepiece", 600, 1))
            model = os.path.join(out, meta["model"])
            import sentencepiece as spm
            sp = spm.SentencePieceProcessor(model_file=model)
            val_docs = [os.path.join(PYDOC, "tutorial", k) for k in meta["val_documents"]]
            for path in val_docs:  # the tokenizer never saw these
                text = read_bytes(path).decode("utf-8")
                self.assertEqual(sp.decode(sp.encode(text)), text, path)
            stream = read_split(out, "val")
            self.assertLess(stream.max(), 600)
            docs = np.split(stream, np.flatnonzero(stream == 1))[1:]  # <s> before every document
            self.assertEqual(len(docs), len(val_docs))
            self.assertEqual(sp.decode(docs[0][1:].tolist()), read_bytes(val_docs[0]).decode("utf-8"))


class Split(unittest.TestCase):
    DOCS = {f"part{i // 10}/doc{i:02d}.txt": f"document {i} " * (10 + 7 * i) for i in range(40)}

    def test_document_level_and_deterministic(self):
        with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
            write_docs(a, self.DOCS)
            write_docs(b, self.DOCS)  # another place: keys are relative, so the split is the same
            out_a, meta_a = run_text(a, [os.path.join(a, "**", "*.txt")], "--tokenizer", "bytes")
            out_b, meta_b = run_text(b, [os.path.join(b, "part*", "*.txt")], "--tokenizer", "bytes")
            self.assertEqual(meta_a["val_documents"], meta_b["val_documents"])
            digest = lambda out: [hashlib.sha256(read_bytes(f)).hexdigest()
                                  for f in sorted(glob.glob(os.path.join(out, "*.bin")))]
            self.assertEqual(digest(out_a), digest(out_b))
            val = set(meta_a["val_documents"])
            self.assertTrue(0 < len(val) < len(self.DOCS))
            share = meta_a["characters"]["val"] / sum(len(t) for t in self.DOCS.values())
            self.assertGreaterEqual(share, 0.05)
            self.assertLess(share, 0.15)
            # every document sits whole in exactly one split
            val_text = bytes(read_split(out_a, "val")[read_split(out_a, "val") != 256].astype(np.uint8))
            for key, text in self.DOCS.items():
                self.assertEqual(text.encode() in val_text, key in val, key)

    def test_inputs_matching_nothing_is_an_error(self):
        with tempfile.TemporaryDirectory() as tmp:
            with self.assertRaises(SystemExit) as e:
                run_text(tmp, [os.path.join(tmp, "none*.txt")], "--tokenizer", "bytes")
            self.assertIn("none*.txt", str(e.exception))


@unittest.skipUnless(HAVE_GPT2, NO_GPT2)
class FineWeb(unittest.TestCase):
    """The fineweb command with its dataset replaced by a few records shaped like FineWeb-Edu's."""

    def test_first_shard_is_val_with_llmc_names(self):
        records = [{"text": "Hello world"}, {"text": "The quick brown fox jumps over the lazy dog."},
                   {"text": "Hello world"}]
        with tempfile.TemporaryDirectory() as tmp:
            args = pd.parser().parse_args(["fineweb", "--out", tmp, "--shard-size", "5",
                                           "--gpt2-tiktoken", pd.DEFAULT_GPT2_TIKTOKEN])
            pd.cmd_fineweb(args, documents=records)
            names = sorted(os.path.basename(p) for p in glob.glob(os.path.join(tmp, "*.bin")))
            self.assertEqual(names, ["edu_fineweb_train_000001.bin", "edu_fineweb_train_000002.bin",
                                     "edu_fineweb_train_000003.bin", "edu_fineweb_val_000000.bin"])
            self.assertEqual(read_split(tmp, "val").tolist(), [50256, 15496, 995, 50256, 464])
            stream = np.concatenate([read_split(tmp, "val"), read_split(tmp, "train")]).tolist()
            self.assertEqual(stream, [50256, 15496, 995, 50256, 464, 2068, 7586, 21831, 18045, 625, 262,
                                      16931, 3290, 13, 50256, 15496, 995])
            meta = read_json(os.path.join(tmp, "tokenizer.json"))
            self.assertEqual((meta["tokenizer"], meta["vocab_size"], meta["eot"]), ("gpt2", 50257, 50256))


if __name__ == "__main__":
    unittest.main()
