#!/usr/bin/env python3
"""dprobe report --format trace-dat, opened by the kernel's tools.

    trace_dat_test.py DPROBE GRAPH_PROG TRACEDAT_READ TRACE_CMD

Records tests/progs/graph (built with -pg -mfentry) with a function graph of its own
functions and an fprobe event on leaf(), writes the recording as a trace.dat, then:
  - libtracecmd (tracedat_read.cpp) reads every record back: the same records as dprobe's
    own text report (count, order, thread, timestamp, event), with the right field values;
  - the real `trace-cmd report` prints the call graph of each thread, nested as the program
    calls, and the event's values.
Then records it again with arguments and return values in the graph (record -A/-R: a call's
graph record and its values in one record, split by the reader): libtracecmd and
`trace-cmd report` read the graph records and the values, a string included, from the
graph_args events' formats in the file.
"""
import os
import re
import subprocess
import sys
import tempfile

dprobe, prog, reader, trace_cmd = sys.argv[1:5]
checks = 0


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def ok(msg):
    global checks
    checks += 1
    print("ok %d - %s" % (checks, msg))


def run(argv, **kw):
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=120, **kw)
    if p.returncode != 0:
        fail("%s exited %d:\n%s%s" % (" ".join(argv), p.returncode, p.stdout, p.stderr))
    return p.stdout


with tempfile.TemporaryDirectory() as d:
    rec = os.path.join(d, "graph.dat")
    dat = os.path.join(d, "graph.trace.dat")
    out = run([dprobe, "record", "-o", rec, "-F", "main", "-F", "middle", "-F", "leaf",
               "-F", "fib", "-F", "worker", "-e", "f:leafev leaf x=$arg1:s32", "--", prog])
    if out.strip() != "7 23":
        fail("the program's output changed: %r" % out)
    run([dprobe, "report", "-i", rec, "--format", "trace-dat", "-o", dat])
    ok("dprobe report --format trace-dat wrote %d bytes" % os.path.getsize(dat))

    # dprobe's own view of the records.
    line_re = re.compile(r"^\s*(.*)-(\d+)\s+\[(\d+)\] \.{5}\s+(\d+\.\d{6}): (\w+): ?(.*)$")
    ours = []
    for line in run([dprobe, "report", "-i", rec, "--no-header"]).splitlines():
        m = line_re.match(line)
        if not m:
            fail("unexpected dprobe report line: %r" % line)
        ours.append((m.group(4), int(m.group(2)), m.group(5), m.group(6)))
    if len(ours) != 30:  # 13 calls of main's thread, 4 of the worker's, 2 x 2 leafev... see below
        fail("dprobe report has %d records, expected 30:\n%s" % (len(ours), "\n".join(map(str, ours))))

    # libtracecmd's view.
    theirs = []
    for line in run([reader, dat]).splitlines():
        f = line.split()
        ts = int(f[0])
        us = (ts + 500) // 1000  # the kernel's ns2usecs rounding, as dprobe prints
        fields = dict(x.split("=", 1) for x in f[4:])
        theirs.append(("%d.%06d" % (us // 1000000, us % 1000000), int(f[1]), f[3], fields))
    if len(theirs) != len(ours):
        fail("libtracecmd read %d records, dprobe reports %d" % (len(theirs), len(ours)))
    for a, b in zip(ours, theirs):
        sysname = b[2].split(":")[1]
        if (a[0], a[1], a[2]) != (b[0], b[1], sysname):
            fail("record differs: dprobe %r, libtracecmd %r" % (a, b))
    ok("libtracecmd reads the same %d records (time, thread, event) as dprobe report" % len(ours))

    xs = sorted(int(r[3]["x"]) for r in theirs if r[2] == "fprobes:leafev")
    if xs != [1, 2, 10, 11]:
        fail("leafev x values read by libtracecmd: %r" % xs)
    entries = [r for r in theirs if r[2] == "ftrace:funcgraph_entry"]
    exits = [r for r in theirs if r[2] == "ftrace:funcgraph_exit"]
    if len(entries) != 13 or len(exits) != 13:
        fail("funcgraph records: %d entries, %d exits" % (len(entries), len(exits)))
    for e in exits:
        if int(e[3]["calltime"]) > int(e[3]["rettime"]):
            fail("calltime after rettime: %r" % (e,))
    ok("event and function-graph fields decoded from the formats in the file")

    # The real trace-cmd report: the graph of each thread.
    rep = run([trace_cmd, "report", dat])
    graph = {}
    events = []
    rep_re = re.compile(r"^\s*\S+-(\d+)\s+\[\d+\]\s+\d+\.\d+: (\w+):\s+(.*)$")
    for line in rep.splitlines():
        m = rep_re.match(line)
        if not m:
            continue
        tid, name, rest = int(m.group(1)), m.group(2), m.group(3)
        if name.startswith("funcgraph_"):
            graph.setdefault(tid, []).append(rest.split("|", 1)[1].strip())
        else:
            events.append((tid, name, rest))
    main_tid = min(graph)
    want_main = ["main() {", "middle() {", "leaf();", "leaf();", "}", "fib() {", "fib() {",
                 "fib();", "fib();", "}", "fib();", "}", "}"]
    want_worker = ["worker() {", "middle() {", "leaf();", "leaf();", "}", "}"]
    if graph.get(main_tid) != want_main:
        fail("trace-cmd report, main thread:\n%s\n--- report:\n%s" % (graph.get(main_tid), rep))
    workers = [t for t in graph if t != main_tid]
    if len(workers) != 1 or graph[workers[0]] != want_worker:
        fail("trace-cmd report, worker thread: %r\n--- report:\n%s" % (graph, rep))
    ok("trace-cmd report prints each thread's call graph")
    vals = sorted(int(re.search(r"x=(\d+)", r).group(1)) for t, n, r in events if n == "leafev")
    if vals != [1, 2, 10, 11]:
        fail("trace-cmd report's leafev lines: %r" % events)
    ok("trace-cmd report prints the probe event's values")

# Arguments and return values in the graph: leaf's argument and fib's return value are plain
# loads (the light path), main's is a string (argv[0], the full path).
with tempfile.TemporaryDirectory() as d:
    rec = os.path.join(d, "args.dat")
    dat = os.path.join(d, "args.trace.dat")
    out = run([dprobe, "record", "-o", rec, "-F", "main", "-F", "middle", "-F", "leaf",
               "-F", "fib", "-F", "worker", "-A", "leaf@arg1/d", "-R", "fib@retval/d",
               "-A", "main@prog=+0(+0(%si)):string", "--", prog])
    if out.strip() != "7 23":
        fail("the program's output changed: %r" % out)
    graph = run([dprobe, "report", "-i", rec, "--format", "graph", "--no-header"])
    for want in ("leaf(1);", "leaf(2);", "leaf(10);", "leaf(11);", "fib() = 1;",
                 "} /* fib = 2 */", 'main("%s") {' % prog):
        if want not in graph:
            fail("report graph lacks %r:\n%s" % (want, graph))
    ok("dprobe report shows the values inline in the graph")
    run([dprobe, "report", "-i", rec, "--format", "trace-dat", "-o", dat])
    ours = []
    for line in run([dprobe, "report", "-i", rec, "--no-header"]).splitlines():
        m = line_re.match(line)
        if not m:
            fail("unexpected dprobe report line: %r" % line)
        ours.append((m.group(4), int(m.group(2)), m.group(5), m.group(6)))
    # The 26 graph records and the 4 leafev of before, now 4 leaf arguments, 5 fib return
    # values and main's argument.
    if len(ours) != 36:
        fail("dprobe report has %d records, expected 36:\n%s" % (len(ours), "\n".join(map(str, ours))))
    theirs = []
    for line in run([reader, dat]).splitlines():
        f = line.split()
        us = (int(f[0]) + 500) // 1000
        fields = dict(x.split("=", 1) for x in f[4:])
        theirs.append(("%d.%06d" % (us // 1000000, us % 1000000), int(f[1]), f[3], fields))
    if [(a[0], a[1], a[2]) for a in ours] != [(b[0], b[1], b[2].split(":")[1]) for b in theirs]:
        fail("libtracecmd and dprobe report differ:\n%s\n%s" % (ours, theirs))
    ok("libtracecmd reads the same %d records as dprobe report" % len(ours))
    args = sorted(int(r[3]["arg1"]) for r in theirs if r[2].startswith("graph_args:args") and
                  "arg1" in r[3])
    rets = sorted(int(r[3]["retval"]) for r in theirs if r[2].startswith("graph_args:retval"))
    if args != [1, 2, 10, 11] or rets != [0, 1, 1, 1, 2]:
        fail("values read by libtracecmd: leaf %r, fib %r\n%s" % (args, rets, theirs))
    if sum(1 for r in theirs if r[2] == "ftrace:funcgraph_entry") != 13:
        fail("funcgraph entries read by libtracecmd:\n%s" % theirs)
    ok("libtracecmd decodes the values from the graph_args formats")
    rep = run([trace_cmd, "report", dat])
    for want in (r"args\d+: +\(\w+\) arg1=1$", r"args\d+: +\(\w+\) arg1=11$",
                 r"retval\d+: +\(\w+ <- \w+\) retval=2$",
                 r'args\d+: +\(\w+\) prog="%s"$' % re.escape(prog)):
        if not re.search(want, rep, re.M):
            fail("trace-cmd report lacks %r:\n%s" % (want, rep))
    if "[UNKNOWN" in rep or "(NULL)" in rep:
        fail("trace-cmd report has unknown records:\n%s" % rep)
    ok("trace-cmd report prints the values, the string included")

print("PASS (%d checks)" % checks)
