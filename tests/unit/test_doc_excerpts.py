"""The excerpts docs/ quote from the shipped sweeps are those sweeps' own output: each marked block
equals what tools/readme_demo.py cuts from the report files kept in docs/results/ (written by
`attnlab report <sweep> [--probes]` after the sweep), or a whole table a tool wrote there
(tools/phenomena_trajectory.py --out); docs/results/README.md says how to refresh them. README.md's
demo excerpt is held by the demo test itself (tests/demo), which reruns the demo.

Run by ctest (label unit) with the venv python, like test_readme_demo.py.
"""
import pathlib
import sys
import unittest

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tools"))
import readme_demo as rd  # noqa: E402

# (the document, its marker, the report directory it quotes)
EXCERPTS = [
    ("docs/sweeps.md", "phenomena-report", "docs/results/phenomena"),
    ("docs/sweeps.md", "realtext-report", "docs/results/realtext"),
]
# (the document, its marker, the file it quotes whole)
TABLES = [
    ("docs/sweeps.md", "trajectory-table", "docs/results/trajectory.md"),
]


class DocExcerpts(unittest.TestCase):
    def test_each_marked_excerpt_is_cut_from_its_kept_report(self):
        for doc, marker, results in EXCERPTS:
            with self.subTest(doc=doc, marker=marker):
                text = (REPO / doc).read_text(encoding="utf-8")
                body = rd.excerpt(*rd.read_report(REPO / results))
                self.assertEqual(text, rd.rewrite(text, body, marker),
                                 f"{doc}'s {marker} excerpt differs from {results}; update it with python3 "
                                 f"tools/readme_demo.py --readme {doc} --marker {marker} {results}")

    def test_each_marked_table_is_its_kept_file(self):
        for doc, marker, table in TABLES:
            with self.subTest(doc=doc, marker=marker):
                text = (REPO / doc).read_text(encoding="utf-8")
                body = (REPO / table).read_text(encoding="utf-8").splitlines()
                self.assertEqual(text, rd.rewrite(text, body, marker), f"{doc}'s {marker} block differs from {table}")


if __name__ == "__main__":
    unittest.main()
