"""tools/synthetic_bb.py and `prepare_data.py bb`: the Bigram-Backcopy rules checked by plain loops.

Run by ctest (label unit) with the venv python. Each rule of the task (Guo et al. 2024, section 2) is
checked on drawn documents by a loop over positions, the chain's law by an independent computation
(power iteration, a chi-square test of the drawn transitions), and the shards read back with numpy.
"""
import json
import os
import sys
import tempfile
import unittest

import numpy as np
from scipy import stats

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools"))
import prepare_data as pd  # noqa: E402
import synthetic_bb as bb  # noqa: E402


def power_iteration(p, steps=5000):
    pi = np.full(len(p), 1.0 / len(p))
    for _ in range(steps):
        pi = pi @ p
    return pi / pi.sum()


class Task(unittest.TestCase):
    def test_chain_and_triggers(self):
        task = bb.make_task(vocab=16, num_triggers=3, seed=4)
        np.testing.assert_allclose(task.transition.sum(axis=1), 1.0, rtol=0, atol=1e-12)
        np.testing.assert_allclose(task.stationary, power_iteration(task.transition), atol=1e-10)
        top = sorted(np.argsort(-power_iteration(task.transition))[:3].tolist())
        self.assertEqual(list(task.triggers), top)
        self.assertEqual(task.bos, 16)

    def test_refusals_name_the_parameter(self):
        for kwargs, word in (({"vocab": 1}, "vocab"), ({"num_triggers": 0}, "triggers"),
                             ({"num_triggers": 64}, "triggers"), ({"alpha": 0.0}, "alpha"),
                             ({"zipf": -1.0}, "zipf"), ({"bos_count": 0}, "bos_count"),
                             ({"doc_len": 2}, "doc_len"), ({"vocab": 65536}, "uint16")):
            with self.assertRaises(ValueError) as e:
                bb.make_task(**kwargs)
            self.assertIn(word, str(e.exception))


class Documents(unittest.TestCase):
    task = bb.make_task(vocab=12, num_triggers=2, alpha=0.5, bos_count=2, doc_len=40, seed=7)
    docs = bb.documents(task, 3000, stream_seed=1).astype(np.int64)

    def test_every_rule_holds_position_by_position(self):
        t, b = self.task, self.task.bos_count
        self.assertEqual(self.docs.shape, (3000, 40))
        for doc in self.docs[:500]:
            self.assertTrue(all(tok == t.bos for tok in doc[:b]))
            self.assertTrue(all(0 <= tok < t.vocab for tok in doc[b:]))  # BOS nowhere else
            self.assertNotIn(doc[b], t.triggers)  # a trigger always has a content token before it
            for i in range(b + 1, len(doc) - 1):
                if doc[i] in t.triggers:
                    self.assertEqual(doc[i + 1], doc[i - 1], (doc.tolist(), i))

    def test_free_transitions_follow_the_bigram_matrix(self):
        t, b = self.task, self.task.bos_count
        counts = np.zeros((t.vocab, t.vocab))
        for doc in self.docs:
            for i in range(b, len(doc) - 1):
                if doc[i] not in t.triggers:
                    counts[doc[i], doc[i + 1]] += 1
        for row in range(t.vocab):
            if row in t.triggers or counts[row].sum() < 500:
                continue
            expected = t.transition[row] * counts[row].sum()
            keep = expected >= 5  # the chi-square approximation's usual condition
            observed = counts[row][keep]
            _, p = stats.chisquare(observed, expected[keep] * observed.sum() / expected[keep].sum())
            self.assertGreater(p, 1e-4, f"row {row}")

    def test_pure_function_of_its_arguments(self):
        again = bb.documents(bb.make_task(vocab=12, num_triggers=2, alpha=0.5, bos_count=2, doc_len=40, seed=7),
                             3000, stream_seed=1)
        np.testing.assert_array_equal(again, self.docs)
        self.assertFalse(np.array_equal(bb.documents(self.task, 3000, stream_seed=2), self.docs))


class PrepareData(unittest.TestCase):
    def test_writes_shards_and_records_the_task(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "bb")
            pd.main(["bb", "--out", out, "--vocab", "10", "--triggers", "2", "--doc-len", "9",
                     "--train-docs", "20", "--val-docs", "3", "--seed", "5", "--shard-size", "100"])
            with open(os.path.join(out, "tokenizer.json"), encoding="utf-8") as f:
                meta = json.load(f)
            self.assertEqual((meta["tokenizer"], meta["vocab_size"], meta["eot"], meta["model"]),
                             ("synthetic", 11, 10, None))
            task = bb.make_task(vocab=10, num_triggers=2, doc_len=9, seed=5)
            self.assertEqual(meta["task"]["triggers"], list(task.triggers))
            tokens = {}
            for split in ("val", "train"):
                names = sorted(n for n in os.listdir(out) if f"_{split}_" in n)
                parts = []
                for name in names:
                    with open(os.path.join(out, name), "rb") as f:
                        raw = f.read()
                    header = np.frombuffer(raw[:1024], dtype="<i4")
                    self.assertEqual((header[0], header[1], len(raw)), (20240520, 1, 1024 + 2 * header[2]))
                    parts.append(np.frombuffer(raw[1024:], dtype="<u2"))
                tokens[split] = np.concatenate(parts)
            self.assertEqual(meta["shards"][0], "bb_val_000000.bin")  # val first, as llm.c's tools
            np.testing.assert_array_equal(tokens["val"], bb.documents(task, 3, 0).reshape(-1))
            np.testing.assert_array_equal(tokens["train"], bb.documents(task, 20, 1).reshape(-1))

    def test_the_loss_floor_docs_data_md_quotes(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "bb")
            pd.main(["bb", "--out", out, "--quiet", "--train-docs", "1"])  # the defaults' val split
            with open(os.path.join(out, "tokenizer.json"), encoding="utf-8") as f:
                floor = json.load(f)["task"]["val_loss_floor"]
        with open(os.path.join(os.path.dirname(__file__), "..", "..", "docs", "data.md"), encoding="utf-8") as f:
            page = f.read()
        quoted = (f"{100 * floor['trigger_share']:.0f}% of the queries are triggers",
                  f"at {floor['other_nats']:.2f} nats ({floor['all_nats']:.2f} nats over all targets)")
        for text in quoted:
            self.assertIn(text, page)
        # and by a plain loop over the same documents' queries (the last BOS predicts x_1)
        task = bb.make_task()
        docs = bb.documents(task, 512, 0).astype(np.int64)
        entropy = [-sum(p * np.log(p) for p in row) for row in task.transition]
        law = {t: task.stationary[t] for t in range(task.vocab) if t not in task.triggers}
        first = -sum(p / sum(law.values()) * np.log(p / sum(law.values())) for p in law.values())
        other, total = [], 0.0
        for doc in docs:
            for i in range(len(doc) - 1):
                if doc[i] in task.triggers:
                    continue
                other.append(first if i == 0 else entropy[doc[i]])
        self.assertAlmostEqual(floor["other_nats"], sum(other) / len(other), places=9)
        self.assertAlmostEqual(floor["all_nats"], sum(other) / (512 * 256), places=9)

    def test_the_shipped_config_names_the_default_task_triggers(self):
        with open(os.path.join(os.path.dirname(__file__), "..", "..", "configs", "bb.yaml"), encoding="utf-8") as f:
            line = next(l for l in f if l.strip().startswith("trigger_tokens:"))
        listed = [int(t) for t in line.split("[")[1].split("]")[0].split(",")]
        self.assertEqual(listed, list(bb.make_task().triggers))

    def test_bad_arguments_are_refused_by_name(self):
        with tempfile.TemporaryDirectory() as tmp:
            for args, word in ((["--triggers", "99"], "triggers"), (["--train-docs", "0"], "--train-docs")):
                with self.assertRaises(SystemExit) as e:
                    pd.main(["bb", "--out", os.path.join(tmp, "x"), "--quiet", *args])
                self.assertIn(word, str(e.exception))


if __name__ == "__main__":
    unittest.main()
