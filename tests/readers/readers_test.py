#!/usr/bin/env python3
"""Every record a dprobe session writes is readable by every reader.

    readers_test.py DPROBE PROG TRACE_CMD CASE

PROG is tests/readers/readers_prog (-O2 -g, no patch sites). Each case runs a `dprobe record`
session and a `dprobe attach` one (where it applies), writes records the way a user does (the
agent's graph, the tracefs tree's tracers and triggers, trace_marker, events created and
deleted mid-session) through `dprobe ctl`, and reads them with the live `trace` and
`trace_pipe`, `dprobe report` in every format, and the real `trace-cmd report` of the
trace.dat that `dprobe report --format trace-dat` writes:

  marker         trace_marker (top level, and an instance's where FUSE mounts the tree) in a
                 session (it failed with EBADF)
  graph_live     the agent's graph records in the live trace, trace_pipe and the
                 function_graph layout (they printed "Unknown type 11")
  graph_values   record -A/-R's graph records with values: their graph records in the live
                 trace and trace_pipe (the values printed "Unknown type 100"), the values in
                 every report format and trace-cmd
  tracers        echo function / function_graph > current_tracer mid-session: report's
                 formats and trace-cmd (report read the pid into the addresses)
  triggers       a stacktrace command, func_stack_trace, an event deleted and created again
                 with other arguments (report printed "Unknown type 4"; trace-cmd "(NULL)")
  cxx            C++ names in trace-cmd's output demangled as report shows them
  killed         a program killed by SIGSEGV is marked at the end of its graph
  all_functions  an empty set_ftrace_filter traces every function available_filter_functions
                 lists (nothing was traced on a program without patch sites)
  usdt_late      the tracepoint (USDT static event) of a library the program loads after the
                 session started, enabled through its file: its records read by report and
                 trace-cmd (the recording had no format for them)
  marker_triggers  triggers on ftrace/print fired by trace_marker writes mid-session: a hist
                 counting the writer's markers, a stacktrace after each, and a traceoff

    readers_test.py DPROBE PROG TRACE_CMD usdt_late SDT_LIB
"""
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

DPROBE, PROG, TRACE_CMD, CASE = sys.argv[1:5]
SDT_LIB = sys.argv[5] if len(sys.argv) > 5 else None
checks = 0


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def check(cond, msg):
    global checks
    if not cond:
        fail(msg)
    checks += 1
    print("ok %d - %s" % (checks, msg.splitlines()[0]))


def run(argv, ok=True, timeout=120):
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       errors="replace", timeout=timeout)
    if ok and p.returncode != 0:
        fail("%s exited %d:\n%s%s" % (" ".join(argv), p.returncode, p.stdout, p.stderr))
    return p


def ctl(pid, *args, ok=True):
    return run([DPROBE, "ctl", "-p", str(pid)] + list(args), ok=ok)


def children(pid):
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def runs_prog(pid):
    try:
        return os.path.realpath("/proc/%d/exe" % pid) == os.path.realpath(PROG)
    except OSError:
        return False


def wait_served(pid, proc=None):
    """Until the process serves its tracefs tree (its socket answers)."""
    for _ in range(200):
        if proc is not None and proc.poll() is not None:
            fail("the session ended early: %s" % (proc.stderr.read() if proc.stderr else ""))
        if ctl(pid, "cat", "tracing_on", ok=False).returncode == 0:
            return
        time.sleep(0.05)
    fail("process %d never served its tracefs tree" % pid)


class session:
    """A `dprobe record` of PROG ARGS, or a `dprobe attach -B` to it, writing DAT."""

    def __init__(self, mode, dat, opts, args=("run", "60")):
        self.mode, self.dat = mode, dat
        if mode == "record":
            self.proc = subprocess.Popen([DPROBE, "record", "-q", "-o", dat] + list(opts) +
                                         ["--", PROG] + list(args), stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, text=True)
            # The program, once it runs PROG: record has other children (its sweeper of
            # the runtime files of dead processes), and the program's first moments are
            # dprobe record's own code until it execs.
            for _ in range(200):
                kids = [k for k in children(self.proc.pid) if runs_prog(k)]
                if kids:
                    break
                time.sleep(0.02)
            else:
                fail("dprobe record started no program")
            self.pid = kids[0]
            wait_served(self.pid, self.proc)
        else:
            self.proc = subprocess.Popen([PROG] + list(args), stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, text=True)
            self.pid = self.proc.pid
            time.sleep(0.1)
            run([DPROBE, "attach", "-B", "-q", "-p", str(self.pid), "-o", dat] + list(opts))
            wait_served(self.pid)

    def mount(self):
        """The FUSE mount of the process's tree, or None (no FUSE here)."""
        with open("/proc/mounts") as f:
            for line in f:
                m = line.split()
                if m[2] == "fuse.tracefs" and m[1].endswith("/%d" % self.pid):
                    return m[1]
        return None

    def end(self):
        """Ends the session, and the program (SIGUSR1 ends its loop)."""
        if self.mode == "attach":
            run([DPROBE, "detach", "-p", str(self.pid)])
        try:
            os.kill(self.pid, signal.SIGUSR1)
        except ProcessLookupError:
            pass
        out, err = self.proc.communicate(timeout=60)
        return self.proc.returncode, out, err


def report(dat, fmt="text", *extra):
    return run([DPROBE, "report", "-i", dat, "--format", fmt] + list(extra)).stdout


def chrome(dat, work):
    path = os.path.join(work, "c.json")
    run([DPROBE, "report", "-i", dat, "--format", "chrome", "-o", path])
    with open(path) as f:
        return json.load(f)["traceEvents"]


def trace_cmd(dat, work, *extra):
    path = os.path.join(work, "t.dat")
    run([DPROBE, "report", "-i", dat, "--format", "trace-dat", "-o", path] + list(extra))
    p = run([TRACE_CMD, "report", path])
    return p.stdout + p.stderr


def read_pipe(pid, secs):
    """What trace_pipe gives in SECS (it streams while the program runs)."""
    p = subprocess.Popen([DPROBE, "ctl", "-p", str(pid), "cat", "trace_pipe"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(secs)
    p.send_signal(signal.SIGINT)
    out, _ = p.communicate(timeout=30)
    return out


def no_unknown(text, what):
    check("Unknown type" not in text and "UNKNOWN" not in text and "(NULL)" not in text,
          "%s: every record known\n%s" % (what, text[-3000:]))


def body(text):
    return [l for l in text.splitlines() if l and not l.startswith("#")]


def case_marker(work):
    for mode in ("record", "attach"):
        dat = os.path.join(work, mode + ".dat")
        s = session(mode, dat, ["-F", "work"])
        p = ctl(s.pid, "write", "trace_marker", "hello from ctl", ok=False)
        check(p.returncode == 0, "%s: dprobe ctl write trace_marker: %r" % (mode, p.stderr))
        mnt = s.mount()
        if mnt:
            with open(os.path.join(mnt, "trace_marker"), "w") as f:
                f.write("hello from the mount\n")
            os.mkdir(os.path.join(mnt, "instances", "m"))
            with open(os.path.join(mnt, "instances", "m", "trace_marker"), "w") as f:
                f.write("hello instance\n")
            with open(os.path.join(mnt, "instances", "m", "trace")) as f:
                inst = f.read()
            os.rmdir(os.path.join(mnt, "instances", "m"))
            check(re.search(r"-%d +\[\d+\] \.{5} +[\d.]+: tracing_mark_write: hello instance$"
                            % os.getpid(), inst, re.M),
                  "%s: an instance's trace_marker, written by this process\n%s" % (mode, inst))
        rc, _, err = s.end()
        check(rc == 0, "%s: the program ended well: %d %r" % (mode, rc, err))
        texts = ["hello from ctl"] + (["hello from the mount"] if mnt else [])
        t = report(dat)
        for x in texts:
            check(re.search(r"^ +\S+-\d+ +\[\d+\] \.{5} +[\d.]+: tracing_mark_write: %s$" % x, t,
                            re.M), "%s: report text has %r" % (mode, x))
        g = report(dat, "graph")
        check(all("/* tracing_mark_write: %s */" % x in g for x in texts),
              "%s: report graph has the markers" % mode)
        ev = chrome(dat, work)
        check(sum(1 for e in ev if e.get("name") == "print" and
                  "tracing_mark_write: hello from ctl" in e.get("args", {}).get("text", "")) == 1,
              "%s: chrome has the marker as an instant with its text" % mode)
        tc = trace_cmd(dat, work)
        check(all(re.search(r"print: +tracing_mark_write: %s$" % x, tc, re.M) for x in texts),
              "%s: trace-cmd report prints the markers\n%s" % (mode, tc[:2000]))
        no_unknown(tc, mode + ": trace-cmd")


def check_live_graph(s, mode, entry, what):
    """The graph records of session S in the live trace (ENTRY's entry, sc_compute's exit)
    and in trace_pipe (sc_step's entry), with the program's thread as their context."""
    time.sleep(0.3)
    live = ctl(s.pid, "cat", "trace").stdout
    no_unknown(live, mode + ": live trace")
    ctx = r"^ +readers_prog-%d +\[\d+\] \.{5} +[\d.]+: " % s.pid
    check(re.search(ctx + r"--> %s \(\d+\)$" % entry, live, re.M) and
          re.search(ctx + r"<-- sc_compute \(\d+\) \(start: [0-9a-f]+  end: [0-9a-f]+\) "
                    r"over: \d+ retval: 0$", live, re.M),
          "%s: %s\n%s" % (mode, what, "\n".join(body(live)[:20])))
    pipe = read_pipe(s.pid, 0.3)
    no_unknown(pipe, mode + ": trace_pipe")
    check(re.search(ctx + r"--> sc_step \(\d+\)$", pipe, re.M),
          "%s: trace_pipe reads them too" % mode)


def case_graph_live(work):
    for mode, opts in (("record", ["-F", "work", "-F", "sc_compute", "-F", "sc_step"]),
                       ("attach", [])):
        dat = os.path.join(work, mode + ".dat")
        s = session(mode, dat, opts)
        check_live_graph(s, mode, "work",
                         "the graph's entries and exits, with the program's thread")
        # The function_graph layout (the tracer itself on a function never called here).
        ctl(s.pid, "write", "set_ftrace_filter", "crash_inner")
        ctl(s.pid, "write", "current_tracer", "function_graph")
        time.sleep(0.3)
        g = ctl(s.pid, "cat", "trace").stdout
        ctl(s.pid, "write", "current_tracer", "nop")
        no_unknown(g, mode + ": function_graph layout")
        check(re.search(r"\|\s+work\(\) \{$", g, re.M) and
              re.search(r"\d+\.\d+ us +\|\s+sc_step\(\);$", g, re.M),
              "%s: the graph's records in the function_graph layout\n%s" %
              (mode, "\n".join(body(g)[:20])))
        rc, _, err = s.end()
        check(rc == 0, "%s: the program ended well: %d %r" % (mode, rc, err))


def case_tracers(work):
    for mode in ("record", "attach"):
        dat = os.path.join(work, mode + ".dat")
        s = session(mode, dat, ["-e", "f:w work"])
        ctl(s.pid, "write", "set_ftrace_filter", "sc_compute sc_step")
        ctl(s.pid, "write", "current_tracer", "function")
        time.sleep(0.4)
        ctl(s.pid, "write", "current_tracer", "function_graph")
        time.sleep(0.4)
        ctl(s.pid, "write", "current_tracer", "nop")
        rc, _, err = s.end()
        check(rc == 0, "%s: the program ended well: %d %r" % (mode, rc, err))
        t = report(dat)
        no_unknown(t, mode + ": report text")
        check(re.search(r": sc_compute <-work$", t, re.M) and
              re.search(r": sc_step <-sc_compute$", t, re.M),
              "%s: report text: the function tracer's calls with their callers\n%s" %
              (mode, "\n".join(l for l in t.splitlines() if "<-" in l)[:2000]))
        check(not re.search(r"0x[0-9a-f]{9,}", t),
              "%s: no address left unnamed in report text" % mode)
        g = report(dat, "graph")
        check(re.search(r"\|\s+sc_compute\(\) \{$", g, re.M) and
              re.search(r"\d+\.\d+ us +\|\s+sc_step\(\);$", g, re.M),
              "%s: report graph: the function_graph tracer's calls\n%s" % (mode, g[:2000]))
        prof = report(dat, "profile")
        check(re.search(r"^  sc_compute +\d+ ", prof, re.M) and
              re.search(r"^  sc_step +\d+ ", prof, re.M), "%s: report profile\n%s" % (mode, prof))
        ev = chrome(dat, work)
        check(any(e.get("ph") == "B" and e.get("name") == "sc_compute" for e in ev) and
              any(e.get("ph") == "i" and e.get("name") == "sc_step" for e in ev),
              "%s: chrome: the graph's calls and the function calls" % mode)
        tc = trace_cmd(dat, work)
        no_unknown(tc, mode + ": trace-cmd")
        fn = re.findall(r" function: +(\S+)$", tc, re.M)
        check(fn and set(fn) <= {"sc_compute", "sc_step"},
              "%s: trace-cmd: the function records name their functions: %s" %
              (mode, sorted(set(fn))[:10]))
        check(re.search(r"funcgraph_entry: +\|\s+sc_compute\(\) \{$", tc, re.M) and
              re.search(r"funcgraph_entry: +\d+\.\d+ us +\|\s+sc_step\(\);$", tc, re.M),
              "%s: trace-cmd: the function_graph tracer's calls\n%s" % (mode, tc[:3000]))


def case_triggers(work):
    dat = os.path.join(work, "t.dat")
    s = session("record", dat, ["-e", "f:hr work i=$arg1:s32"])
    ctl(s.pid, "write", "-a", "set_ftrace_filter", "sc_compute:stacktrace:3")
    ctl(s.pid, "write", "set_ftrace_filter", "sc_step")
    ctl(s.pid, "write", "options/func_stack_trace", "1")
    ctl(s.pid, "write", "current_tracer", "function")
    time.sleep(0.05)
    ctl(s.pid, "write", "current_tracer", "nop")
    ctl(s.pid, "write", "options/func_stack_trace", "0")
    time.sleep(0.2)
    # The event deleted and created again with other arguments: a new id.
    ctl(s.pid, "write", "events/fprobes/hr/enable", "0")
    ctl(s.pid, "write", "-a", "dynamic_events", "--", "-:fprobes/hr")
    ctl(s.pid, "write", "-a", "dynamic_events", "f:hr sc_compute n=$arg1:s32")
    ctl(s.pid, "write", "events/fprobes/hr/enable", "1")
    time.sleep(0.5)
    rc, _, err = s.end()
    check(rc == 0, "the program ended well: %d %r" % (rc, err))
    t = report(dat)
    no_unknown(t, "report text")
    stacks = t.count("<stack trace>")
    check(stacks >= 4 and re.search(r"^ => sc_compute\n => work\n => main$", t, re.M),
          "report text: the stack traces (%d)\n%s" % (stacks, t[-3000:]))
    hr_i = len(re.findall(r": hr: \(work\+0x0/0x[0-9a-f]+\) i=-?\d+$", t, re.M))
    hr_n = len(re.findall(r": hr: \(sc_compute\+0x0/0x[0-9a-f]+\) n=\d+$", t, re.M))
    check(hr_i > 0 and hr_n > 0, "report text: both definitions of hr (%d, %d)" % (hr_i, hr_n))
    g = report(dat, "graph")
    check("Unknown type" not in g and "/* <stack trace>" in g, "report graph")
    ev = chrome(dat, work)
    check(sum(1 for e in ev if e.get("name") == "kernel_stack" and
              " => work" in e.get("args", {}).get("text", "")) == stacks,
          "chrome: the stack traces with their text")
    tc = trace_cmd(dat, work)
    no_unknown(tc, "trace-cmd")
    check(len(re.findall(r" hr: +\(\w+\) i=-?\d+$", tc, re.M)) == hr_i and
          len(re.findall(r" hr: +\(\w+\) n=\d+$", tc, re.M)) == hr_n,
          "trace-cmd: every record of both definitions of hr\n%s" % tc[-2000:])
    check(tc.count("kernel_stack:") == stacks, "trace-cmd: the stack traces")


def case_cxx(work):
    dat = os.path.join(work, "x.dat")
    s = session("record", dat, [], ("run", "0.2"))
    rc, _, err = s.end()
    check(rc == 0, "the program ended well: %d %r" % (rc, err))
    check("app::worker::run();" in report(dat, "graph"), "report graph: the demangled name")
    tc = trace_cmd(dat, work)
    check(re.search(r"\|\s+app::worker::run\(\);$", tc, re.M) and "_ZN3app" not in tc,
          "trace-cmd shows the name as report does\n%s" % tc[:1500])
    # A kallsyms name is one word: "(anonymous namespace)" loses its space.
    check(re.search(r"\|\s+\(anonymous_namespace\)::scale\(\);$", tc, re.M),
          "trace-cmd: a name with a space in it\n%s" % tc[:1500])
    tc = trace_cmd(dat, work, "--demangle", "no")
    check(re.search(r"\|\s+_ZN3app6worker3runEi\(\);$", tc, re.M),
          "trace-cmd with --demangle=no: the symbol")


def case_killed(work):
    dat = os.path.join(work, "k.dat")
    p = run([DPROBE, "record", "-q", "-o", dat, "--", PROG, "crash"], ok=False)
    check(p.returncode == 128 + signal.SIGSEGV, "the program died of SIGSEGV: %d" % p.returncode)
    g = report(dat, "graph", "--no-header")
    lines = g.rstrip("\n").splitlines()
    check(re.match(r"^ *\d+\) +\|      crash_inner\(\) \{$", lines[-2]) and
          re.match(r"^ *\d+\) +\|        /\* killed by signal 11 \(SIGSEGV\) \*/$", lines[-1]),
          "report graph ends with the signal, inside the call it hit\n%s" % g)
    ev = chrome(dat, work)
    check(any(e.get("name") == "killed by signal 11 (SIGSEGV)" for e in ev), "chrome says so too")


def case_all_functions(work):
    for mode in ("record", "attach"):
        dat = os.path.join(work, mode + ".dat")
        s = session(mode, dat, ["-e", "f:w work"])
        check(ctl(s.pid, "cat", "set_ftrace_filter").stdout == "#### all functions enabled ####\n",
              "%s: an empty filter" % mode)
        avail = ctl(s.pid, "cat", "available_filter_functions").stdout.splitlines()
        ctl(s.pid, "write", "current_tracer", "function")
        enabled = ctl(s.pid, "cat", "enabled_functions").stdout.splitlines()
        names = {l.split(" (")[0] for l in enabled}
        check({"work", "sc_step", "sc_compute", "clock_nanosleep [libc.so.6]"} <= names and
              len(enabled) >= 0.9 * len(avail),
              "%s: every function available_filter_functions lists is enabled (%d of %d)" %
              (mode, len(enabled), len(avail)))
        time.sleep(0.3)
        live = ctl(s.pid, "cat", "trace").stdout
        check(re.search(r": sc_step <-sc_compute$", live, re.M) and
              re.search(r": clock_nanosleep <-", live, re.M),
              "%s: the program's functions and libc's are traced\n%s" %
              (mode, "\n".join(body(live)[-10:])))
        ctl(s.pid, "write", "current_tracer", "nop")
        enabled = ctl(s.pid, "cat", "enabled_functions").stdout.splitlines()
        check([l.split(" (")[0] for l in enabled] == ["work"],
              "%s: nop leaves the event's function only: %s" % (mode, enabled[:5]))
        rc, _, err = s.end()
        check(rc == 0, "%s: the program ended well: %d %r" % (mode, rc, err))
        t = report(dat)
        check(re.search(r": sc_compute <-work$", t, re.M), "%s: recorded" % mode)


def case_usdt_late(work):
    for mode in ("record", "attach"):
        dat = os.path.join(work, mode + ".dat")
        s = session(mode, dat, ["-e", "f:w work"], ("late", SDT_LIB, "60"))
        fmt = "events/sdtl/fire/format"
        check(ctl(s.pid, "cat", fmt, ok=False).returncode != 0,
              "%s: no tracepoint sdtl:fire before the library is loaded" % mode)
        os.kill(s.pid, signal.SIGUSR2)
        for _ in range(200):
            if ctl(s.pid, "cat", fmt, ok=False).returncode == 0:
                break
            time.sleep(0.02)
        else:
            fail("%s: the library's tracepoint never appeared" % mode)
        ctl(s.pid, "write", "events/sdtl/fire/enable", "1")
        time.sleep(0.3)
        rc, _, err = s.end()
        check(rc == 0, "%s: the program ended well: %d %r" % (mode, rc, err))
        t = report(dat)
        no_unknown(t, mode + ": report text")
        fires = re.findall(r": fire: \([^)]*\) arg1=(-?\d+) arg2=(-?\d+)$", t, re.M)
        check(len(fires) > 10 and all(int(b) == int(a) + 1 for a, b in fires),
              "%s: report text: the tracepoint's records with their arguments (%d)\n%s" %
              (mode, len(fires), t[-2000:]))
        tc = trace_cmd(dat, work)
        no_unknown(tc, mode + ": trace-cmd")
        check(len(re.findall(r" fire: +\([^)]*\) arg1=-?\d+ arg2=-?\d+$", tc, re.M)) ==
              len(fires), "%s: trace-cmd: every record of the tracepoint\n%s" % (mode, tc[-2000:]))


def marker_stacks(text):
    """Markers "mark N" whose writer's next record is a stack trace ending in the marker's
    write. Another thread's record may come between them in the merged text (the stack's time
    stamp is its own, later than the marker's, as in the kernel)."""
    lines = text.splitlines()
    n = 0
    for i, ln in enumerate(lines):
        m = re.match(r"^\s*(\S+-\d+) .*tracing_mark_write: mark \d$", ln)
        if not m:
            continue
        for j in range(i + 1, len(lines)):
            if re.match(r"^\s*%s " % re.escape(m[1]), lines[j]):
                if (lines[j].endswith("<stack trace>") and j + 1 < len(lines) and
                        lines[j + 1] == " => tracing_mark_write"):
                    n += 1
                break
    return n


def case_marker_triggers(work):
    for mode in ("record", "attach"):
        dat = os.path.join(work, mode + ".dat")
        s = session(mode, dat, ["-e", "f:w work"])
        trig = "events/ftrace/print/trigger"
        # Each `dprobe ctl write` is a writer of its own, and its text ends with echo's newline.
        ctl(s.pid, "write", "-a", trig, "hist:keys=buf:vals=hitcount")
        ctl(s.pid, "write", "-a", trig, "stacktrace if buf ~ \"mark*\"")
        for i in range(3):
            ctl(s.pid, "write", "trace_marker", "mark %d" % (i % 2))
        hist = ctl(s.pid, "cat", "events/ftrace/print/hist").stdout
        for b, n in (("mark 0", 2), ("mark 1", 1)):
            check(re.search(r"^\{ buf: %s\n +\} hitcount: +%d$" % (b, n), hist, re.M),
                  "%s: the hist counts the markers by text\n%s" % (mode, hist))
        ctl(s.pid, "write", "-a", trig, "traceoff if buf ~ \"stop*\"")
        ctl(s.pid, "write", "trace_marker", "stop")
        check(ctl(s.pid, "cat", "tracing_on").stdout == "0\n", "%s: traceoff on the marker" % mode)
        p = ctl(s.pid, "write", "trace_marker", "after", ok=False)
        check(p.returncode != 0, "%s: tracing off: a marker is refused (EBADF)" % mode)
        ctl(s.pid, "write", "tracing_on", "1")
        rc, _, err = s.end()
        check(rc == 0, "%s: the program ended well: %d %r" % (mode, rc, err))
        t = report(dat)
        no_unknown(t, mode + ": report text")
        check(marker_stacks(t) == 3 and
              re.search(r"tracing_mark_write: stop$", t, re.M) and "after" not in t,
              "%s: each marker's stack after it, the stop marker, nothing after it\n%s" %
              (mode, t[-2000:]))
        tc = trace_cmd(dat, work)
        no_unknown(tc, mode + ": trace-cmd")
        check(tc.count("kernel_stack:") == 3, "%s: trace-cmd: the stacks" % mode)


def case_graph_values(work):
    # sc_step(i) for i < n, and sc_compute(n) = n(n+1)/2, n = 1..4.
    opts = ["-F", "work", "-F", "sc_compute", "-F", "sc_step", "-A", "sc_step@arg1/d",
            "-R", "sc_compute@retval/d"]
    for mode in ("record", "attach"):
        dat = os.path.join(work, mode + ".dat")
        s = session(mode, dat, opts)
        check_live_graph(s, mode, "sc_step", "the graph records of the calls with values")
        rc, _, err = s.end()
        check(rc == 0, "%s: the program ended well: %d %r" % (mode, rc, err))
        t = report(dat)
        no_unknown(t, mode + ": report text")
        check(re.search(r": args\d+: \(sc_step\+0x0/0x[0-9a-f]+\) arg1=0$", t, re.M) and
              re.search(r": retval\d+: \(.* <- sc_compute\) retval=(1|3|6|10)$", t, re.M),
              "%s: report text: the values' records\n%s" % (mode, t[:2000]))
        g = report(dat, "graph")
        check(re.search(r"\|\s+sc_step\(3\);$", g, re.M) and
              re.search(r"\|\s+\} /\* sc_compute = 10 \*/$", g, re.M),
              "%s: report graph: the values inline\n%s" % (mode, g[:2000]))
        ev = chrome(dat, work)
        steps = [e for e in ev if e.get("name") == "sc_step" and e.get("ph") in ("B", "X")]
        check(steps and all(e.get("args", {}).get("arg1") in ("0", "1", "2", "3") for e in steps),
              "%s: chrome: sc_step's begins carry its argument: %s" % (mode, steps[:3]))
        tc = trace_cmd(dat, work)
        no_unknown(tc, mode + ": trace-cmd")
        check(re.search(r"args\d+: +\(\w+\) arg1=2$", tc, re.M) and
              re.search(r"retval\d+: +\(\w+ <- \w+\) retval=6$", tc, re.M) and
              re.search(r"funcgraph_entry: .*\|\s+sc_step\(\)", tc, re.M),
              "%s: trace-cmd report prints the graph and the values\n%s" % (mode, tc[:3000]))


CASES = {"marker": case_marker, "graph_live": case_graph_live, "tracers": case_tracers,
         "triggers": case_triggers, "cxx": case_cxx, "killed": case_killed,
         "all_functions": case_all_functions, "usdt_late": case_usdt_late,
         "marker_triggers": case_marker_triggers, "graph_values": case_graph_values}

with tempfile.TemporaryDirectory() as d:
    CASES[CASE](d)
print("%s: %d checks passed" % (CASE, checks))
