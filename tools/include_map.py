#!/usr/bin/env python3
"""The folder-level include map of attnlab, from the #include lines alone (docs/design.md, "Floors").

Every source file belongs to a folder: src/<folder>/..., tools/attnlab (the CLI), kernels. A public
header include/attnlab/<name>.h belongs to the folder that implements it: the folder of
src/*/<name>.cpp when there is one, else the entry of HEADER_FOLDER below. An edge A -> B means a file
of A includes a header of B. The folders must form floors: FLOORS lists them bottom up, and every
edge must point to the same floor or a lower one (which also rules out loops).

    python3 tools/include_map.py            # the edges, floor by floor
    python3 tools/include_map.py --check    # exit 1 naming each upward edge or unresolved header
    python3 tools/include_map.py --dot      # Graphviz

The ctest design.include_map (tests/CMakeLists.txt) runs --check, so a new upward include fails the
build's tests.
"""
import argparse
import collections
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Bottom up; folders on one floor may include each other only if that forms no loop (checked).
FLOORS = [
    ["kernels"],
    ["common"],
    ["arms", "data"],
    ["attention"],
    ["model"],
    ["config", "checkpoint"],
    ["run"],
    ["distributed"],
    ["train", "probes", "activations", "interop", "generate"],
    ["sweep", "report"],
    ["tools"],
]

# Public headers with no src/*/<name>.cpp of the same name: the folder that implements them.
HEADER_FOLDER = {
    "arm": "arms",
    "attention": "attention",
    "attention_window": "attention",
    "checkpoint_error": "checkpoint",
    "distributed": "distributed",
    "file_error": "common",
    "hf_interop": "interop",
    "injection": "probes",
    "model": "model",
    "name_table": "common",
    "probe_report": "report",
    "probes": "probes",
    "sweep": "sweep",
    "version": "common",
}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
SOURCE_EXT = (".h", ".cpp", ".cu", ".cuh")


def folder_of_path(rel):
    """The folder a file of the repository belongs to, or None for files outside the map."""
    parts = rel.split("/")
    if parts[0] == "src":
        return "common" if len(parts) == 2 else parts[1]  # src/version.cpp, src/pch.h
    if parts[0] == "kernels":
        return "kernels"
    if parts[:2] == ["tools", "attnlab"]:
        return "tools"
    return None


def public_header_folders():
    """include/attnlab/<name>.h -> folder, and the headers no rule resolves."""
    implemented = {}
    for folder in sorted(os.listdir(os.path.join(ROOT, "src"))):
        path = os.path.join(ROOT, "src", folder)
        if os.path.isdir(path):
            for name in os.listdir(path):
                if name.endswith(".cpp"):
                    implemented.setdefault(name[:-4], folder)
    out, unresolved = {}, []
    for name in sorted(os.listdir(os.path.join(ROOT, "include", "attnlab"))):
        stem = name[:-2]
        folder = implemented.get(stem) or HEADER_FOLDER.get(stem)
        if folder is None:
            unresolved.append("include/attnlab/" + name)
        out["attnlab/" + name] = folder
    return out, unresolved


def target_folder(include, headers, including_file):
    if include.startswith("../") or include.startswith("./"):
        return folder_of_path(os.path.normpath(os.path.join(os.path.dirname(including_file), include)))
    if include in headers:
        return headers[include]
    if include.startswith("attnlab_kernels/"):
        return "kernels"
    first = include.split("/")[0]
    if os.path.isdir(os.path.join(ROOT, "src", first)):
        return first  # a private header: "checkpoint/state_json.h"
    return None  # a header of the same folder ("commands.h") or a test helper


def edges():
    headers, unresolved = public_header_folders()
    found = collections.defaultdict(list)  # (from, to) -> files
    roots = ["src", "kernels", "tools/attnlab", "include/attnlab"]
    for root in roots:
        for dirpath, _, files in os.walk(os.path.join(ROOT, root)):
            for name in sorted(files):
                if not name.endswith(SOURCE_EXT):
                    continue
                rel = os.path.relpath(os.path.join(dirpath, name), ROOT)
                src = headers.get("attnlab/" + name) if root == "include/attnlab" else folder_of_path(rel)
                if src is None:
                    continue
                with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
                    text = f.read()
                for inc in INCLUDE.findall(text):
                    dst = target_folder(inc, headers, rel)
                    if dst and dst != src:
                        found[(src, dst)].append(rel)
    return found, unresolved


def floor_index():
    return {folder: i for i, floor in enumerate(FLOORS) for folder in floor}


def problems(found, unresolved):
    out = ["unresolved public header (add it to HEADER_FOLDER): " + h for h in unresolved]
    floor = floor_index()
    for (src, dst), files in sorted(found.items()):
        for f in (src, dst):
            if f not in floor:
                out.append(f"folder '{f}' is on no floor (add it to FLOORS)")
        if src in floor and dst in floor and floor[dst] > floor[src]:
            out.append(f"upward include {src} -> {dst}: {', '.join(sorted(set(files)))}")
    # Loops within one floor.
    graph = collections.defaultdict(set)
    for (src, dst) in found:
        graph[src].add(dst)
    state = {}

    def visit(node, stack):
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                out.append("loop: " + " -> ".join(stack[stack.index(nxt):] + [nxt]))
            elif nxt not in state:
                visit(nxt, stack)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [])
    return sorted(set(out))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 on an upward edge, a loop or an unknown header")
    parser.add_argument("--dot", action="store_true", help="print the graph for Graphviz")
    args = parser.parse_args()
    found, unresolved = edges()
    if args.dot:
        print("digraph attnlab {\n  rankdir=BT;")
        for (src, dst), files in sorted(found.items()):
            print(f'  "{src}" -> "{dst}" [label="{len(files)}"];')
        print("}")
    else:
        floor = floor_index()
        for i, folders in reversed(list(enumerate(FLOORS))):
            print(f"floor {i}: {' '.join(folders)}")
            for (src, dst), files in sorted(found.items()):
                if floor.get(src) == i:
                    print(f"    {src} -> {dst} ({len(files)} includes)")
    issues = problems(found, unresolved)
    for p in issues:
        print("include_map: " + p, file=sys.stderr)
    if args.check and issues:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
