#!/usr/bin/env python3
"""Fails when an #include crosses the layer table of docs/architecture.md.

The table (between the `layers:begin` and `layers:end` markers) gives, per
folder, the folders its files may include from ("may include" column:
folder names such as `core`, `runtime`, `chorus` for include/chorus; `*`
for anything). A crossing the table forbids but that is still in the tree
is listed between `crossings:begin` and `crossings:end` as
`file -> header`; it is allowed until removed, and the check fails once it
is gone from the code but still listed (so the list only shrinks).

Usage: scripts/check_layers.py [REPO_ROOT]    (exit 1 on a violation)
"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
CODE_SUFFIXES = (".h", ".hpp", ".cc", ".cpp", ".cu", ".cuh", ".c")


def section(text, name):
    m = re.search(r"<!-- %s:begin -->(.*?)<!-- %s:end -->" % (name, name), text, re.S)
    if not m:
        sys.exit("docs/architecture.md: no %s:begin / %s:end markers" % (name, name))
    return m.group(1)


def parse_layers(text):
    """{folder path: set of allowed include roots}"""
    layers = {}
    for line in section(text, "layers").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 3 or not cells[0].startswith("`"):
            continue
        folder = cells[0].strip("`").rstrip("/")
        allowed = set(re.findall(r"`([^`]+)`", cells[-1]))
        layers[folder] = allowed
    return layers


def parse_crossings(text):
    out = set()
    for line in section(text, "crossings").splitlines():
        m = re.match(r"\s*[-*]\s*`([^`]+)`\s*->\s*`([^`]+)`", line)
        if m:
            out.add((m.group(1), m.group(2)))
    return out


def root_of(header, known_roots):
    """The include root of a quoted header: `runtime` for "runtime/x.h"."""
    first = header.split("/", 1)[0]
    if "/" in header and first in known_roots:
        return first
    if header.startswith("tools/") or header.startswith("tests/"):
        return first
    return None  # a header beside the file ("x.h") or not ours


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    root = os.path.abspath(root)
    text = open(os.path.join(root, "docs", "architecture.md"), encoding="utf-8").read()
    layers = parse_layers(text)
    listed = parse_crossings(text)
    # Include roots: src/<x> is included as "<x>/...", include/chorus as "chorus/...".
    roots = {f.split("/")[-1] for f in layers}
    problems, seen = [], set()
    for folder, allowed in sorted(layers.items()):
        base = os.path.join(root, folder)
        if not os.path.isdir(base):
            problems.append("%s: in the layer table but not in the tree" % folder)
            continue
        for dirpath, _, files in os.walk(base):
            for name in sorted(files):
                if not name.endswith(CODE_SUFFIXES):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root)
                # A nested folder with its own row is checked by that row.
                owner = max((f for f in layers if rel.startswith(f + "/")), key=len)
                if owner != folder:
                    continue
                src = open(path, encoding="utf-8", errors="replace").read()
                for m in INCLUDE.finditer(src):
                    header = m.group(1)
                    r = root_of(header, roots)
                    if r is None or "*" in allowed or r in allowed:
                        continue
                    line = src.count("\n", 0, m.start()) + 1
                    if (rel, header) in listed:
                        seen.add((rel, header))
                        continue
                    problems.append("%s:%d: includes \"%s\": %s may include only %s "
                                    "(docs/architecture.md, layer table)"
                                    % (rel, line, header, folder,
                                       ", ".join(sorted(allowed)) or "nothing of ours"))
    for rel, header in sorted(listed - seen):
        problems.append("docs/architecture.md lists `%s` -> `%s` as a crossing still to "
                        "remove, but the code no longer has it: delete it from the list"
                        % (rel, header))
    for p in problems:
        print(p)
    if problems:
        print("%d layer violation(s)" % len(problems))
        return 1
    print("layers ok: %d folders, %d listed crossings still to remove"
          % (len(layers), len(listed)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
