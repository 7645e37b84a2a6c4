#!/usr/bin/env python3
"""Each layer includes only its own headers and those of the layers below it
(Documentation/design.md): tools -> tracefs -> {fprobe, kprobe} -> core -> arch, with fprobe
and kprobe side by side (neither includes the other). include/dprobe (the public API) is
open to all. Prints every include that goes up or sideways and fails when there is one.

  includes_go_down.py SOURCE_DIR
"""
import os
import re
import sys

RANK = {"arch": 0, "core": 1, "fprobe": 2, "kprobe": 2, "tracefs": 3, "tools": 4}
INCLUDE = re.compile(r'\s*#\s*include\s+"([^/"]+)/')


def violations(root):
    for layer, rank in RANK.items():
        for dirpath, _, files in os.walk(os.path.join(root, layer)):
            for name in sorted(files):
                if not name.endswith((".cpp", ".h", ".c", ".S", ".inc")):
                    continue
                path = os.path.join(dirpath, name)
                with open(path, errors="replace") as f:
                    for n, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m or m.group(1) not in RANK:
                            continue
                        target = m.group(1)
                        if RANK[target] > rank or (RANK[target] == rank and target != layer):
                            yield "%s:%d: %s includes %s (%s)" % (
                                os.path.relpath(path, root), n, layer, target, line.strip())


def main():
    root = sys.argv[1]
    bad = list(violations(root))
    for b in bad:
        print(b)
    if bad:
        sys.exit("%d include(s) of a layer above or beside" % len(bad))
    print("every include goes down the layers")


if __name__ == "__main__":
    main()
