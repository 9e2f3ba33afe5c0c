"""The fuzz targets: one module each, named as the driver's target (tests/fuzz/fuzz_readers.cpp).

A module defines `Target(run, workdir)`: `run(paths)` reads inputs with the driver and returns
{path: Verdict}; `generate(rng, path) -> Case` writes one mutated input at `path` (a file or a
directory); `judge(case, verdict) -> str | None` says what is wrong with an accepted or refused
verdict (crashes, hangs and "broken" verdicts are failures whatever the target says).
"""
TARGETS = ["config", "shards", "import_hf"]
