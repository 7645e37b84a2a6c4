#!/usr/bin/env python3
"""Each layer includes only its own headers and those of the layers below it
(Documentation/design.md): tools -> tracefs -> {fprobe, kprobe} -> core -> arch, with fprobe
and kprobe side by side (neither includes the other). include/dprobe (the public API) is
open to all, but for the headers of a layer's own API (PUBLIC_OWNER): <dprobe/fprobe.h> is
fprobe's, so core and arch may not include it (the kernel's ftrace never includes
linux/fprobe.h: fprobe fills in ftrace's records). Prints every include that goes up or
sideways and fails when there is one.

An include is resolved as the compiler resolves it, not by its first word: a quoted include
is looked up in the including file's own folder first (so `#include "../tracefs/error_log.h"`
in core/ reaches tracefs), then from the top of the tree (the layers' include roots hold the
layers as `<layer>/...`) and include/. An absolute path counts by where it points, and an
include through a macro (`#define H "..."`, `#include H`) by the macro's string. The layer
is the top-level folder of the file reached.

  includes_go_down.py SOURCE_DIR
"""
import os
import re
import sys

RANK = {"arch": 0, "core": 1, "fprobe": 2, "kprobe": 2, "tracefs": 3, "tools": 4}
EXTS = (".cpp", ".cc", ".h", ".hpp", ".c", ".S", ".inc")
# Public headers that are one layer's API: including one counts as including that layer.
PUBLIC_OWNER = {"include/dprobe/fprobe.h": "fprobe"}
INCLUDE = re.compile(r'^\s*#\s*include(?:_next)?\s*(?:"([^"]+)"|<([^>]+)>|([A-Za-z_]\w*))')
DEFINE = re.compile(r'^\s*#\s*define\s+([A-Za-z_]\w*)\s+(?:"([^"]+)"|<([^>]+)>)')


def layer_of(root, path):
    """The layer a path in the tree belongs to, 'include' for the public API, or None. A
    path is taken as written (a layer folder may be a link), else as what it resolves to."""
    rel = os.path.relpath(os.path.abspath(path), os.path.abspath(root))
    if rel.startswith(os.pardir):
        rel = os.path.relpath(os.path.realpath(path), os.path.realpath(root))
    owner = PUBLIC_OWNER.get(rel.replace(os.sep, "/"))
    if owner:
        return owner
    top = rel.split(os.sep, 1)[0]
    if top in RANK or top == "include":
        return top
    return None


def resolve(root, including, name, quoted):
    """The layer an include reaches: the file the compiler would open, else its first word."""
    candidates = []
    if os.path.isabs(name):
        candidates.append(name)
    else:
        if quoted:
            candidates.append(os.path.join(os.path.dirname(including), name))
        candidates += [os.path.join(root, name), os.path.join(root, "include", name)]
    for c in candidates:
        if os.path.isfile(c):
            return layer_of(root, c)
    owner = PUBLIC_OWNER.get("include/" + os.path.normpath(name).replace(os.sep, "/"))
    if owner:
        return owner
    top = os.path.normpath(name).split(os.sep, 1)[0]
    return top if top in RANK else None


def violations(root):
    for layer, rank in RANK.items():
        for dirpath, _, files in os.walk(os.path.join(root, layer)):
            for name in sorted(files):
                if not name.endswith(EXTS):
                    continue
                path = os.path.join(dirpath, name)
                with open(path, errors="replace") as f:
                    lines = f.read().split("\n")
                macros = {}
                for line in lines:
                    d = DEFINE.match(line)
                    if d:
                        macros[d.group(1)] = (d.group(2) or d.group(3), d.group(2) is not None)
                for n, line in enumerate(lines, 1):
                    m = INCLUDE.match(line)
                    if not m:
                        continue
                    if m.group(3):
                        if m.group(3) not in macros:
                            continue
                        inc, quoted = macros[m.group(3)]
                    else:
                        inc, quoted = m.group(1) or m.group(2), m.group(1) is not None
                    target = resolve(root, path, inc, quoted)
                    if target not in RANK:
                        continue
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
