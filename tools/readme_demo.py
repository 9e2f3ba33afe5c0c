#!/usr/bin/env python3
"""Keeps README.md's demo excerpt the demo's own output.

The excerpt between the markers `<!-- demo-report:begin -->` and `<!-- demo-report:end -->` in
README.md is cut from a finished demo's report (runs/sweeps/demo/report/report.md, written by
`attnlab report ... --compare-paper`, which scripts/demo.sh runs): the paired-differences table,
its "Not in this sweep" line and the paper-layout table.

    python3 tools/readme_demo.py REPORT_MD            rewrite README.md's excerpt from REPORT_MD
    python3 tools/readme_demo.py --check REPORT_MD    exit 1 (and show a diff) when they differ

scripts/demo.sh runs --check after every demo and says how to update the README when the figures
of this machine's build differ from the ones it shows.
"""
import argparse
import difflib
import pathlib
import sys

BEGIN = "<!-- demo-report:begin -->"
END = "<!-- demo-report:end -->"


def table_after(lines, start):
    """The markdown table (consecutive '|' lines) first found at or after index start."""
    i = start
    while i < len(lines) and not lines[i].startswith("|"):
        i += 1
    j = i
    while j < len(lines) and lines[j].startswith("|"):
        j += 1
    return lines[i:j], j


def excerpt(report_text):
    """The excerpt's lines, from a report.md; raises ValueError naming what is missing."""
    lines = report_text.splitlines()

    def find(prefix, start=0):
        for i in range(start, len(lines)):
            if lines[i].startswith(prefix):
                return i
        raise ValueError(f"the report has no line starting with {prefix!r}: is it attnlab report's report.md?")

    differences, after = table_after(lines, find("### Paired differences"))
    out = differences + [""]
    for line in lines[after:]:
        if line.startswith("Not in this sweep:"):
            out += [line, ""]
            break
        if line.startswith("#"):
            break
    paper, _ = table_after(lines, find("## Zero option vs filtering"))
    if not differences or not paper:
        raise ValueError("the report's paired-differences or paper-layout table is empty")
    return out + paper


def rewrite(readme_text, body):
    """README text with the marked block replaced by body (a fenced block)."""
    if readme_text.count(BEGIN) != 1 or readme_text.count(END) != 1:
        raise ValueError(f"README.md must hold {BEGIN} and {END} once each")
    head, rest = readme_text.split(BEGIN)
    _, tail = rest.split(END)
    return head + BEGIN + "\n```\n" + "\n".join(body) + "\n```\n" + END + tail


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("report", type=pathlib.Path, help="report.md of a finished demo sweep")
    parser.add_argument("--readme", type=pathlib.Path, default=pathlib.Path(__file__).resolve().parents[1] / "README.md")
    parser.add_argument("--check", action="store_true", help="only compare; exit 1 when README.md differs")
    args = parser.parse_args()
    try:
        readme = args.readme.read_text(encoding="utf-8")
        new = rewrite(readme, excerpt(args.report.read_text(encoding="utf-8")))
    except (OSError, ValueError) as e:
        sys.exit(f"readme_demo.py: {e}")
    if new == readme:
        print(f"{args.readme}: the demo excerpt matches {args.report}")
        return 0
    if args.check:
        sys.stdout.writelines(difflib.unified_diff(readme.splitlines(True), new.splitlines(True),
                                                   str(args.readme), "from " + str(args.report)))
        return 1
    args.readme.write_text(new, encoding="utf-8")
    print(f"{args.readme}: demo excerpt rewritten from {args.report}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
