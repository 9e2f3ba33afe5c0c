"""tools/text_codec.py: the stream `attnlab sample` prints through writes, id by id, exactly the text
that decoding all the ids at once gives (bytes split inside UTF-8 characters, invalid bytes, document
separators; GPT-2 BPE and SentencePiece pieces whose spacing depends on their neighbours), and a prompt
that is not UTF-8 is refused naming its byte instead of a traceback.

Run by ctest (label unit) with the venv python.
"""
import io
import os
import random
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools"))
import prepare_data as pd  # noqa: E402
import text_codec  # noqa: E402

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "tools", "text_codec.py")
TEXT = "The café’s naïve 🐍 sat on the mat.\n  Indented  line, 日本語, and more text. " * 3


class Recorder(io.StringIO):
    """stdout that counts the writes the stream flushed."""

    def __init__(self):
        super().__init__()
        self.flushes = 0

    def flush(self):
        self.flushes += 1


def streamed(tok, ids, eot):
    out = Recorder()
    text_codec.stream(tok, eot, [f"{i}\n" for i in ids], out)
    return out.getvalue(), out.flushes


class StreamEqualsDecode(unittest.TestCase):
    def check(self, tok, ids, eot):
        text, flushes = streamed(tok, ids, eot)
        self.assertEqual(text, text_codec.decode(tok, ids, eot))
        return flushes

    def test_bytes_split_characters_invalid_bytes_and_separators(self):
        tok = pd.bytes_tokenizer()
        ids = tok.encode(TEXT)
        self.assertGreater(self.check(tok, ids, tok.eot), len(ids) // 2)  # written as it comes
        rng = random.Random(5)
        for _ in range(200):  # any bytes, the separator among them
            self.check(tok, [rng.choice([rng.randrange(256), 0xE2, 0x82, 0xF0, 256]) for _ in range(40)], tok.eot)

    @unittest.skipUnless(os.path.isfile(pd.DEFAULT_GPT2_TIKTOKEN), "no GPT-2 vocabulary (scripts/setup.sh)")
    def test_gpt2_pieces(self):
        tok = pd.gpt2_tokenizer(pd.gpt2_ranks(pd.DEFAULT_GPT2_TIKTOKEN, None, None))
        ids = tok.encode(TEXT)
        self.check(tok, ids + [tok.eot] + ids[:7], tok.eot)

    def test_sentencepiece_pieces(self):
        with tempfile.TemporaryDirectory() as d:
            tok = pd.train_sentencepiece([TEXT] * 20, 320, os.path.join(d, "tokenizer.model"))
            ids = tok.encode(TEXT)
            self.check(tok, ids + [tok.eot] + ids[:9], tok.eot)


class Refusals(unittest.TestCase):
    def run_codec(self, *args):
        with tempfile.TemporaryDirectory() as d:
            return subprocess.run([sys.executable, SCRIPT, *args, "--out", os.path.join(d, "ids.json")],
                                  capture_output=True)

    def test_a_prompt_that_is_not_utf8_names_its_byte(self):
        r = self.run_codec("encode", "--tokenizer", "bytes", "--text=" + b"ab\xffc".decode("utf-8", "surrogateescape"))
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn(b"the prompt is not valid UTF-8: byte 2 (0xff) of 4", r.stderr)
        self.assertNotIn(b"Traceback", r.stderr)

    def test_stream_refuses_an_id_outside_the_vocabulary(self):
        r = subprocess.run([sys.executable, SCRIPT, "stream", "--tokenizer", "bytes"], input=b"65\n257\n",
                           capture_output=True)
        self.assertEqual(r.returncode, 1)
        self.assertEqual(r.stdout, b"A")
        self.assertIn(b"id 257 is outside the bytes vocabulary", r.stderr)


if __name__ == "__main__":
    unittest.main()
