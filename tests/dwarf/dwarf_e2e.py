#!/usr/bin/env python3
"""End-to-end DWARF probes: probes by source line and by variable name, defined with
`dprobe probe` and recorded with `dprobe record -e`, must see the values the program prints
itself on the probed lines (dwvars.c marks them "probe:TAG").

  dwarf_e2e.py DPROBE BINDIR SRCDIR OPT

BINDIR holds dwvars and libdwlib.so built with -g at OPT (O0 or O2).
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

DPROBE, BINDIR, SRCDIR, OPT = sys.argv[1:5]
PROG = os.path.join(BINDIR, "dwvars")
LIB = os.path.join(BINDIR, "libdwlib.so")
SRC = os.path.join(SRCDIR, "dwvars.c")
LIBSRC = os.path.join(SRCDIR, "dwlib.c")
WORK = tempfile.mkdtemp(prefix="dprobe-dwarf-")
ENV = dict(os.environ, DPROBE_PROBES=os.path.join(WORK, "probes"),
           XDG_RUNTIME_DIR=os.path.join(WORK, "run"))
os.makedirs(ENV["XDG_RUNTIME_DIR"], mode=0o700)
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def dprobe(args, ok=True):
    p = subprocess.run([DPROBE] + args, cwd=WORK, env=ENV, capture_output=True, text=True,
                       timeout=120)
    if ok and p.returncode != 0:
        sys.exit("FAIL: dprobe %s exited %d\nstdout:\n%s\nstderr:\n%s" %
                 (" ".join(args), p.returncode, p.stdout, p.stderr))
    return p


def line_of(path, mark):
    with open(path) as f:
        for n, text in enumerate(f, 1):
            if mark in text:
                return n
    sys.exit("no '%s' in %s" % (mark, path))


def decl_line(path, func):
    """The line a function's definition starts on (what FUNC:N counts from)."""
    with open(path) as f:
        for n, text in enumerate(f, 1):
            if re.match(r"^\S.*\b%s\(.*\)\s*$" % func, text):
                return n
    sys.exit("no definition of %s in %s" % (func, path))


def rel(path, func, mark):
    return line_of(path, mark) - decl_line(path, func)


def values(text):
    """key=value pairs of a program line or a trace event; strings lose their quotes."""
    return {k: v.strip('"') for k, v in re.findall(r'(\w+)=("[^"]*"|\{[^}]*\}|\S+)', text)}


# Probe definitions: event name -> (binary, perf-probe spec, tag of the printed line).
score_l = rel(SRC, "score", "probe:score")
locals_l = rel(SRC, "locals", "probe:locals")
PROBES = {
    # FUNC:RLN, members through a pointer, nested members, bitfields, a string member,
    # an array element, a parameter and a local.
    "score": (PROG, "score=score:%d s x=it->pos.x y=it->pos.y flags=it->flags "
              "level=it->level name=it->name:string h2=it->hist[2] scale id=it->id" % score_l,
              "score"),
    # SRC:ALN, a loop variable, an element through a pointer.
    "sum": (PROG, "sum=dwvars.c:%d i total a1=a[1]" % line_of(SRC, "probe:sum"), "sum"),
    # FUNC@SRC:RLN, members of a local struct, a whole array, a char array, a global, a
    # file-scope static, a member of a global struct.
    "locals": (PROG, "locals=locals@dwvars.c:%d ptx=pt.x pty=pt.y arr word counter calls "
               "oy=origin.y" % locals_l, "locals"),
    # $vars: every variable with a value there.
    "lvars": (PROG, "lvars=locals:%d $vars" % locals_l, "locals"),
    # The function entry by parameter names (the calling convention's registers).
    "sentry": (PROG, "sentry=score id=it->id scale", "score"),
    # A library: its static 'counter', not the program's global of the same name.
    "lib": (LIB, "lib=lib_step:%d counter k" % rel(LIBSRC, "lib_step", "probe:lib"), "lib"),
}

lines, notes = {}, {}
for ev, (binary, spec, _) in PROBES.items():
    p = dprobe(["probe", "-x", binary, spec])
    lines[ev] = p.stdout.strip()
    notes[ev] = p.stderr
    check(lines[ev].startswith("p:"), "%s: a probe line: %r" % (ev, p.stdout))

rec = ["record", "-q", "-o", "t.dat"]
for ev in PROBES:
    rec += ["-e", lines[ev]]
p = dprobe(rec + ["--", PROG])
printed = {}
for text in p.stdout.splitlines():
    tag = text.split(" ", 1)[0]
    printed.setdefault(tag, []).append(values(text))

report = dprobe(["report", "-i", "t.dat", "--no-header"]).stdout
events = {}
for text in report.splitlines():
    m = re.match(r"^\s*\S+-\d+\s+\[\d+\] \S+\s+[\d.]+: (\w+): \([^)]*\)(.*)$", text)
    if m:
        events.setdefault(m.group(1), []).append(values(m.group(2)))

for ev, (_, spec, tag) in PROBES.items():
    got, want = events.get(ev, []), printed.get(tag, [])
    check(len(want) > 0 and len(got) == len(want),
          "%s: %d events for %d printed '%s' lines\n%s" % (ev, len(got), len(want), tag, report))
    for i, (g, w) in enumerate(zip(got, want)):
        common = [k for k in g if k in w]
        check(len(common) >= 2,
              "%s #%d: compares %s (event %s, printed %s)" % (ev, i, common, g, w))
        for k in common:
            check(g[k] == w[k], "%s #%d: %s=%s, the program printed %s (line: %s)" %
                  (ev, i, k, g[k], w[k], lines[ev]))
    if ev != "lvars":
        for g in got:
            check(set(g) <= set(w for w in printed.get(tag, [{}])[0]),
                  "%s: every fetched variable is printed: %s" % (ev, sorted(g)))

# dynamic_events lines naming parameters and members (the kernel's BTF-argument syntax,
# resolved from DWARF inside the traced process), on the program, on its stripped copy
# (whose DWARF is in the separate file .gnu_debuglink names) and in the library.
BTF_LINES = {
    "bscore": ("f:btf/bscore score id=it->id x=it->pos.x y=it->pos.y flags=it->flags "
               "level=it->level name=it->name hist=it->hist scale", "score"),
    "bmeta": ("p:btf/bmeta score $arg*", "score"),
    "blib": ("f:btf/blib lib_step k", "lib"),
    # A typed $retval (lib_step returns the counter it printed, as s32: decimal, not the
    # untyped x64's hex) and an entry argument saved for the exit.
    "bret": ("f:btf/bret lib_step%return counter=$retval k", "lib"),
}
for binary in (PROG, os.path.join(BINDIR, "stripped", "dwvars")):
    rec = ["record", "-q", "-o", "b.dat"]
    for line, _ in BTF_LINES.values():
        rec += ["-e", line]
    p = dprobe(rec + ["--", binary], ok=False)
    check(p.returncode == 0, "record with DWARF names on %s: %s" % (binary, p.stderr))
    bprinted = {}
    for text in p.stdout.splitlines():
        tag = text.split(" ", 1)[0]
        bprinted.setdefault(tag, []).append(values(text))
    breport = dprobe(["report", "-i", "b.dat", "--no-header"]).stdout
    bevents = {}
    for text in breport.splitlines():
        m = re.match(r"^\s*\S+-\d+\s+\[\d+\] \S+\s+[\d.]+: (\w+): \([^)]*\)(.*)$", text)
        if m:
            bevents.setdefault(m.group(1), []).append(values(m.group(2)))
    for ev, (line, tag) in BTF_LINES.items():
        got, want = bevents.get(ev, []), bprinted.get(tag, [])
        check(len(want) > 0 and len(got) == len(want),
              "%s on %s: %d bevents for %d bprinted lines\n%s" % (ev, binary, len(got), len(want),
                                                                breport))
        for i, (g, w) in enumerate(zip(got, want)):
            common = [k for k in g if k in w]
            check(len(common) >= (2 if ev in ("bscore", "bret") else 1),
                  "%s #%d: compares %s (event %s, bprinted %s)" % (ev, i, common, g, w))
            for k in common:
                check(g[k] == w[k], "%s #%d on %s: %s=%s, the program bprinted %s" %
                      (ev, i, binary, k, g[k], w[k]))
    for g, w in zip(bevents.get("bscore", []), bprinted.get("score", [])):
        # hist is the whole array: its element 2 is what the program prints as h2.
        check(g.get("hist", "").strip("{}").split(",")[2:3] == [w["h2"]],
              "bscore: hist=%s, h2=%s" % (g.get("hist"), w["h2"]))
    for g in bevents.get("bmeta", []):
        check(set(g) == {"it", "scale"}, "$arg* names score's parameters: %s" % sorted(g))

# A name the debug info does not know is refused before the program runs, with the
# kernel's error and caret.
p = dprobe(["record", "-q", "-o", "bad.dat", "-e", "f:ev score it->nosuch", "--", PROG], ok=False)
check(p.returncode != 0 and p.stdout == "" and "This field is not found." in p.stderr and
      "    Command: f:ev score it->nosuch\n" + " " * 28 + "^" in p.stderr,
      "record refuses it->nosuch offline: %r" % p.stderr)

# $vars: what it leaves out is said, never guessed.
lvars = events.get("lvars", [{}])[0]
check({"arr", "word"} <= set(lvars), "$vars fetched arr and word: %s" % lines["lvars"])
check("pt" not in lvars and "left out 'pt'" in notes["lvars"] and "struct point" in notes["lvars"],
      "$vars leaves the struct pt out, with a note: %r" % notes["lvars"])
if "seed" not in lvars:
    check("left out 'seed'" in notes["lvars"],
          "$vars says why seed is missing: %r" % notes["lvars"])
if OPT == "O0":
    check("seed" in lvars, "at -O0 every local has a value: %s" % lines["lvars"])

# --line: probe-able lines numbered from the declaration, the others indented.
out = dprobe(["probe", "-x", PROG, "--line", "locals"]).stdout.splitlines()
check(out[0] == "<locals@%s:0>" % SRC, "--line header: %r" % out[0])
numbered = {int(l[:7]): l[9:] for l in out[1:] if l[:7].strip().isdigit()}
check("probe:locals" in numbered.get(locals_l, ""), "--line numbers the probed line %d:\n%s" %
      (locals_l, "\n".join(out)))
check(any(l.startswith("         ") and "A line without code" in l for l in out),
      "--line shows a line without code unnumbered:\n" + "\n".join(out))
check(any(l == "         " for l in out), "--line shows the blank line unnumbered")

# --vars at the probed line.
out = dprobe(["probe", "-x", PROG, "--vars", "score:%d" % score_l]).stdout
check(out.startswith("Available variables at score:%d\n\t@<score+" % score_l), "--vars: %r" % out)
for v in ("struct item*\tit", "int\tscale", "long int\ts"):
    check("\t\t%s\n" % v in out, "--vars lists %r: %r" % (v, out))
out = dprobe(["probe", "-x", PROG, "--vars", "locals:%d" % locals_l]).stdout
for v in ("struct point\tpt", "int[3]\tarr", "char[8]\tword"):
    check("\t\t%s\n" % v in out, "--vars lists %r: %r" % (v, out))

# Refusals, each with its reason; nothing is guessed.
BAD = [
    ("score:%d nosuch" % score_l, "no variable 'nosuch'"),
    ("locals:%d pt" % locals_l, "is a struct point: name a member"),
    ("score:%d it.id" % score_l, "is a pointer: use '->'"),
    ("locals:%d pt->x" % locals_l, "is not a pointer: use '.'"),
    ("score:%d it->nosuch" % score_l, "has no member 'nosuch'"),
    ("half:%d d" % rel(SRC, "half", "line:half"), "floating-point"),
    ("locals seed_nope", "is not a parameter of locals"),
    ("locals word", "is a local variable of locals"),
    ("score:1000", "has no code to probe"),
    ("nosuch_func:3", "no function 'nosuch_func'"),
]
if OPT == "O2":
    BAD.append(("twice:%d v" % rel(SRC, "twice", "line:twice"), "in 2 places"))
for spec, why in BAD:
    p = dprobe(["probe", "-x", PROG, spec], ok=False)
    check(p.returncode != 0 and why in p.stderr,
          "%r is refused with %r: %r" % (spec, why, p.stderr))

if failures:
    sys.exit("%d failure(s)" % len(failures))
shutil.rmtree(WORK, ignore_errors=True)
print("ok")
