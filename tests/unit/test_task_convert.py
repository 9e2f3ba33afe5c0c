"""tools/task_convert.py: public task lines -> eval.tasks' token-id items (docs/downstream.md).

Hand-made lines in HellaSwag's, PIQA's and the text shape, tokenized with the UTF-8 bytes tokenizer,
so every expected id is the byte of a character written out below; lm-eval's pair encoding (the
delimiter, trailing spaces moved to the choice, an empty context as end-of-text) and its acc_norm
lengths; the refusals.
"""
import json
import os
import struct
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools"))
import task_convert  # noqa: E402


def ids(text):
    return list(text.encode("utf-8"))


class TaskConvertTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name
        self.tok = self.write("tokenizer.json", json.dumps({"tokenizer": "bytes", "vocab_size": 257, "eot": 256,
                                                            "model": None}))

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, name, text):
        path = os.path.join(self.dir, name)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        return path

    def run_convert(self, fmt, lines, *extra):
        src = self.write("in.jsonl", "".join(json.dumps(line) + "\n" for line in lines))
        out = os.path.join(self.dir, "out.jsonl")
        task_convert.main([fmt, "--input", src, "--tokenizer-json", self.tok, "--out", out, *extra])
        with open(out, encoding="utf-8") as f:
            return [json.loads(line) for line in f]

    def refusal(self, fmt, lines, *extra):
        with self.assertRaises(SystemExit) as e:
            self.run_convert(fmt, lines, *extra)
        return str(e.exception)

    def test_hellaswag_line_as_lm_eval_preprocesses_it(self):
        line = {"ind": 4, "activity_label": "Baking", "ctx_a": "She mixes flour.", "ctx_b": "then she",
                "ctx": "ignored", "endings": ["bakes it [title] well.", "sings  loudly.", "x", "y"], "label": "1",
                "split": "val", "split_type": "indomain", "source_id": "s"}
        [item] = self.run_convert("hellaswag", [line])
        # query "Baking: She mixes flour. Then she"; endings with " [title]" -> ". " and double spaces single
        self.assertEqual(item["context"], ids("Baking: She mixes flour. Then she"))
        self.assertEqual(item["choices"], [ids(" bakes it. well."), ids(" sings loudly."), ids(" x"), ids(" y")])
        self.assertEqual(item["choice_chars"], [len("bakes it. well."), len("sings loudly."), 1, 1])
        self.assertEqual(item["gold"], 1)
        self.assertEqual(set(item), {"context", "choices", "choice_chars", "gold"})

    def test_piqa_lines_take_their_labels_file(self):
        lines = [{"goal": "Open a jar", "sol1": "twist the lid", "sol2": "pull the lid"},
                 {"goal": "Dry a cup", "sol1": "wet it", "sol2": "wipe it"}]
        labels = self.write("labels.lst", "0\n1\n")
        items = self.run_convert("piqa", lines, "--labels", labels)
        self.assertEqual(items[0]["context"], ids("Question: Open a jar\nAnswer:"))
        self.assertEqual(items[0]["choices"], [ids(" twist the lid"), ids(" pull the lid")])
        self.assertEqual([i["gold"] for i in items], [0, 1])
        self.assertEqual(items[1]["choice_chars"], [6, 7])
        self.assertIn("one label (0 or 1) per item: 1 lines for 2 items",
                      self.refusal("piqa", lines, "--labels", self.write("short.lst", "0\n")))
        self.assertIn("needs --labels", self.refusal("piqa", lines))

    def test_text_items_move_trailing_spaces_and_an_empty_context_is_end_of_text(self):
        items = self.run_convert("text", [{"context": "a b ", "choices": ["c", "dd"], "gold": 1},
                                          {"context": "", "choices": ["e", "f"], "gold": 0}], "--limit", "2")
        self.assertEqual(items[0]["context"], ids("a b"))  # the trailing space goes with the choice
        self.assertEqual(items[0]["choices"], [ids("  c"), ids("  dd")])
        self.assertEqual(items[0]["choice_chars"], [1, 2])
        self.assertEqual(items[1]["context"], [256])
        self.assertEqual(items[1]["choices"], [ids(" e"), ids(" f")])
        [only] = self.run_convert("text", [{"context": "q", "choices": ["r", "s"], "gold": 0}] * 3, "--limit", "1",
                                  "--delimiter", "")
        self.assertEqual(only["choices"], [ids("r"), ids("s")])

    def test_refusals_name_the_line(self):
        self.assertIn("in.jsonl line 1: gold 2 is not the index",
                      self.refusal("text", [{"context": "a", "choices": ["b", "c"], "gold": 2}]))
        self.assertIn("at least two non-empty choice strings",
                      self.refusal("text", [{"context": "a", "choices": ["b"], "gold": 0}]))
        self.assertIn("exactly the keys context, choices, gold",
                      self.refusal("text", [{"context": "a", "choices": ["b", "c"], "gold": 0, "x": 1}]))
        self.assertIn("not a HellaSwag line", self.refusal("hellaswag", [{"ctx": "a"}]))
        self.assertIn("greedy match of its last word", self.refusal("lambada", [{"text": "a b"}]))
        self.assertIn("holds no item", self.refusal("text", []))

    def shard(self, documents, name="val.bin", header=None):
        """A prepare_data.py shard of `documents` (texts, bytes tokens), the separator 256 before each."""
        tokens = []
        for d in documents:
            tokens += [256] + ids(d)
        head = [0] * 256
        head[:3] = header or [20240520, 1, len(tokens)]
        path = os.path.join(self.dir, name)
        with open(path, "wb") as f:
            f.write(struct.pack("<256i", *head) + struct.pack(f"<{len(tokens)}H", *tokens))
        return path

    def run_corpus(self, path, *extra):
        out = os.path.join(self.dir, "corpus.jsonl")
        task_convert.main(["corpus", "--input", path, "--tokenizer-json", self.tok, "--out", out, *extra])
        with open(out, encoding="utf-8") as f:
            return [json.loads(line) for line in f]

    def test_corpus_items_are_windows_of_the_shards_documents(self):
        docs = ["abcdefghijklm", "nopqrstu", "vw"]
        items = self.run_corpus(self.shard(docs), "--context-tokens", "3", "--choice-tokens", "2", "--choices", "3",
                                "--seed", "5")
        # windows of 5 ids from each separator: "\x100abcd" "efghi" (13 + 1 ids: 2 windows), "\x100nopq" (9: 1)
        whole = [[256] + ids(docs[0]), [256] + ids(docs[1])]
        windows = [whole[0][0:5], whole[0][5:10], whole[1][0:5]]
        self.assertEqual(len(items), 3)
        for (window, donor_texts), item in zip([(windows[0], docs[1:]), (windows[1], docs[1:]), (windows[2], [docs[0], docs[2]])], items):
            self.assertEqual(item["context"], window[:3])
            self.assertEqual(item["choices"][item["gold"]], window[3:])
            self.assertEqual(len(item["choices"]), 3)
            for k, choice in enumerate(item["choices"]):
                self.assertEqual(item["choice_chars"][k], 2)
                if k != item["gold"]:  # a span of another document, its separator left out
                    self.assertTrue(any(bytes(choice).decode() in d for d in donor_texts), choice)
        self.assertEqual(items, self.run_corpus(self.shard(docs), "--context-tokens", "3", "--choice-tokens", "2",
                                                "--choices", "3", "--seed", "5"), "the seed fixes the draw")
        self.assertEqual(len(self.run_corpus(self.shard(docs), "--context-tokens", "3", "--choice-tokens", "2",
                                             "--limit", "1", "--choices", "2")), 1)

    def test_corpus_refuses_a_bad_shard_and_too_few_documents(self):
        def refusal(path, *extra):
            with self.assertRaises(SystemExit) as e:
                self.run_corpus(path, *extra)
            return str(e.exception)
        self.assertIn("not a token shard", refusal(self.shard(["abcdefgh"], header=[1, 1, 9])))
        self.assertIn("the header says 99 tokens, the file holds 9",
                      refusal(self.shard(["abcdefgh"], header=[20240520, 1, 99])))
        self.assertIn("0 windows of 12 tokens, 2 documents of over 2 tokens",
                      refusal(self.shard(["abcdefgh", "abc"]), "--context-tokens", "10", "--choice-tokens", "2"))
        self.assertIn("1 documents of over 2 tokens (2 needed",
                      refusal(self.shard(["abcdefgh", "a"]), "--context-tokens", "2", "--choice-tokens", "2",
                              "--choices", "2"))
        self.assertIn("--choices >= 2", refusal(self.shard(["abcdefgh"]), "--choices", "1"))

if __name__ == "__main__":
    unittest.main()
