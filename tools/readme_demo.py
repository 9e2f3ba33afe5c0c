#!/usr/bin/env python3
"""Keeps README.md's demo excerpt the demo's own output.

The excerpt between the markers `<!-- demo-report:begin -->` and `<!-- demo-report:end -->` in
README.md is cut from a finished demo's report directory (runs/sweeps/demo/report/, written by
`attnlab report ... --probes`, which scripts/demo.sh runs): from report.md the paired-differences
table, its "Not in this sweep" line, the noise-floor line and, when the report has one, the
paper-layout table and each variant's table against the plain runs (a grid list's); from probes.md,
when present, the first per-arm table and the paired probe differences.

    python3 tools/readme_demo.py REPORT_DIR            rewrite README.md's excerpt from REPORT_DIR
    python3 tools/readme_demo.py --check REPORT_DIR    exit 1 (and show a diff) when they differ
    python3 tools/readme_demo.py --readme docs/sweeps.md --marker phenomena-report REPORT_DIR
                                                      the same for another marked excerpt

REPORT_DIR may also be report.md itself (then probes.md is read beside it). scripts/demo.sh runs
--check after every demo and says how to update the README when the figures of this machine's build
differ from the ones it shows; the demo test (tests/demo) runs the sweep and holds the excerpt.
"""
import argparse
import difflib
import pathlib
import sys

BEGIN = "<!-- demo-report:begin -->"
END = "<!-- demo-report:end -->"


def markers(name):
    """The begin and end markers of the excerpt `name` ("demo-report" is README.md's)."""
    return f"<!-- {name}:begin -->", f"<!-- {name}:end -->"


def table_after(lines, start):
    """The markdown table (consecutive '|' lines) first found at or after index start."""
    i = start
    while i < len(lines) and not lines[i].startswith("|"):
        i += 1
    j = i
    while j < len(lines) and lines[j].startswith("|"):
        j += 1
    return lines[i:j], j


def excerpt(report_text, probes_text=None):
    """The excerpt's lines, from a report.md (and its probes.md); raises ValueError naming what is missing."""
    lines = report_text.splitlines()

    def find(prefix, start=0, required=True):
        for i in range(start, len(lines)):
            if lines[i].startswith(prefix):
                return i
        if required:
            raise ValueError(f"the report has no line starting with {prefix!r}: is it attnlab report's report.md?")
        return None

    differences, after = table_after(lines, find("### Paired differences"))
    if not differences:
        raise ValueError("the report's paired-differences table is empty")
    out = differences + [""]
    for line in lines[after:]:
        if line.startswith("Not in this sweep:"):
            out += [line, ""]
            break
        if line.startswith("#"):
            break
    floor = find("### Noise floor", after, required=False)
    if floor is not None and floor + 2 < len(lines) and lines[floor + 2]:
        out += [lines[floor + 2], ""]  # "N null differences ...: mean, sd (the floor); arms"
    paper_at = find("## Zero option vs filtering", required=False)
    if paper_at is not None:
        paper, _ = table_after(lines, paper_at)
        out += paper + [""]
    for i, line in enumerate(lines):  # a grid list's variants against the plain runs
        if line.startswith("## Variant against the plain runs"):
            table, _ = table_after(lines, i)
            out += [line.lstrip("# "), ""] + table + [""]
    if probes_text:
        plines = probes_text.splitlines()
        arms = [i for i, line in enumerate(plines) if line.startswith("## Trained-model measurements")]
        if arms:  # the first group's per-arm table (the null twins' comes after it)
            table, _ = table_after(plines, arms[0])
            out += [plines[arms[0]].lstrip("# "), ""] + table + [""]
        heads = [i for i, line in enumerate(plines) if line.startswith("### Paired probe differences")]
        for i in heads:
            table, _ = table_after(plines, i)
            out += [plines[i].lstrip("# "), ""] + table + [""]
    while out and out[-1] == "":
        out.pop()
    return out


def read_report(path):
    """report.md's text and probes.md's (None when absent) from a report directory or report.md."""
    path = pathlib.Path(path)
    report = path / "report.md" if path.is_dir() else path
    probes = report.with_name("probes.md")
    return report.read_text(encoding="utf-8"), probes.read_text(encoding="utf-8") if probes.is_file() else None


def rewrite(readme_text, body, name="demo-report"):
    """Text with the block marked `name` replaced by body (a fenced block)."""
    begin, end = markers(name)
    if readme_text.count(begin) != 1 or readme_text.count(end) != 1:
        raise ValueError(f"the file must hold {begin} and {end} once each")
    head, rest = readme_text.split(begin)
    _, tail = rest.split(end)
    return head + begin + "\n```\n" + "\n".join(body) + "\n```\n" + end + tail


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("report", type=pathlib.Path, help="the report directory (or its report.md) of a finished demo sweep")
    parser.add_argument("--readme", type=pathlib.Path, default=pathlib.Path(__file__).resolve().parents[1] / "README.md")
    parser.add_argument("--check", action="store_true", help="only compare; exit 1 when README.md differs")
    parser.add_argument("--marker", default="demo-report",
                        help="the excerpt's marker name in --readme (docs/sweeps.md holds phenomena-report)")
    args = parser.parse_args()
    try:
        readme = args.readme.read_text(encoding="utf-8")
        new = rewrite(readme, excerpt(*read_report(args.report)), args.marker)
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
