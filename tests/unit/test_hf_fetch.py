"""tools/hf_fetch.py, offline: Pythia's revision list, and --local re-saving a model whose weights are
only a pytorch_model.bin pickle as the step<N>/ safetensors directory `attnlab import-hf` reads.

Run by ctest (label unit) with the venv python (python -m unittest discover -s tests/unit).
"""
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools"))
import hf_fetch  # noqa: E402


class PythiaSteps(unittest.TestCase):
    def test_the_154_published_revisions(self):
        steps = hf_fetch.parse_steps(["pythia"])
        self.assertEqual(len(steps), 154)
        self.assertEqual(steps[:12], [0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1000])
        self.assertEqual(steps[-2:], [142000, 143000])

    def test_step_lists_are_sorted_and_checked(self):
        self.assertEqual(hf_fetch.parse_steps(["512", "0", "512"]), [0, 512])
        for bad in (["-1"], ["latest"]):
            with self.assertRaises(SystemExit) as e:
                hf_fetch.parse_steps(bad)
            self.assertIn("--steps", str(e.exception))


class LocalResave(unittest.TestCase):
    def test_pickle_weights_become_safetensors_with_the_same_tensors(self):
        import torch
        from safetensors.torch import load_file
        from transformers import GPTNeoXConfig, GPTNeoXForCausalLM
        torch.manual_seed(0)
        model = GPTNeoXForCausalLM(GPTNeoXConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1,
                                                 num_attention_heads=2, intermediate_size=64,
                                                 max_position_embeddings=16, rotary_pct=0.25))
        with tempfile.TemporaryDirectory() as tmp:
            source = os.path.join(tmp, "pickled")
            # As Pythia's older revisions are: config.json and a pickled state dict (transformers 5 no
            # longer writes one itself).
            model.config.save_pretrained(source)
            torch.save(model.state_dict(), os.path.join(source, "pytorch_model.bin"))
            self.assertEqual(sorted(f for f in os.listdir(source) if "model" in f), ["pytorch_model.bin"])
            out = os.path.join(tmp, "series")
            self.assertEqual(hf_fetch.main(["--local", source, "--steps", "1000", "--out", out]), 0)
            saved = load_file(os.path.join(out, "step1000", "model.safetensors"))
            for name, tensor in model.state_dict().items():
                if name in saved:
                    self.assertTrue(torch.equal(saved[name], tensor), name)
            self.assertIn("gpt_neox.layers.0.attention.query_key_value.weight", saved)
            self.assertFalse(os.path.exists(os.path.join(out, "step1000.tmp")))

            # A step directory that exists without weights is someone's: refused, kept.
            os.makedirs(os.path.join(out, "step2000"))
            with open(os.path.join(out, "step2000", "notes.txt"), "w") as f:
                f.write("mine")
            with self.assertRaises(SystemExit) as e:
                hf_fetch.main(["--local", source, "--steps", "2000", "--out", out])
            self.assertIn("step2000 exists without model.safetensors", str(e.exception))
            self.assertEqual(os.listdir(os.path.join(out, "step2000")), ["notes.txt"])

    def test_one_source(self):
        with self.assertRaises(SystemExit) as e:
            hf_fetch.main(["EleutherAI/pythia-70m", "--local", "x", "--steps", "0", "--out", "y"])
        self.assertIn("not both", str(e.exception))


if __name__ == "__main__":
    unittest.main()
