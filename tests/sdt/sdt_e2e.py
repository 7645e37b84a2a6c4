#!/usr/bin/env python3
"""End-to-end USDT/SDT probes through dprobe funcs --sdt, dprobe probe, dprobe record -e and
dprobe attach -e, against what the programs print themselves:

  sdt_e2e.py DPROBE SDT_PROG SDT_CXX OPT

SDT_PROG (tests/sdt/sdt_prog.c + sdt_sem.c, built at OPT) prints, at each probe site, the
values the probe's arguments must have and its semaphore's value; SDT_CXX throws, rethrows
and catches, and prints each caught object's and type_info's address (libstdc++'s probes);
/usr/bin/python3 runs a script whose function entries are counted (python's probes).
"""
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

DPROBE, PROG, CXX, OPT = sys.argv[1:5]
PYTHON = os.path.realpath("/usr/bin/python3")
WORK = tempfile.mkdtemp(prefix="dprobe-sdt-")
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


def values(text):
    return dict(re.findall(r'(\w+)=("[^"]*"|\S+)', text))


def events(dat):
    """(event, {arg: value}) of each record of DAT, in order."""
    out = []
    for line in dprobe(["report", "-i", dat, "--no-header"]).stdout.splitlines():
        m = re.match(r"^\s*\S+-\d+\s+\[\d+\] \S+\s+[\d.]+: (\w+): \([^)]*\)(.*)$", line)
        if m:
            out.append((m.group(1), values(m.group(2))))
    return out


def num(v):
    return int(v, 0)


# ---- the listing -------------------------------------------------------------------------
out = dprobe(["funcs", "--sdt", "-x", PROG]).stdout
listed = dict(re.findall(r"^(sdt_\S+)\s+0x[0-9a-f]+\s+(\S+)", out, re.M))
check(set(listed) == {"sdt_dpt:work", "sdt_dpt:global", "sdt_dpt:members", "sdt_dpt:scaled",
                      "sdt_dpt:nosem"}, "funcs --sdt lists the five probes:\n" + out)
check(listed.get("sdt_dpt:work", "-") != "-" and listed.get("sdt_dpt:nosem") == "-",
      "semaphores listed for work, none for nosem:\n" + out)
p = dprobe(["funcs", "--sdt", "-x", CXX], ok=False)
check(p.returncode != 0 and "has no SDT probes" in p.stderr, "a file without notes: %r" % p.stderr)

# ---- dprobe probe: the uprobe-style lines --------------------------------------------------
p = dprobe(["probe", "-x", PROG, "sdt_dpt:work"])
real = os.path.realpath(PROG)
check(re.match(r"^p:sdt_dpt/work %s:0x[0-9a-f]+\(0x[0-9a-f]+\) arg1=\S+:s32 arg2=\S+:s32 "
               r"arg3=\S+:s64 arg4=\S+:u64 arg5=\S+:u8$" % re.escape(real), p.stdout.strip()),
      "probe sdt_dpt:work: %r" % p.stdout)
# Fetch args after the name are added to the line.
p = dprobe(["probe", "-x", PROG, "sdt_dpt:members low=%ax:u8"])
check(p.stdout.startswith("p:sdt_dpt/members ") and p.stdout.rstrip().endswith(" low=%ax:u8"),
      "probe 'sdt_dpt:members low=%%ax:u8': %r" % p.stdout)
p = dprobe(["probe", "-x", PROG, "sdt_dpt:nosuch"], ok=False)
check(p.returncode != 0 and "no SDT probe matches 'sdt_dpt:nosuch'" in p.stderr, p.stderr)

# ---- record: every probe's arguments, the semaphores counted ------------------------------
p = dprobe(["record", "-q", "-o", "s.dat", "-e", "sdt_dpt:*", "--", PROG, "4"])
printed = [(l.split(" ", 1)[0][6:], values(l)) for l in p.stdout.splitlines()
           if l.startswith("probe:")]
got = events("s.dat")
check([e for e, _ in got] == [e for e, _ in printed],
      "one event per printed probe line, in order:\n%s\n%s" % (got, printed))
for (ev, g), (_, w) in zip(got, printed):
    if ev == "work":
        check(w["sem"] == "1", "work's semaphore is set while recording: %s" % w)
        want = [num(w["k"]), num(w["neg"]), num(w["sum"]), num(w["it"]), num(w["uc"])]
    elif ev == "members":
        want = [num(w["id"]), num(w["small"]), num(w["tiny"]), num(w["c"])]
    elif ev == "global":
        check(w["sem"] == "1", "global's semaphore is set while recording: %s" % w)
        want = [num(w["counter"]), num(w["zeroed"]), 42, num(w["label"]), num(w["y"])]
        if "arg6" in g:
            want.append(num(w["elem"]))
    elif ev == "scaled":
        bits = struct.unpack("<Q", struct.pack("<d", 1.5 * num(w["k"])))[0]
        want = [bits, num(w["k"])]
    else:
        want = []
    have = [num(g["arg%d" % (i + 1)]) for i in range(len(want))]
    check(have == want, "%s: arguments %s, the program printed %s (%s)" % (ev, have, want, w))
if OPT == "O2":
    check("left out arg6 (-4@(%rdx,%rsi,4)): base+index addressing" in p.stderr,
          "the indexed operand is left out with a note: %r" % p.stderr)
# Not recording: the semaphores stay 0, the guarded probes' arguments are not evaluated.
plain = subprocess.run([PROG, "2"], capture_output=True, text=True).stdout
check("probe:work" not in plain and "work_sem=0 global_sem=0" in plain,
      "untraced, the semaphores are 0: %r" % plain)

# ---- tracepoints: the notes as static events, t: events on them (tracefs.md) --------------
# Arguments by name and by position, typed by the notes; the semaphore counted while the t
# event (which arms its tracepoint) is enabled; a hist on the t event printed at the end.
p = dprobe(["record", "-q", "-o", "t.dat", "-e", "t:tp/work work k=arg1 $arg2",
            "-e", "t:tp/members members id=arg1 tiny=$arg3", "--trigger",
            "tp:work:hist:keys=k", "--", PROG, "3"])
printed = [(l.split(" ", 1)[0][6:], values(l)) for l in p.stdout.splitlines()
           if l.startswith("probe:work") or l.startswith("probe:members")]
got = events("t.dat")
check([e for e, _ in got] == [e for e, _ in printed],
      "one t event per printed work/members line, in order:\n%s\n%s" % (got, printed))
for (ev, g), (_, w) in zip(got, printed):
    if ev == "work":
        check(w["sem"] == "1", "work's semaphore is set by the t event: %s" % w)
        check(g == {"k": w["k"], "arg2": w["neg"]}, "t:tp/work %s, printed %s" % (g, w))
    else:
        check(num(g["id"]) == num(w["id"]) and num(g["tiny"]) == num(w["tiny"]),
              "t:tp/members %s, printed %s" % (g, w))
hist = p.stdout[p.stdout.find("# events/tp/work/hist"):]
check(all(re.search(r"\{ k: +%d \} hitcount: +1\n" % k, hist) for k in (1, 2, 3)) and
      "    Hits: 3\n" in hist, "the t event's hist at the end:\n" + p.stdout)
p = dprobe(["record", "-q", "-o", "b.dat", "-e", "t nosuch", "--", PROG, "1"], ok=False)
check(p.returncode != 0 and "Tracepoint is not found" in p.stderr,
      "a t event on no tracepoint: %r" % p.stderr)

# ---- libstdc++: throw, rethrow, catch ----------------------------------------------------
p = dprobe(["record", "-q", "-o", "x.dat", "-e", "sdt_libstdcxx:throw", "-e",
            "sdt_libstdcxx:catch", "-e", "sdt_libstdcxx:rethrow", "--", CXX, "4"])
caught = [values(l) for l in p.stdout.splitlines() if l.startswith("caught")]
check(len(caught) == 4, "the program caught 4 exceptions: %r" % p.stdout)
got = events("x.dat")
seq = [e for e, _ in got]
check(seq == ["throw", "catch", "throw", "catch", "rethrow", "catch"] * 2,
      "throw/catch/rethrow sequence: %s" % seq)
finals = [g for e, g in got if e == "catch"][1::2] if len(seq) == 12 else []
throws = [g for e, g in got if e == "throw"]
for i, w in enumerate(caught):
    # The last catch of each round is the program's own; a rethrown exception is also
    # caught once inside pass_on. Throw and catch name the same object and type.
    g_catch = [g for e, g in got if e == "catch"]
    g_catch = [g_catch[0], g_catch[2], g_catch[3], g_catch[5]][i] if len(g_catch) == 6 else {}
    for g, what in ((throws[i] if i < len(throws) else {}, "throw"), (g_catch, "catch")):
        check(num(g.get("arg1", "0")) == num(w["obj"]) and num(g.get("arg2", "0")) == num(w["type"]),
              "%s #%d: object/type %s, the program printed %s" % (what, i, g, w))

# ---- python3: function entries counted (record), probes listed while attached -------------
py = os.path.join(WORK, "ticks.py")
with open(py, "w") as f:
    f.write("import os, sys\n"
            "def tick(n):\n"
            "    return n + 1\n"
            "print('ready %d' % os.getpid(), flush=True)\n"
            "sys.stdin.readline()\n"
            "s = 0\n"
            "for i in range(25):\n"
            "    s = tick(s)\n"
            "print('s=%d' % s, flush=True)\n"
            "sys.stdin.readline()\n")
out = dprobe(["funcs", "--sdt", "-x", PYTHON, "sdt_python:function__*"]).stdout
m = re.search(r"^sdt_python:function__entry\s+\S+\s+\S+\s+8@%(\w+) 8@%(\w+)", out, re.M)
check(m is not None, "python's function__entry passes filename and function name in "
                     "registers:\n" + out)
if m:
    regs = {"rbp": "bp", "rbx": "bx", "r12": "r12", "r13": "r13", "r14": "r14", "r15": "r15",
            "rax": "ax", "rdi": "di", "rsi": "si", "rdx": "dx", "rcx": "cx"}
    names = "file=+0(%%%s):string fn=+0(%%%s):string" % (regs.get(m.group(1), m.group(1)),
                                                         regs.get(m.group(2), m.group(2)))
    # Python 3.11 reports function entries only while its line probe is enabled too.
    specs = ["-e", "sdt_python:line", "-e", "sdt_python:function__entry " + names,
             "-e", "sdt_python:function__return " + names]
    p = subprocess.run([DPROBE, "record", "-q", "-o", "p.dat"] + specs + ["--", PYTHON, py],
                       cwd=WORK, env=ENV, input="\n\n", capture_output=True, text=True,
                       timeout=120)
    check(p.returncode == 0 and "s=25" in p.stdout, "python under record: %r" % p.stderr)
    got = events("p.dat")
    ticks = [e for e, g in got if g.get("fn") == '"tick"' and g.get("file") == '"%s"' % py]
    check(ticks.count("function__entry") == 25 and ticks.count("function__return") == 25,
          "25 entries and returns of tick: %d, %d" % (ticks.count("function__entry"),
                                                      ticks.count("function__return")))
    # attach: the same probes into the running interpreter, listed in its kprobes/list.
    t = subprocess.Popen([PYTHON, py], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True, cwd=WORK, env=ENV)
    r = re.match(r"ready (\d+)", t.stdout.readline())
    check(r is not None, "python started")
    if r:
        pid = r.group(1)
        a = dprobe(["attach", "-B", "-q", "-p", pid, "-o", "a.dat"] + specs, ok=False)
        check(a.returncode == 0, "attach -e sdt_python:...: %r" % a.stderr)
        lst = dprobe(["ctl", "-p", pid, "cat", "kprobes/list"], ok=False).stdout
        check(len(lst.splitlines()) == 3, "three SDT kprobes in the interpreter:\n" + lst)
        t.stdin.write("\n")
        t.stdin.flush()
        check(t.stdout.readline().strip() == "s=25", "the attached interpreter ran on")
        dprobe(["detach", "-p", pid], ok=False)
        t.stdin.write("\n")
        t.stdin.flush()
        check(t.wait(timeout=60) == 0, "the attached interpreter exited normally")
        got = events("a.dat")
        ticks = [e for e, g in got if g.get("fn") == '"tick"']
        check(ticks.count("function__entry") == 25,
              "attached: 25 entries of tick: %d" % ticks.count("function__entry"))
    else:
        t.kill()

if failures:
    sys.exit("%d failure(s)" % len(failures))
shutil.rmtree(WORK, ignore_errors=True)
print("ok")
