"""python/attnlab_hf's AttnlabConfig takes the keys attnlab writes into config.json: every `model:` key
of a run config (`attnlab config --json`, the same key list a checkpoint and the export use), with the
same defaults, plus the arm's features (`attnlab arms --json`) and the two constants of the modeling
code. A model key added in C++ and not here fails this test.

Run by ctest (label unit) with the venv python and $ATTNLAB_BUILD_DIR (tests/unit/attnlab_cli.py).
"""
import inspect
import os
import sys
import tempfile
import unittest

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from attnlab_cli import attnlab_json, registry_arms  # noqa: E402
from attnlab_hf.configuration_attnlab import AttnlabConfig  # noqa: E402

CONSTANTS = {"norm_gate_beta", "layer_norm_eps"}  # written by export-hf, fixed in attnlab's model


def model_section(*sets):
    """The `model` of a run config that sets nothing in it but `sets`."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "run.yaml")
        with open(path, "w") as f:
            f.write("data: {train: none_*.bin, val: none_*.bin}\ntrain: {max_steps: 1}\n")
        args = ["config", "--json", "--config", path]
        for s in sets:
            args += ["--set", s]
        return attnlab_json(*args)["model"]


class ConfigKeys(unittest.TestCase):
    def setUp(self):
        signature = inspect.signature(AttnlabConfig.__init__).parameters
        self.params = {k: p.default for k, p in signature.items() if k not in ("self", "kwargs")}
        self.plain = model_section()
        self.windowed = model_section("model.window=4")  # the window keys are written only with a window
        self.features = set(registry_arms()[0]) - {"name", "summary"}

    def test_the_class_takes_every_model_key_and_nothing_else(self):
        self.assertLess(set(self.plain), set(self.windowed))
        self.assertEqual(set(self.params), set(self.windowed) | self.features | CONSTANTS)

    def test_each_model_key_defaults_as_in_attnlab(self):
        for key, value in self.plain.items():
            self.assertEqual(self.params[key], value, key)
        for key in set(self.windowed) - set(self.plain):  # unset, or what a window's normalisation writes
            self.assertIn(self.params[key], (None, self.windowed[key]), key)

    def test_the_class_reads_each_key(self):
        arm = registry_arms()[0]
        values = dict(self.windowed, **{k: arm[k] for k in self.features})
        config = AttnlabConfig(**values)
        for key, value in values.items():
            self.assertEqual(getattr(config, key), value, key)


if __name__ == "__main__":
    unittest.main()
