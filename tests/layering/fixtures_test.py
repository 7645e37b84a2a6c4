#!/usr/bin/env python3
"""Runs a layering check on planted violations: a check that passes one has a hole.

Each folder fixtures/<check>/<case>/ holds one violation planted in files laid out as in the
source tree, and a file `expect`: its first line `fail` (the check must fail) or `pass` (a
control: what the rules allow, which the check must pass), then the lines of text the
check's output must contain (the planted file and line it must name). How a case becomes the
check's input depends on the check:

  includes_go_down, only_arch_writes_code,  the case's files copied over a copy of the real
  only_arch_reads_insns, lower_layers_blind tree (TREE_OF), the check run on that copy
  layer_symbols                             <layer>/*.c compiled, one object list per layer
                                            (a layer the case leaves empty gets an object
                                            defining one symbol of its own)
  include_roots                             include roots made from the case's `roots` lines
                                            ("layer: dirs it holds"; the right ones for the
                                            layers not named)
  cli_is_offline                            cli.c built into a shared object, checked as the
                                            command against the real runtime and offline
                                            archives

  fixtures_test.py CHECK SOURCE_DIR [--cc CC] [--cxx CXX] [--nm NM] [--runtime A] [--offline A]
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
# The real folders a tree check's copy holds (those a case plants files in are copied, the
# others linked): the include check resolves the planted includes against the real headers;
# the instruction check needs arch's code (it fails when it finds nothing there), and scans
# of the generic folders' real files would only repeat its test on the real tree.
TREE_OF = {"includes_go_down": ["arch", "core", "fprobe", "kprobe", "tracefs", "tools", "include"],
           "only_arch_writes_code": ["arch"], "only_arch_reads_insns": ["arch"],
           "lower_layers_blind": ["arch", "core"]}
LAYERS = ["arch", "core", "fprobe", "kprobe", "tracefs", "tools"]
BELOW = {"arch": [], "core": ["arch"], "fprobe": ["core"], "kprobe": ["core"],
         "tracefs": ["fprobe", "kprobe"], "tools": ["tracefs"]}


def closure(layer):
    seen = [layer]
    for b in BELOW[layer]:
        seen += [x for x in closure(b) if x not in seen]
    return seen


def case_files(case):
    for d, _, files in os.walk(case):
        for f in files:
            rel = os.path.relpath(os.path.join(d, f), case)
            if rel not in ("expect", "roots"):
                yield rel


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def tree_case(args, case, tmp):
    root = os.path.join(tmp, "src")
    planted = list(case_files(case))
    touched = {rel.split(os.sep, 1)[0] for rel in planted}
    for top in sorted(set(TREE_OF[args.check]) | touched):
        src, dst = os.path.join(args.source, top), os.path.join(root, top)
        if top in touched:
            shutil.copytree(src, dst, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            os.makedirs(root, exist_ok=True)
            os.symlink(src, dst)
    for rel in planted:
        dst = os.path.join(root, rel)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copyfile(os.path.join(case, rel), dst)
    return run([sys.executable, os.path.join(HERE, args.check + ".py"), root])


def symbols_case(args, case, tmp):
    objs = {l: [] for l in LAYERS}
    for rel in sorted(case_files(case)):
        layer = rel.split(os.sep, 1)[0]
        obj = os.path.join(tmp, rel.replace(os.sep, "_") + ".o")
        rc, out = run([args.cc, "-c", "-fPIC", "-o", obj, os.path.join(case, rel)])
        if rc:
            sys.exit("cannot build the fixture %s:\n%s" % (rel, out))
        objs[layer].append(obj)
    for layer, lst in objs.items():
        if not lst:
            src = os.path.join(tmp, "anchor_%s.c" % layer)
            with open(src, "w") as f:
                f.write("int fixture_%s_anchor;\n" % layer)
            obj = src[:-2] + ".o"
            run([args.cc, "-c", "-o", obj, src])
            lst.append(obj)
    return run([sys.executable, os.path.join(HERE, "layer_symbols.py"), args.nm] +
               ["%s=%s" % (l, ":".join(o)) for l, o in objs.items()])


def roots_case(args, case, tmp):
    holds = {l: closure(l) for l in LAYERS}
    with open(os.path.join(case, "roots")) as f:
        for line in f:
            if ":" in line:
                layer, dirs = line.split(":", 1)
                holds[layer.strip()] = dirs.split()
    specs = []
    for layer, dirs in holds.items():
        root = os.path.join(tmp, "roots", layer)
        os.makedirs(root)
        for d in dirs:
            os.symlink(os.path.join(args.source, d), os.path.join(root, d))
        specs.append("%s=%s:%s" % (layer, root, os.path.join(args.source, "include")))
    return run([sys.executable, os.path.join(HERE, "include_roots.py"), args.cxx] + specs)


def cli_case(args, case, tmp):
    cli = os.path.join(tmp, "cli.so")
    rc, out = run([args.cc, "-shared", "-fPIC", "-o", cli, os.path.join(case, "cli.c")])
    if rc:
        sys.exit("cannot build the fixture cli.c:\n%s" % out)
    return run([sys.executable, os.path.join(HERE, "cli_is_offline.py"), args.nm, cli,
                args.runtime, args.offline, args.source])


KINDS = {"includes_go_down": tree_case, "only_arch_writes_code": tree_case,
         "lower_layers_blind": tree_case, "only_arch_reads_insns": tree_case,
         "layer_symbols": symbols_case, "include_roots": roots_case,
         "cli_is_offline": cli_case}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("check", choices=sorted(KINDS))
    ap.add_argument("source")
    ap.add_argument("--cc", default="cc")
    ap.add_argument("--cxx", default="c++")
    ap.add_argument("--nm", default="nm")
    ap.add_argument("--runtime")
    ap.add_argument("--offline")
    args = ap.parse_args()
    args.source = os.path.abspath(args.source)

    top = os.path.join(HERE, "fixtures", args.check)
    cases = sorted(os.listdir(top))
    failing = [c for c in cases if open(os.path.join(top, c, "expect")).readline().strip() == "fail"]
    if len(failing) < 2:
        sys.exit("%s: only %d planted violation(s) in %s" % (args.check, len(failing), top))
    bad = []
    for c in cases:
        case = os.path.join(top, c)
        with open(os.path.join(case, "expect")) as f:
            want, *texts = [l.rstrip("\n") for l in f if l.strip()]
        with tempfile.TemporaryDirectory() as tmp:
            rc, out = KINDS[args.check](args, case, tmp)
        got = "fail" if rc else "pass"
        missing = [t for t in texts if t not in out]
        if got != want or missing:
            bad.append(c)
            print("%s/%s: the check %s (expected to %s)%s\n%s" % (
                args.check, c, "failed" if rc else "passed", want,
                "; its output lacks: " + "; ".join(missing) if missing else "",
                "    " + out.strip().replace("\n", "\n    ")))
        else:
            print("%s/%s: %s as expected" % (args.check, c, "flagged" if rc else "passed"))
    if bad:
        sys.exit("%d of %d fixture(s) of %s not judged as planted" % (len(bad), len(cases),
                                                                      args.check))
    print("%s: %d planted violations flagged, %d controls passed" % (
        args.check, len(failing), len(cases) - len(failing)))


if __name__ == "__main__":
    main()
