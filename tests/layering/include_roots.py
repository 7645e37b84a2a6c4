#!/usr/bin/env python3
"""The build enforces the layers (cmake/dprobe.cmake, dprobe_layer): each layer is compiled
with an include root that holds only itself and the layers below it, so a file that includes
a header of a layer above or beside it does not compile. For every layer, preprocesses an
include of one header of every layer with that layer's own include directories (as CMake
gives them to its sources) and checks that exactly the layers at or below it are found.

  include_roots.py CXX LAYER=INCDIRS...      (INCDIRS: ':'-separated, from the targets)

A LAYER named <layer>_offline is a layer's offline part (cmake/dprobe.cmake): it has its
layer's root. Every layer must be given.
"""
import os
import subprocess
import sys
import tempfile

RANK = {"arch": 0, "core": 1, "fprobe": 2, "kprobe": 2, "tracefs": 3, "tools": 4}
# One header per layer, named as sources name them.
HEADER = {"arch": "arch/x86_64/insn.h", "core": "core/glob.h", "fprobe": "fprobe/fprobe_internal.h",
          "kprobe": "kprobe/kprobe_internal.h", "tracefs": "tracefs/error_log.h",
          "tools": "tools/trace_file.h"}


def may_include(layer, target):
    return target == layer or RANK[target] < RANK[layer]


def found(cxx, dirs, header, tmp):
    src = os.path.join(tmp, "probe.cpp")
    with open(src, "w") as f:
        f.write('#include "%s"\n' % header)
    args = [cxx, "-std=c++20", "-E", "-o", os.devnull, src] + ["-I" + d for d in dirs if d]
    return subprocess.run(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE).returncode == 0


def main():
    cxx = sys.argv[1]
    bad = []
    checked = 0
    seen = set()
    with tempfile.TemporaryDirectory() as tmp:
        for arg in sys.argv[2:]:
            part, dirs = arg.split("=", 1)
            layer = part.removesuffix("_offline")
            seen.add(layer)
            dirs = dirs.split(":")
            for target, header in HEADER.items():
                want = may_include(layer, target)
                got = found(cxx, dirs, header, tmp)
                checked += 1
                if want != got:
                    bad.append("%s: #include \"%s\" %s" % (
                        part, header, "fails, but the layer may use it" if want
                        else "compiles, but it is a layer above or beside"))
    for b in bad:
        print(b)
    if seen != set(RANK) or checked != len(HEADER) * (len(sys.argv) - 2):
        sys.exit("checked %d pairs of layers %s, expected every layer" % (checked, sorted(seen)))
    if bad:
        sys.exit("%d wrong include root(s)" % len(bad))
    print("%d layer/header pairs: each layer (and offline part) sees only itself and the layers "
          "below" % checked)


if __name__ == "__main__":
    main()
