"""The attnlab binary under test, for Python tests that take a list from it (the arm registry, a
config's keys) rather than keep a copy that a new arm or key would leave behind:
$ATTNLAB_BUILD_DIR/attnlab (ctest sets it), else build/attnlab of this checkout."""
import json
import os
import subprocess

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("ATTNLAB_BUILD_DIR", os.path.join(ROOT, "build"))


def attnlab_json(*args):
    """What `attnlab ARGS` prints, parsed as JSON. Raises when there is no binary: a test that takes a
    list from it must not pass without it."""
    binary = os.path.join(BUILD, "attnlab")
    if not os.path.exists(binary):
        raise RuntimeError(f"no {binary}: build it (scripts/build.sh), or set ATTNLAB_BUILD_DIR to a build holding it")
    return json.loads(subprocess.run([binary, *args], check=True, capture_output=True, text=True).stdout)


def registry_arms():
    """Every arm of the registry, in its order: name, summary and the features as config.json spells them."""
    return attnlab_json("arms", "--json")
