#!/usr/bin/env python3
"""End-to-end tests of the dprobe command, uftrace style: record a small program, report it,
compare with an expected file after masking what changes from run to run (timestamps,
durations, thread and process ids, CPUs, addresses, offsets that depend on the flavour).

  e2e.py DPROBE PROGS_DIR FLAVOUR CASE [EXPECTED_DIR [COUNT_ALLOC_LIB]]

CASE is one of: graph, nonlocal, exceptions, ending, exec, alloc, ifunc, int3, stripped, own,
reload, cxx, text, chrome, crash, interrupt, ctl, forkexec,
errors, funcs, probe, follow, many, pending, eprobe, trigger, hist, libc, noloss, interposed, closefds,
terminal, clash, messages.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

DPROBE, PROGS, FLAVOUR, CASE = sys.argv[1:5]
EXPECTED = sys.argv[5] if len(sys.argv) > 5 else None
COUNT_ALLOC = sys.argv[6] if len(sys.argv) > 6 else None  # tests/tools/helpers/count_alloc.c
WORK = tempfile.mkdtemp(prefix="dprobe-e2e-")
ENV = dict(os.environ, DPROBE_PROBES=os.path.join(WORK, "probes"),
           XDG_RUNTIME_DIR=os.path.join(WORK, "run"))
os.makedirs(ENV["XDG_RUNTIME_DIR"], mode=0o700)
if os.environ.get("DPROBE_E2E_ASAN_RUNTIME"):
    # The ASan build (tests/tools/CMakeLists.txt): an instrumented CLI and agent record
    # uninstrumented programs. The agent needs the ASan runtime loaded, so it is preloaded
    # too; `dprobe record` puts its agent first in LD_PRELOAD, ahead of the runtime, which
    # ASan would refuse (verify_asan_link_order) although the runtime still interposes
    # before libc and initializes before the agent. The programs' own faults must kill them
    # as without ASan (crash case), so ASan leaves SIGSEGV and SIGBUS alone.
    ENV["LD_PRELOAD"] = os.environ["DPROBE_E2E_ASAN_RUNTIME"]
    ENV["ASAN_OPTIONS"] = "verify_asan_link_order=0:handle_segv=0:handle_sigbus=0"
failures = []


def prog(name):
    return os.path.join(PROGS, FLAVOUR, name)


def run(args, ok=True):
    p = subprocess.run([DPROBE] + args, cwd=WORK, env=ENV, capture_output=True, text=True,
                       timeout=120)
    if ok and p.returncode != 0:
        sys.exit("FAIL: dprobe %s exited %d\nstdout:\n%s\nstderr:\n%s" %
                 (" ".join(args), p.returncode, p.stdout, p.stderr))
    return p


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


class Ids:
    """Numbers ids in order of first appearance: T1, T2 ..."""

    def __init__(self, prefix):
        self.prefix, self.map = prefix, {}

    def __call__(self, v):
        return self.map.setdefault(v, "%s%d" % (self.prefix, len(self.map) + 1))


def mask_common(s):
    s = re.sub(r"\+0x[0-9a-f]+/0x[0-9a-f]+", "+OFF/SIZE", s)
    return re.sub(r"0x[0-9a-f]{5,}", "ADDR", s)


def mask_graph(out):
    tids, pids, lines = Ids("T"), Ids("P"), []
    for line in out.splitlines():
        m = re.match(r"^ *(\d+)\) (.{14})\|  (.*)$", line)
        if m:
            dur = "   DURATION   " if m.group(2).strip() else " " * 14
            lines.append("%s) %s|  %s" % (tids(m.group(1)), dur, m.group(3)))
            continue
        m = re.match(r"^ *(\d+)\)  /\* thread (\d+) \((.*)\), process (\d+) \*/$", line)
        if m:
            lines.append("%s)  /* thread %s (%s), process %s */" %
                         (tids(m.group(1)), tids(m.group(2)), m.group(3), pids(m.group(4))))
            continue
        lines.append(line)
    return mask_common("\n".join(lines) + "\n")


def mask_text(out):
    tids, lines = Ids("T"), []
    for line in out.splitlines():
        line = re.sub(r"#P:\d+", "#P:N", line)
        m = re.match(r"^ *(\S+)-(\d+) +\[\d+\] (.....) +\d+\.\d+: (.*)$", line)
        if m:
            line = "%s-%s [CPU] %s TIME: %s" % (m.group(1), tids(m.group(2)), m.group(3),
                                                 m.group(4))
        lines.append(line)
    return mask_common("\n".join(lines) + "\n")


def compare(actual, name):
    path = os.path.join(EXPECTED, name)
    if os.environ.get("DPROBE_UPDATE_EXPECTED"):
        with open(path, "w") as f:
            f.write(actual)
    with open(path) as f:
        expected = f.read()
    if actual != expected:
        import difflib
        sys.stdout.writelines(difflib.unified_diff(expected.splitlines(True),
                                                   actual.splitlines(True), name, "actual"))
    check(actual == expected, "%s output differs from %s" % (CASE, name))


def mounts_left():
    with open("/proc/self/mountinfo") as f:
        return [l for l in f if WORK in l]


def record(args, ok=True):
    p = run(["record", "-q"] + args, ok=ok)
    check(not mounts_left(), "no tracefs mount left after record %s" % args)
    return p


def chrome_check(path):
    with open(path) as f:
        doc = json.load(f)  # raises on invalid JSON
    events = doc["traceEvents"]
    stacks, ends = {}, 0
    for e in events:
        key = (e.get("pid"), e.get("tid"))
        if e["ph"] == "B":
            stacks.setdefault(key, []).append(e)
        elif e["ph"] == "E":
            st = stacks.get(key)
            check(bool(st), "E without B on thread %s" % (key,))
            if st:
                b = st.pop()
                check(b["name"] == e["name"], "E %s closes B %s" % (e["name"], b["name"]))
                check(e["ts"] >= b["ts"], "E before its B")
                ends += 1
    for key, st in stacks.items():
        check(not st, "unclosed B events on thread %s: %s" % (key, [b["name"] for b in st]))
    return doc, ends


def profile_of(dat, *extra):
    """`dprobe report --format profile` of DAT: {function: (hits, time in us)}."""
    out = run(["report", "-i", dat, "--format", "profile"] + list(extra)).stdout
    lines = out.splitlines()
    check(lines[:2] == ["  Function                               Hit    Time            Avg"
                        "             s^2",
                        "  --------                               ---    ----            ---"
                        "             ---"], "profile header: %r" % lines[:2])
    rows = {}
    for l in lines[2:]:
        m = re.match(r"^  (\S+) +(\d+) +(\d+\.\d+) us +(\d+\.\d+) us +(\d+\.\d+) us +$", l)
        check(m is not None, "profile line %r" % l)
        if m:
            rows[m.group(1)] = (int(m.group(2)), float(m.group(3)))
    return rows


def check_graph_thresh(full, filtered):
    """FULL: a graph report; FILTERED(t): the same with --thresh t (us). Builds the call tree
    of FULL, picks a threshold above its longest leaf, and checks FILTERED's output against
    the tree: calls at least that long kept, a kept call without kept callees on one line."""
    line_re = re.compile(r"^( *\d+\) )(.{14})\|  ( *)(.*)$")
    def ns(col):
        m = re.search(r"(\d+)\.(\d{1,3}) us", col)
        return int(m.group(1)) * 1000 + int(m.group(2).ljust(3, "0")) if m else None
    out, stack, roots = [], [], []  # items: str lines, or call nodes
    for line in full.splitlines():
        m = line_re.match(line)
        if not m or m.group(4).startswith("/*"):
            (stack[-1]["kids"] if stack else out).append(line)
            continue
        tid, col, indent, body = m.groups()
        if body.endswith(" {"):
            node = {"open": line, "kids": [], "name": body[:-2]}
            (stack[-1]["kids"] if stack else out).append(node)
            stack.append(node)
        elif body.startswith("} /* "):
            node = stack.pop()
            node.update(close=line, ns=ns(col), col=col, tid=tid, indent=indent)
        else:
            node = {"leaf": line, "ns": ns(col), "kids": []}
            (stack[-1]["kids"] if stack else out).append(node)
    check(not stack, "every call of the graph closed")
    leaves = []
    def walk(items):
        for it in items:
            if isinstance(it, dict):
                if "leaf" in it:
                    leaves.append(it["ns"])
                walk(it["kids"])
    walk(out)
    t_ns = max(leaves) + 2
    def render(items, res):
        for it in items:
            if not isinstance(it, dict):
                res.append(it)
            elif it["ns"] >= t_ns:
                if "leaf" in it:
                    res.append(it["leaf"])
                elif any(isinstance(k, dict) and k["ns"] >= t_ns for k in it["kids"]):
                    res.append(it["open"])
                    render(it["kids"], res)
                    res.append(it["close"])
                else:
                    res.append("%s%s|  %s%s;" % (it["tid"], it["col"], it["indent"], it["name"]))
    want = []
    render(out, want)
    got = filtered("%d.%03d" % (t_ns // 1000, t_ns % 1000))
    check(got == "\n".join(want) + "\n",
          "--thresh %d ns:\n%s\nwant:\n%s" % (t_ns, got, "\n".join(want)))
    check(any("();" in l and "middle" in l for l in want), "a call collapsed to one line")


if CASE == "graph":
    p = record(["-o", "g.dat", "--", prog("graph")])
    check(p.stdout.strip() == "7 23", "the program's output is kept (%r)" % p.stdout)
    compare(mask_graph(run(["report", "-i", "g.dat", "--format", "graph"]).stdout), "graph.graph")
    # The function profiler's view of the same recording: calls per function exact, time
    # with callees (graph-time) at least the own time, a threshold leaving rows out.
    def profile(*extra):
        return profile_of("g.dat", *extra)
    total, own = profile(), profile("--no-graph-time")
    want = {"main": 1, "middle": 2, "leaf": 4, "fib": 5, "worker": 1}
    check({f: r[0] for f, r in total.items()} == want, "profile hits %r, want %r" % (total, want))
    check({f: r[0] for f, r in own.items()} == want, "self-time hits %r" % own)
    check(all(total[f][1] >= own[f][1] for f in want if f in total and f in own) and
          total["main"][1] > own["main"][1], "time with callees >= own time: %r %r" % (total, own))
    check(profile("--thresh", "1e9") == {}, "--thresh above every average leaves every row out")
    # report --thresh on the graph: calls shorter than it are left out with all they did, and
    # a call left with nothing inside is shown on one line. Expected from the whole graph of
    # the same recording, with a threshold just above the longest leaf.
    full = run(["report", "-i", "g.dat", "--format", "graph", "--no-events"]).stdout
    check_graph_thresh(full, lambda t: run(["report", "-i", "g.dat", "--format", "graph",
                                            "--no-events", "--thresh", t]).stdout)
    # -p function: the kernel's function tracer, each call with its caller, no returns.
    p = record(["-p", "function", "-o", "f.dat", "--", prog("graph")])
    check(p.stdout.strip() == "7 23", "-p function: the program's output is kept")
    text = run(["report", "-i", "f.dat"]).stdout
    calls = sorted(re.findall(r": (\w+ <-\w+)$", text, re.M))
    want = sorted(["main <-__libc_start_call_main", "middle <-main", "leaf <-middle",
                   "leaf <-middle", "fib <-main", "fib <-fib", "fib <-fib", "fib <-fib",
                   "fib <-fib", "worker <-start_thread", "middle <-worker", "leaf <-middle",
                   "leaf <-middle"])
    check(text.startswith("# tracer: function\n") and calls == want,
          "-p function: the calls with their callers:\n%s" % text)
    check({f: r[0] for f, r in profile_of("f.dat").items()} ==
          {"main": 1, "middle": 2, "leaf": 4, "fib": 5, "worker": 1}, "-p function: profile hits")
    check(run(["record", "-p", "function", "-D", "2", "--", prog("graph")], ok=False).returncode
          != 0, "-p function refuses --graph-depth")
    # --graph-depth: the kernel's max_graph_depth, calls nested deeper are not recorded.
    record(["-D", "2", "-o", "d.dat", "--", prog("graph")])
    compare(mask_graph(run(["report", "-i", "d.dat", "--format", "graph"]).stdout),
            "graph_depth2.graph")
elif CASE in ("nonlocal", "exceptions"):
    # Calls left by longjmp/siglongjmp, pthread_exit and C++ exceptions: each closed where it
    # was left, marked unwound, what follows at the caller's depth; report counts them.
    want = subprocess.run([prog(CASE)], capture_output=True, text=True, timeout=60)
    p = record(["-o", "u.dat", "--", prog(CASE)])
    check(p.stdout == want.stdout, "the program's output is kept (%r, want %r)" %
          (p.stdout, want.stdout))
    r = run(["report", "-i", "u.dat", "--format", "graph"])
    compare(mask_graph(r.stdout), CASE + ".graph")
    n = r.stdout.count("unwound")
    check(n > 0 and ("%d calls left without returning" % n) in r.stderr,
          "report counts the %d unwound exits: %r" % (n, r.stderr))
    text = run(["report", "-i", "u.dat"]).stdout
    check(text.count("(unwound)") == n, "the text trace marks them too")
elif CASE == "ending":
    # However the program ends, what was recorded up to the end is in the file (the ring
    # buffers outlive the process, `record` copies them), and its end is told: the exit
    # status of _exit and of exit() from another thread, abort's and SIGKILL's signal;
    # daemon(): the daemon outlives its parent and is recorded to its end.
    for how, code, graph in (("_exit", 3, "ending_exit.graph"),
                             ("thread-exit", 4, "ending_thread_exit.graph"),
                             ("abort", 128 + 6, "ending_abort.graph"),
                             ("kill", 128 + 9, "ending_kill.graph"),
                             ("daemon", 0, "ending_daemon.graph")):
        p = record(["-o", "e.dat", "--", prog("ending"), how], ok=False)
        check(p.returncode == code, "%s: status %d, want %d (%r)" % (how, p.returncode, code,
                                                                     p.stderr))
        check("warning" not in p.stderr, "%s: no warning: %r" % (how, p.stderr))
        r = run(["report", "-i", "e.dat", "--format", "graph"])
        check("warning" not in r.stderr, "%s: every session closed: %r" % (how, r.stderr))
        compare(mask_graph(r.stdout), graph)
        text = run(["report", "-i", "e.dat", "--format", "text"]).stdout
        check(text.count("funcgraph_entry: --> work") == (3 if how != "daemon" else 7) +
              (3 if how == "thread-exit" else 0),
              "%s: every call of work() before the end is there:\n%s" % (how, text))
        # Nothing of the process is left in the runtime directory, however it ended: its
        # tracefs mount point and its control socket (a killed process removes neither).
        rundir = os.path.join(ENV["XDG_RUNTIME_DIR"], "dprobe")
        left = sorted(os.listdir(rundir)) if os.path.isdir(rundir) else []
        check(left == [], "%s: left in %s: %r" % (how, rundir, left))
elif CASE == "exec":
    # A program that runs another one: by exec, and with an environment of its own (PATH and
    # HOME only) by execve, vfork + execve and posix_spawn. The other program is traced with
    # the same options where they apply to it (the default graph: its own functions), gets
    # dprobe's variables back in its environment, and is never stopped by a glob meant for
    # the first program; output and statuses are as without dprobe.
    # exec-prof: the profiling timer a -pg program leaves armed across exec (SIGPROF, whose
    # default action kills, 10 ms of CPU time) is the program's: dprobe's work in the new
    # image must not spend it.
    for how in ("exec", "execve-env", "vfork", "spawn", "exec-prof"):
        want = subprocess.run([prog("exec_parent"), how], capture_output=True, text=True,
                              timeout=60)
        p = record(["-o", "x.dat", "--", prog("exec_parent"), how], ok=False)
        check(p.returncode == want.returncode and p.stdout == want.stdout,
              "%s: status %d (want %d), stdout %r (want %r), stderr %r" %
              (how, p.returncode, want.returncode, p.stdout, want.stdout, p.stderr))
        check("warning" not in p.stderr, "%s: no warning: %r" % (how, p.stderr))
        r = run(["report", "-i", "x.dat", "--format", "graph"])
        compare(mask_graph(r.stdout), "exec_%s.graph" % how.replace("-", "_"))
        # -F for the first program only: the second runs, untraced by the graph, and is
        # named in a warning.
        p = run(["record", "-o", "y.dat", "-F", "parent_work", "--", prog("exec_parent"), how],
                ok=False)
        check(p.returncode == want.returncode and p.stdout == want.stdout,
              "%s -F: status %d (want %d), stdout %r" % (how, p.returncode, want.returncode,
                                                         p.stdout))
        check("exec_child" in p.stderr and "parent_work" in p.stderr,
              "%s -F: the second program is named in a warning: %r" % (how, p.stderr))
        out = run(["report", "-i", "y.dat", "--format", "graph", "--no-header"]).stdout
        check(out.count("parent_work();") == 1 and "child_work" not in out,
              "%s -F: only parent_work:\n%s" % (how, out))
    # A script that runs the program (a wrapper, as pyenv's python3 is): the globs are for
    # the program; its interpreter and the commands it runs before are not stopped by them,
    # and their warnings come as one line.
    script = os.path.join(WORK, "wrapper.sh")
    with open(script, "w") as f:
        f.write("#!/bin/sh\n/usr/bin/env true\n/usr/bin/env true\nexec %s exec\n"
                % prog("exec_parent"))
    os.chmod(script, 0o755)
    want = subprocess.run([prog("exec_parent"), "exec"], capture_output=True, text=True,
                          timeout=60)
    p = run(["record", "-o", "s.dat", "-F", "child_work", "--", script], ok=False)
    check(p.returncode == want.returncode and p.stdout == want.stdout,
          "script: status %d (want %d), stdout %r, stderr %r" % (p.returncode, want.returncode,
                                                                 p.stdout, p.stderr))
    warn = [l for l in p.stderr.splitlines() if "warning" in l]
    check(len(warn) == 1 and "-F 'child_work' matches no function here, in " in warn[0] and
          "env" in warn[0], "script: one warning for the processes before: %r" % p.stderr)
    out = run(["report", "-i", "s.dat", "--format", "graph", "--no-header"]).stdout
    check(out.count("child_work();") == 1, "script: the program's graph:\n%s" % out)
elif CASE == "alloc":
    # The agent never runs the program's allocator or lock functions: a library preloaded
    # after it counts the calls of malloc, free, calloc, realloc and pthread_mutex_lock made
    # from dprobe's objects (none may be): the agent with what it links in (libstdc++,
    # libfuse3 serving the tracefs), and the libraries of its own namespace (libelf reading
    # symbols, libdw, Zydis, and what they load), which should not even reach the counter,
    # whose definitions are not in their namespace; and those on dprobe's threads.
    import glob
    counts = os.path.join(WORK, "counts")
    env = dict(ENV, LD_PRELOAD=(ENV.get("LD_PRELOAD", "") + " " + COUNT_ALLOC).strip(),
               COUNT_ALLOC_OUT=counts,
               COUNT_ALLOC_LIBS="libelf.so libdw.so libZydis.so libfuse3.so libz.so "
                                "liblzma.so libbz2.so")
    for args in ([prog("graph")], ["-F", "libc.so.6:*", "--", prog("graph")],
                 [prog("exceptions")]):
        for f in glob.glob(counts + ".*"):
            os.unlink(f)
        p = subprocess.run([DPROBE, "record", "-q", "-o", "a.dat"] + args, cwd=WORK, env=env,
                           capture_output=True, text=True, timeout=120)
        check(p.returncode == 0, "%s: %r" % (args, p.stderr))
        # (dprobe itself runs with the counter too: only the program's file is looked at.)
        files = [f for f in glob.glob(counts + ".*") if open(f).read().startswith(
            os.path.basename(args[-1]) + " ")]
        check(len(files) == 1, "the program reported its counts: %s" % files)
        for f in files:
            with open(f) as fh:
                c = dict(kv.split("=") for kv in fh.read().split()[1:])
            check(int(c["all"]) > 0, "%s: the counter saw the program's own calls: %r" % (args, c))
            # C++ programs too: dprobe's C++ objects allocate through the C++ runtime
            # linked into the preload, never the program's operator new and delete.
            # On dprobe's threads, the dynamic loader and the C library allocate and free
            # the threads' own TLS blocks with the process's allocator, and the loader its
            # bookkeeping of dprobe's namespace: counted, not checked.
            check(c["direct"] == "0", "%s: no call from dprobe's object: %r" % (args, c))
            print("%s: %r" % (" ".join(os.path.basename(a) for a in args), c))
    # A program with an allocator of its own, which forks: its graph holds its own calls,
    # exactly, in both processes, and its output is the same as without dprobe.
    want = subprocess.run([prog("bump_alloc")], capture_output=True, text=True, timeout=60)
    p = record(["-o", "b.dat", "--", prog("bump_alloc")])
    check(p.stdout == want.stdout, "bump_alloc output %r, want %r" % (p.stdout, want.stdout))
    print("bump_alloc, untraced: %s; recorded: %s" % (want.stderr.strip(), p.stderr.strip()))
    compare(mask_graph(run(["report", "-i", "b.dat", "--format", "graph"]).stdout),
            "bump_alloc.graph")
elif CASE == "ifunc":
    # strlen and memcpy are IFUNCs in libc: every call of the implementation the loader chose
    # is traced (the resolver runs once), under the name asked for.
    want = subprocess.run([prog("ifunc_calls")], capture_output=True, text=True, timeout=60)
    p = record(["-o", "f.dat", "-F", "count_loop", "-F", "libc.so.6:strlen",
                "-F", "libc.so.6:memcpy", "--", prog("ifunc_calls")])
    check(p.stdout == want.stdout, "output %r, want %r" % (p.stdout, want.stdout))
    out = run(["report", "-i", "f.dat", "--format", "graph", "--no-header"]).stdout
    inside = re.findall(r"\|    (\w+)\(\);", out)  # calls at depth 1: in count_loop
    check(inside.count("strlen") == 1000 and inside.count("memcpy") == 1000,
          "1000 calls of each in count_loop: %d strlen, %d memcpy\n%s" %
          (inside.count("strlen"), inside.count("memcpy"), out[:1500]))
elif CASE == "int3":
    # run_ops cannot get a jump site (an indirect jump whose targets no table tells): it is
    # traced through an int3 entry, and the summary says which functions are, and why.
    want = subprocess.run([prog("zlib_calls")], capture_output=True, text=True, timeout=60)
    p = run(["record", "-o", "z.dat", "-F", "run_ops", "--", prog("zlib_calls")])
    check(p.stdout == want.stdout, "output %r, want %r" % (p.stdout, want.stdout))
    check("1 function traced through an int3 breakpoint" in p.stderr and
          "run_ops (indirect jump" in p.stderr, "the summary names run_ops: %r" % p.stderr)
    # `dprobe funcs` makes the same decision from the file, with the same reason; and
    # inflate, whose switch table it reads from the file too, gets a jump site there.
    out = run(["funcs", "-x", prog("zlib_calls"), "run_ops"]).stdout
    check(re.search(r" int3 +run_ops +\(indirect jump in the function", out) is not None,
          "funcs: run_ops on an int3 entry, as record says: %r" % out)
    out = run(["funcs", "-x", "/lib/x86_64-linux-gnu/libz.so.1", "inflate"]).stdout
    check(re.search(r" jump +inflate$", out, re.M) is not None,
          "funcs: inflate on a jump site, as record does it: %r" % out)
    out = run(["report", "-i", "z.dat", "--format", "graph", "--no-header"]).stdout
    # (4 from main, 1 from a thread that blocked every signal, 1 from a full-mask handler)
    check(out.count("run_ops();") == 6, "6 calls of run_ops:\n" + out)
    # The SIGTRAP handler is dprobe's: the errno it saves and restores for the program is not
    # a call of the program's (zlib_calls makes none), nor is anything it does for a fault
    # no hook claims. (Found with uftrace's s-allocfree.c: an __errno_location() before each
    # int3-traced call.)
    record(["-o", "e.dat", "-F", "run_ops", "-F", "libc.so.6:__errno_location", "--",
            prog("zlib_calls")])
    out = run(["report", "-i", "e.dat", "--format", "graph", "--no-header"]).stdout
    check(out.count("run_ops();") == 6 and "__errno_location" not in out,
          "6 calls of run_ops, no __errno_location:\n" + out)
    # inflate's indirect jump dispatches through a switch's jump table, whose entries the
    # jump-site analysis reads: a jump site, no int3.
    p = run(["record", "-o", "z.dat", "-F", "libz.so.1:inflate", "--", prog("zlib_calls")])
    check(p.stdout == want.stdout and "int3" not in p.stderr,
          "inflate on a jump site: %r" % p.stderr)
    out = run(["report", "-i", "z.dat", "--format", "graph", "--no-header"]).stdout
    check(out.count("inflate();") == 3, "3 calls of inflate (one an uncompress):\n" + out)
    p = run(["record", "-o", "z.dat", "-F", "libz.so.1:*", "-F", "run_ops", "--",
             prog("zlib_calls")])
    check(p.stdout == want.stdout and "run_ops (indirect jump" in p.stderr,
          "every zlib function and run_ops: %r" % p.stderr)
    out = run(["report", "-i", "z.dat", "--format", "graph", "--no-header"]).stdout
    check(out.count("inflate();") + out.count("inflate() {") == 3 and "deflate" in out and
          out.count("run_ops();") == 6,
          "inflate, run_ops and the others in one graph:\n" + out[:2000])
elif CASE == "stripped":
    # A program without symbols, the default graph: nothing to see, and record says why and
    # what to do instead; with its debug file next to it, its functions are traced.
    import shutil
    exe = os.path.join(WORK, "graph")
    shutil.copy(prog("graph"), exe + ".full")
    subprocess.run(["objcopy", "--strip-all", exe + ".full", exe], check=True)
    p = record(["-o", "s.dat", "--", exe])
    check(p.returncode == 0 and p.stdout == "7 23\n", "the program ran: %r" % p.stdout)
    check("0 events" in p.stderr and "has no function symbols (it is stripped)" in p.stderr and
          "-F 'libc.so.6:*'" in p.stderr and "debug file" in p.stderr,
          "record says it saw nothing, why, and what to do: %r" % p.stderr)
    subprocess.run(["objcopy", "--only-keep-debug", exe + ".full", exe + ".debug"], check=True)
    subprocess.run(["objcopy", "--strip-all", "--add-gnu-debuglink=" + exe + ".debug",
                    exe + ".full", exe], check=True)
    p = record(["-o", "s.dat", "--", exe])
    out = run(["report", "-i", "s.dat", "--format", "graph", "--no-header"]).stdout
    check("main() {" in out and "leaf();" in out and "stripped" not in p.stderr,
          "the debug file's symbols: %r\n%s" % (p.stderr, out))
    # The system's ls, stripped but for a few symbols, none of which
    # run; the same word and the same ways out.
    p = record(["-o", "s.dat", "--", "ls", "/"])
    check(p.returncode == 0 and "bin" in p.stdout.split() and "0 events" in p.stderr and
          "(it is stripped)" in p.stderr and "-F 'libc.so.6:*'" in p.stderr,
          "ls /: record says it saw nothing, why, and what to do: %r" % p.stderr)
elif CASE == "own":
    # dprobe's own threads (the tracefs servers) and its own calls on the program's threads
    # (its start, the tracefs coming down at exit, its static destructors) are never in the
    # recording, even with every libc function traced, and its threads are not counted.
    p = record(["-o", "o.dat", "-F", "libc.so.6:*", "--", prog("graph")])
    check("from 2 threads in 1 process" in p.stderr, "the program's 2 threads: %r" % p.stderr)
    out = run(["report", "-i", "o.dat", "--format", "graph", "--no-header"]).stdout
    check(out.count("/* thread ") == 2, "two thread blocks:\n" + out[:3000])
    joins = out.count("pthread_join() {") + out.count("pthread_join();")
    check(joins == 1, "the program's one pthread_join, not dprobe's (%d)" % joins)
    # (The C library's own __cxa_finalize calls, one per loaded object at exit, stay: they
    # run the finalisers of each object, the program's among them.)
    check("fuse" not in out and "fopen" not in out.split("exit() {")[-1],
          "no tracefs teardown or runtime destructors at exit:\n" + out[-3000:])
    # The agent's own calls on the way out (its on_exit handler asking getpid whether this
    # process owns the session, and stopping the program's CPU-time timers around its
    # teardown with setitimer) are not the program's: graph, built without -pg, calls
    # neither. (Found with uftrace's s-abc.c: both showed under exit().)
    record(["-o", "x.dat", "-F", "libc.so.6:*", "--", os.path.join(PROGS, "plain", "graph")])
    out = run(["report", "-i", "x.dat", "--format", "graph", "--no-header"]).stdout
    check("exit() {" in out and "getpid" not in out and "setitimer" not in out,
          "no getpid or setitimer of the agent's:\n" + out[-3000:])
    # Every function of every object: dprobe's own libraries are not in the program's view
    # (linked into the preload, or in its namespace), not given int3 entries or jump sites;
    # the program's own libraries are traced.
    p = record(["-o", "a.dat", "-F", "*", "--", prog("graph")])
    check("Zydis" not in p.stderr and "fuse_" not in p.stderr and "through an int3" not in p.stderr,
          "no entries on dprobe's own libraries: %r" % p.stderr[:3000])
    out = run(["report", "-i", "a.dat", "--format", "graph", "--no-header"]).stdout
    check("main() {" in out and "pthread_create() {" in out, "the program and libc:\n" + out[:3000])
    check(not any(w in out for w in ("Zydis", "fuse_", "urcu", "elf_", "dwarf_", "std::")),
          "nothing of dprobe's own libraries:\n" + out[-3000:])
    # The tracefs serving requests while the program runs: its threads stay out.
    import signal
    import time
    sock = os.path.join(WORK, "own.sock")
    env = dict(ENV, DPROBE_TRACEFS_SOCKET=sock)
    rp = subprocess.Popen([DPROBE, "record", "-q", "-o", "l.dat", "-F", "libc.so.6:*", "--",
                           prog("loop")], cwd=WORK, env=env, stderr=subprocess.PIPE, text=True)
    served = 0
    for _ in range(100):
        if run(["ctl", "--socket", sock, "cat", "available_filter_functions"],
               ok=False).returncode == 0:
            served += 1
            if served == 3:
                break
        time.sleep(0.05)
    check(served == 3, "the tracefs answered")
    time.sleep(0.2)
    rp.send_signal(signal.SIGINT)
    err = rp.communicate(timeout=60)[1]
    check("from 1 thread in 1 process" in err, "loop's one thread only: %r" % err)
    out = run(["report", "-i", "l.dat", "--format", "graph", "--no-header"]).stdout
    check(out.count("/* thread ") == 1 and "nanosleep" in out,
          "one thread block, the program's:\n" + out[:2000])
elif CASE == "interposed":
    # The functions dprobe interposes (signal, sigaction, swapcontext, the unwinder's, fork's
    # handlers, execl), traced with every function of every object: the program is seen
    # calling what it calls untraced, never dprobe's work inside them. (Found with uftrace's
    # test programs: signal() showed as sigemptyset, sigaddset, pthread_mutex_lock,
    # pthread_sigmask ...; a first throw and a first swapcontext as __cxa_guard_acquire and
    # the loader's lock; fork as the agent's locks; execl as setitimer, fcntl, getpid.)
    # The plain build: one with -pg calls setitimer itself (gmon).
    exe = os.path.join(PROGS, "plain", "interposed")
    want = subprocess.run([exe], capture_output=True, text=True, timeout=60)
    p = record(["-o", "i.dat", "-F", "*", "--", exe])
    check(p.returncode == want.returncode == 0 and p.stdout == want.stdout == "4 0\n",
          "the program's output and status are kept: %r %r" % (p.stdout, p.stderr[-2000:]))
    out = run(["report", "-i", "i.dat", "--format", "graph", "--no-header"]).stdout
    for name in ("__cxa_guard_acquire", "sigemptyset", "sigaddset", "pthread_sigmask",
                 "setitimer", "fcntl"):
        check(name not in out, "%s is none of the program's calls:\n%s" % (name, out[:6000]))
    check(re.search(r"\| {4}(bsd_signal|signal|ssignal|__bsd_signal)\(\)", out) is not None,
          "main calls libc's signal():\n" + out[:3000])
    for called in ("on_signal", "on_side", "thrower", "__fork", "execve"):
        check(called + "()" in out, "%s is in the graph:\n%s" % (called, out[:6000]))
elif CASE == "clash":
    # symclash's own step() and the C library's compatibility step@GLIBC_2.2.5: a probe on
    # "step" is on the program's, as a call of step binds (not refused as not unique, not
    # both, and with the argument names). clash_value, defined by two
    # libraries: refused, naming both and how to name one.
    for ev in ("p:ev step", "f:ev step", "f:ev step i"):
        p = record(["-o", "c.dat", "-e", ev, "--", prog("symclash")], ok=False)
        check(p.returncode == 0 and p.stdout == "sum 25 2\n", "%s: %r" % (ev, p.stderr))
        text = run(["report", "-i", "c.dat", "--no-header"]).stdout
        places = re.findall(r" ev: \((\S+)\)(.*)$", text, re.M)
        want = [("step+0x0/0x%s" % places[0][0].split("/0x")[1] if places else "", "")] * 5
        if ev.endswith(" i"):
            want = [(w, " i=%d" % i) for i, (w, _) in enumerate(want)]
        check(places == want, "%s: 5 hits of the program's step: %r" % (ev, text))
    for ev in ("p:ev clash_value", "f:ev clash_value"):
        p = record(["-o", "c.dat", "-e", ev, "--", prog("symclash")], ok=False)
        check(p.returncode != 0 and p.stdout == "" and
              "'clash_value' names 2 functions: in %s/libclash_a.so (0x" % os.path.dirname(
                  prog("symclash")) in p.stderr and
              "name one: libclash_a.so:clash_value or libclash_b.so:clash_value" in p.stderr and
              "error: The symbol is not unique" in p.stderr,
              "%s refused, naming both: %r" % (ev, p.stderr))
    # (the call binds to libclash_a.so's, the first in the search order)
    p = record(["-o", "c.dat", "-e", "p:ev libclash_a.so:clash_value x=%di:s32", "--",
                prog("symclash")])
    check(p.stdout == "sum 25 2\n" and
          re.search(r" ev: \(clash_value\+0x0/0x[0-9a-f]+\) x=1$",
                    run(["report", "-i", "c.dat", "--no-header"]).stdout, re.M),
          "one named: libclash_a.so:clash_value")
elif CASE == "messages":
    # What goes wrong is said with its cause and what to do; the error_log entries
    # keep the kernel's names and carets.
    import errno
    import signal
    import time
    # A typo in a dynamic_events line's type, not perf-probe's FUNC:LINE.
    p = run(["record", "-e", "x:foo bar", "--", prog("loop")], ok=False)
    check(p.returncode != 0 and "'x:' is not a probe type" in p.stderr and
          "line number" in p.stderr and "bad line number" not in p.stderr,
          "x:foo bar: %r" % p.stderr)
    # f: on a library not loaded yet, and on a function that can have no site.
    p = run(["record", "-e", "f:ev libnope.so:foo", "--", prog("loop")], ok=False)
    check(p.returncode != 0 and "libnope.so is not loaded in the process (yet)" in p.stderr and
          "a p: probe on libnope.so:foo waits for the library" in p.stderr and
          "trace_fprobe: error: Invalid probed address or symbol" in p.stderr and
          "\n    Command: f:ev libnope.so:foo\n                  ^" in p.stderr,
          "f: on a library not loaded: %r" % p.stderr)
    p = run(["record", "-e", "f:ev run_ops", "--", prog("zlib_calls")], ok=False)
    check(p.returncode != 0 and
          "run_ops can have no patch or jump site (indirect jump in the function" in p.stderr and
          "a p: probe (an int3 breakpoint, slower) reaches it" in p.stderr and
          "error: Invalid probed address or symbol" in p.stderr,
          "f: on a function without a site: %r" % p.stderr)
    # dprobe ctl: a process that is not traced, one that does not exist.
    p = run(["ctl", "-p", "1", "cat", "trace"], ok=False)
    check(p.returncode != 0 and re.match(r"dprobe ctl: process 1 \(.*\) is not traced: it "
                                          r"serves no tracefs", p.stderr),
          "ctl on an untraced process: %r" % p.stderr)
    gone = subprocess.Popen(["true"])
    gone.wait()
    p = run(["ctl", "-p", str(gone.pid), "cat", "trace"], ok=False)
    check(p.returncode != 0 and "no process %d" % gone.pid in p.stderr,
          "ctl on no process: %r" % p.stderr)
    # The tracefs of a recorded process: a file it does not have cannot be written (EACCES
    # through FUSE, as on the kernel's tracefs; ENOENT on open without O_CREAT).
    rec = subprocess.Popen([DPROBE, "record", "-q", "-o", "m.dat", "--", prog("loop")],
                           cwd=WORK, env=ENV, stderr=subprocess.PIPE, text=True)
    pid, mount = None, None
    for _ in range(200):
        out = subprocess.run(["pgrep", "-P", str(rec.pid), "-x", "loop"], capture_output=True,
                             text=True).stdout.split()
        if out and run(["ctl", "-p", out[0], "cat", "tracing_on"], ok=False).returncode == 0:
            pid = out[0]
            break
        time.sleep(0.05)
    check(pid is not None, "the recorded loop serves its tracefs")
    if pid:
        p = run(["ctl", "-p", pid, "write", "nosuch", "1"], ok=False)
        check(p.returncode != 0 and "nosuch: no such file in the tracefs" in p.stderr,
              "ctl write to a missing file: %r" % p.stderr)
        p = run(["ctl", "-p", pid, "write", "-a", "dynamic_events", "f:oops no_such_fn"],
                ok=False)
        check(p.returncode != 0 and "dynamic_events: the write was refused" in p.stderr,
              "ctl: a rejected line is a refused write: %r" % p.stderr)
        mount = os.path.join(ENV["XDG_RUNTIME_DIR"], "dprobe", pid)
        if os.path.ismount(mount):
            for flags, want in ((os.O_WRONLY | os.O_CREAT, errno.EACCES),
                                (os.O_WRONLY, errno.ENOENT)):
                try:
                    os.close(os.open(os.path.join(mount, "nosuch"), flags, 0o644))
                    got = 0
                except OSError as e:
                    got = e.errno
                check(got == want, "open(nosuch, %#x) in the FUSE tree: errno %d, want %d" %
                      (flags, got, want))
            fd = os.open(os.path.join(mount, "tracing_on"), os.O_WRONLY | os.O_CREAT, 0o644)
            os.write(fd, b"1\n")  # a file it has opens with O_CREAT as it is
            os.close(fd)
        rec.send_signal(signal.SIGINT)
        rec.communicate(timeout=60)
    else:
        rec.kill()
    # funcs on a stripped program; report on what is no trace file.
    stripped = os.path.join(WORK, "loop-stripped")
    subprocess.run(["strip", "-o", stripped, prog("loop")], check=True)
    p = run(["funcs", "-x", stripped], ok=False)
    check(p.returncode != 0 and "is stripped (no .symtab)" in p.stderr,
          "funcs on a stripped program: %r" % p.stderr)
    p = run(["funcs", "-x", "/bin/ls", "main*"], ok=False)
    check(p.returncode != 0 and "/bin/ls is stripped (no .symtab): only the" in p.stderr,
          "funcs glob on a stripped program: %r" % p.stderr)
    p = run(["report", "-i", WORK], ok=False)
    check(p.returncode != 0 and "a directory, not a trace file" in p.stderr,
          "report -i DIR: %r" % p.stderr)
    open(os.path.join(WORK, "empty.dat"), "w").close()
    p = run(["report", "-i", "empty.dat"], ok=False)
    check(p.returncode != 0 and "an empty file" in p.stderr, "report -i EMPTY: %r" % p.stderr)
    run(["report", "-i", "m.dat", "-f", "trace-dat", "-o", "m.trace.dat"])
    p = run(["report", "-i", "m.trace.dat"], ok=False)
    check(p.returncode != 0 and "a trace-cmd trace.dat, not a dprobe trace file: read it with "
          "'trace-cmd report m.trace.dat'" in p.stderr, "report -i TRACE.DAT: %r" % p.stderr)
elif CASE == "terminal":
    # On a terminal: the live status line is drawn only where the program does not write,
    # else it would run into the program's output ("...0.00 MB ]7"); with the program's
    # output redirected it goes to the terminal. -q leaves out the notes too (the int3
    # entries), not only the warnings.
    import pty

    def on_pty(cmd):
        pid, fd = pty.fork()
        if pid == 0:
            os.chdir(WORK)
            os.execve("/bin/sh", ["sh", "-c", cmd], ENV)
        out = b""
        while True:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
        os.waitpid(pid, 0)
        return out.decode(errors="replace")

    rec = "%s record -o t.dat -- %s" % (DPROBE, prog("dlprog"))
    out = on_pty(rec)
    check("7\r\n" in out and re.search(r"\[ dprobe record: \d+ events \(0 lost\)", out) and
          "MB ]" not in out.split("7\r\n")[0],
          "no status line where the program writes: %r" % out)
    out = on_pty(rec + " > out.txt 2> err.txt")
    check(re.search(r"\r\033\[K\[ dprobe record: \S+ \(pid \d+\): \d+ events", out),
          "the status line on the terminal when the output is redirected: %r" % out)
    with open(os.path.join(WORK, "out.txt")) as f:
        check(f.read() == "7\n", "the program's output, redirected")
    with open(os.path.join(WORK, "err.txt")) as f:
        err = f.read()
    check("\r" not in err and "[ dprobe record: " in err, "the summary: %r" % err)
    p = run(["record", "-q", "-o", "q.dat", "--follow-loads", "-F", "libdlplugin.so:plugin_*",
             "--", prog("dlprog")])
    check(p.stderr.startswith("[ dprobe record: ") and "int3" not in p.stderr,
          "record -q: the summary only: %r" % p.stderr)
elif CASE == "closefds":
    # A program that closes every descriptor it did not open (closefrom, close_range, close()
    # on each), then opens files: dprobe's descriptors (ring buffer, trace file, the CLI's
    # socket and eventfd, /dev/fuse) stay open, so its later thread and child are recorded
    # and nothing of dprobe's is written into the program's files, which got the numbers.
    # (Found: ring-buffer pages fallocated into one of them, session records appended to
    # another, libfuse's "reading device: Bad file descriptor" on stderr, the thread lost.)
    for how in ("closefrom", "close_range", "close"):
        d = os.path.join(WORK, how)
        os.makedirs(d)
        p = record(["-o", "c.dat", "--", prog("closefds"), d, how])
        want = "".join("f%d 5\n" % i for i in range(8))
        check(p.stdout == want and "lost" not in p.stderr.replace("(0 lost)", "") and
              "Bad file descriptor" not in p.stderr,
              "%s: the program's files hold its lines only: %r %r" % (how, p.stdout, p.stderr))
        check("from 3 threads in 2 processes" in p.stderr, "%s: thread and child: %r" %
              (how, p.stderr))
        out = run(["report", "-i", "c.dat", "--format", "graph", "--no-header"]).stdout
        check(out.count("work();") == 3, "%s: work() in main, thread and child:\n%s" %
              (how, out))
elif CASE == "reload":
    # libdl_a.so loaded, called, unloaded; libdl_b.so loaded at the same address, called:
    # each call is named by the library that was there at its time.
    p = record(["-o", "r.dat", "--follow-loads", "-F", "libdl_a.so:f*", "-F", "libdl_b.so:f*",
                "--", prog("dl_reload")])
    check(p.stdout == "7 10 same address\n",
          "both libraries ran, at one address (else this tests nothing): %r" % p.stdout)
    compare(mask_graph(run(["report", "-i", "r.dat", "--format", "graph"]).stdout),
            "dl_reload.graph")
elif CASE == "cxx":
    # C++ functions are shown demangled (as uftrace and perf do): by default without their
    # parameters or template arguments, the whole name with --demangle=full, the symbols as
    # they are with --demangle=no; in the graph, the text trace and Chrome JSON alike.
    p = record(["-o", "x.dat", "--", prog("cxx_names")])
    check(p.stdout == "22\n", "the program's output is kept (%r)" % p.stdout)
    compare(mask_graph(run(["report", "-i", "x.dat", "--format", "graph"]).stdout),
            "cxx_names.graph")
    full = run(["report", "-i", "x.dat", "--format", "graph", "--demangle=full"]).stdout
    for want in ("bar(int);", "geo::point::operator+(geo::point const&) const {",
                 "int geo::twice<int>(int);", "geo::box<long>::get() const;"):
        check(want in full, "--demangle=full shows %r:\n%s" % (want, full))
    raw = run(["report", "-i", "x.dat", "--format", "graph", "--demangle=no"]).stdout
    check("_Z3foov() {" in raw and "_Z3bari();" in raw, "--demangle=no: symbols:\n%s" % raw)
    text = run(["report", "-i", "x.dat"]).stdout
    check("--> geo::point::origin (1)" in text and "_Z" not in text, "text:\n%s" % text)
    run(["report", "-i", "x.dat", "--format", "chrome", "-o", "x.json"])
    doc, ends = chrome_check(os.path.join(WORK, "x.json"))
    names = {e["name"] for e in doc["traceEvents"] if e["ph"] == "B"}
    check({"foo", "bar", "geo::point::operator+", "geo::box::get"} <= names and
          not any(n.startswith("_Z") for n in names), "chrome names %s" % sorted(names))
elif CASE == "text":
    record(["-o", "a.dat",
            "-e", "p:probe_args/add args:add a=%di:s32 b=%si:s32",
            "-e", "r:probe_args/add_ret args:add ret=$retval:s64",
            "-e", "f:slen_entry slen s=+0($arg1):string",
            "--", prog("args")])
    compare(mask_text(run(["report", "-i", "a.dat"]).stdout), "args.text")
elif CASE == "chrome":
    record(["-o", "c.dat", "--graph", "-e", "f:leaf_arg leaf x=$arg1:s32", "--", prog("graph")])
    run(["report", "-i", "c.dat", "--format", "chrome", "-o", "c.json"])
    doc, ends = chrome_check(os.path.join(WORK, "c.json"))
    names = sorted({e["name"] for e in doc["traceEvents"] if e["ph"] == "B"})
    check(names == ["fib", "leaf", "main", "middle", "worker"], "B names %s" % names)
    check(ends == 13, "13 calls closed, got %d" % ends)
    inst = [e for e in doc["traceEvents"] if e["ph"] == "i"]
    check(sorted(e["args"]["x"] for e in inst) == ["1", "10", "11", "2"],
          "leaf_arg instants carry x: %s" % [e["args"] for e in inst])
    check(len({e["tid"] for e in inst}) == 2, "instant events on two threads")
elif CASE == "crash":
    p = record(["-o", "x.dat", "-F", "step", "--", prog("crash")], ok=False)
    check(p.returncode == 128 + 11, "exit status 139 for SIGSEGV, got %d" % p.returncode)
    check("terminated by signal 11" in p.stderr, "says the program died: %r" % p.stderr)
    out = mask_graph(run(["report", "-i", "x.dat", "--format", "graph", "--no-header"]).stdout)
    check(out.count("step();") == 5, "the 5 calls before the crash were flushed:\n" + out)
    # Untraced, the kernel alone kills the program: what dprobe's handler does to give it the
    # default action (errno kept, sigemptyset ...) is not the program's. (raise's own getpid
    # is.)
    p = record(["-o", "y.dat", "-e", "p:mainev main argc=%di:s32", "-F", "step", "-F",
                "libc.so.6:sigemptyset", "-F",
                "libc.so.6:__errno_location", "-F", "libc.so.6:__getpid", "--", prog("crash")],
               ok=False)
    out = run(["report", "-i", "y.dat", "--format", "graph", "--no-header"]).stdout
    check(p.returncode == 128 + 11 and out.count("step();") == 5 and
          out.count("__getpid();") == 1 and
          not any(n in out for n in ("sigemptyset", "__errno_location")),
          "the program's calls only:\n" + out)
elif CASE == "interrupt":
    import signal
    import time
    p = subprocess.Popen([DPROBE, "record", "-q", "-o", "i.dat", "-F", "tick", "--",
                          prog("loop")], cwd=WORK, env=ENV, stderr=subprocess.PIPE, text=True)
    time.sleep(1.0)
    p.send_signal(signal.SIGINT)  # what Ctrl-C does to the command
    err = p.communicate(timeout=60)[1]
    check(p.returncode == 128 + signal.SIGINT, "exit status 130, got %d" % p.returncode)
    check("terminated by signal 2" in err, "says the program was interrupted: %r" % err)
    check(not mounts_left(), "no tracefs mount left after an interrupt")
    d = run(["report", "-i", "i.dat", "--format", "graph", "--no-header"]).stdout
    check(d.count("tick();") >= 20, "the calls before the interrupt were flushed:\n" + d)
    check("warning" not in run(["report", "-i", "i.dat"]).stderr, "a clean end record")
elif CASE == "ctl":
    import signal
    import time
    sock = os.path.join(WORK, "tracefs.sock")
    env = dict(ENV, DPROBE_TRACEFS_SOCKET=sock, DPROBE_NO_FUSE="1")
    p = subprocess.Popen([DPROBE, "record", "-q", "-o", "t.dat", "-e", "f:tick_in tick i=$arg1:s32",
                          "--", prog("loop")], cwd=WORK, env=env, stderr=subprocess.PIPE,
                         text=True)
    ctl = lambda *a, ok=True: run(["ctl", "--socket", sock] + list(a), ok=ok)
    for _ in range(100):
        if ctl("cat", "dynamic_events", ok=False).returncode == 0:
            break
        time.sleep(0.05)
    check(ctl("cat", "dynamic_events").stdout == "f:fprobes/tick_in tick i=$arg1:s32\n",
          "dynamic_events lists the recorded event")
    check(ctl("read", "events/fprobes/tick_in/enable").stdout == "1\n", "the event is enabled")
    ctl("write", "-a", "dynamic_events", "f:tick_out tick%return r=$retval:s32")
    ctl("write", "events/fprobes/tick_out/enable", "1")
    bad = ctl("write", "-a", "dynamic_events", "f:oops no_such_function", ok=False)
    check(bad.returncode != 0 and "Invalid probed address or symbol" in bad.stderr and
          "^" in bad.stderr, "a rejected line shows its error_log entry: %r" % bad.stderr)
    check("events/" in ctl("ls").stdout, "ls lists the tree")
    time.sleep(0.5)
    p.send_signal(signal.SIGINT)
    p.communicate(timeout=60)
    out = run(["report", "-i", "t.dat", "--no-header"]).stdout
    check(out.count("tick_in:") >= 10 and out.count("tick_out:") >= 10,
          "events added through ctl while recording are in the trace:\n" + out[-2000:])
    check("Unknown type" not in out, "every record's event is described")
elif CASE == "forkexec":
    p = record(["-o", "f.dat", "-F", "in_*", "--", prog("forkexec")])
    check("parent 2" in p.stdout and "child 3" in p.stdout, "both images ran: %r" % p.stdout)
    out = run(["report", "-i", "f.dat", "--format", "graph", "--no-header"]).stdout
    check("in_parent();" in out and "in_child();" in out, "both images traced:\n" + out)
    procs = set(re.findall(r"process (\d+)", out))
    check(len(procs) == 2, "two processes in the graph: %s" % procs)
elif CASE == "errors":
    p = record(["-F", "leaf", "--", os.path.join(WORK, "no-such-program")], ok=False)
    check(p.returncode != 0 and "no-such-program': command not found" in p.stderr,
          "missing program: %r" % p.stderr)
    p = record(["-e", "p:bad graph:no_such_function", "--", prog("graph")], ok=False)
    check(p.returncode != 0 and "no_such_function" in p.stderr and
          "Invalid probed address or symbol" in p.stderr and "^" in p.stderr,
          "unknown symbol: %r" % p.stderr)
    p = record(["-e", "p:bad libc.so.6:no_such_libc_function", "--", prog("graph")], ok=False)
    check(p.returncode != 0 and "Invalid probed address or symbol" in p.stderr,
          "unknown symbol in a library (found by the agent): %r" % p.stderr)
    check(p.stdout == "", "the program did not run after a rejected event")
    p = record(["-e", "p:bad leaf x=%nosuchreg", "--", prog("graph")], ok=False)
    caret = [l for l in p.stderr.splitlines() if l.strip() == "^"]
    cmd = [l for l in p.stderr.splitlines() if "Command:" in l]
    check(p.returncode != 0 and "Invalid register name" in p.stderr and caret and cmd and
          cmd[0].index("%nosuchreg") == caret[0].index("^"),
          "malformed event line, caret under the bad argument: %r" % p.stderr)
    p = record(["-o", os.path.join(WORK, "no-dir", "x.dat"), "-F", "leaf", "--", prog("graph")],
               ok=False)
    check(p.returncode != 0 and "cannot write" in p.stderr and "no-dir" in p.stderr,
          "unwritable output: %r" % p.stderr)
    p = record(["-F", "no_such_glob*", "--", prog("graph")], ok=False)
    check(p.returncode != 0 and "no_such_glob*" in p.stderr, "empty -F: %r" % p.stderr)
    p = run(["report", "-i", os.path.join(WORK, "missing.dat")], ok=False)
    check(p.returncode != 0 and "missing.dat" in p.stderr, "report of a missing file")
elif CASE == "funcs":
    out = run(["funcs", "-x", prog("graph")]).stdout
    kinds = dict(re.findall(r"^0x[0-9a-f]+ +\d+ +(\S+) +(\S+)", out, re.M)[i][::-1]
                 for i in range(len(re.findall(r"^0x", out, re.M))))
    want = {"fentry": "fentry", "pfe": "patchable", "plain": "jump"}[FLAVOUR]
    for f in ["leaf", "middle", "fib", "worker", "main"]:
        check(kinds.get(f) == want, "%s is %s (got %s)" % (f, want, kinds.get(f)))
    p = run(["funcs", "-x", os.path.join(WORK, "nope")], ok=False)
    check(p.returncode != 0 and "nope" in p.stderr, "funcs names the missing binary")
elif CASE == "probe":
    p = run(["probe", "-x", prog("args"), "add%return $retval"])
    check(p.stdout == "r:probe_args/add__return args:add arg1=$retval\n", repr(p.stdout))
    p = run(["probe", "-x", prog("args"), "--add", "add a b=%si:s32"])  # a: from DWARF
    p = run(["probe", "--list"])
    check("probe_args:add" in p.stdout, "listed: %r" % p.stdout)
    record(["-o", "p.dat", "-e", "probe_args:add", "--", prog("args")])
    out = mask_text(run(["report", "-i", "p.dat", "--no-header"]).stdout)
    check(out.count("add: (add+OFF/SIZE) a=") == 3, "stored probe recorded:\n" + out)
    p = run(["probe", "-x", prog("args"), "nosuch"], ok=False)
    check(p.returncode != 0 and "Invalid probed address or symbol" in p.stderr, p.stderr)
    p = run(["probe", "--del", "probe_args:*"])
    check("Removed event: probe_args:add" in p.stdout, p.stdout)
elif CASE == "follow":
    # dlprog loads libdlplugin.so after it started, calls it, unloads it, and loads it again
    # elsewhere: --follow-loads arms the library's functions at each load, before its
    # constructor (plugin_init) runs, and report names the functions of both loads.
    glob = "libdlplugin.so:plugin_*"
    p = run(["record", "-o", "d.dat", "--follow-loads", "-F", glob, "--", prog("dlprog")])
    check(p.stdout == "7\n", "the program's output is kept (%r)" % p.stdout)
    # plugin_ops can have no site: an int3 entry at each load, said once (not left out of
    # the graph unsaid).
    check(len(re.findall(r"traced through an int3 breakpoint.*:\n  plugin_ops \(indirect jump",
                         p.stderr)) == 1, "plugin_ops's int3 entry is said: %r" % p.stderr)
    compare(mask_graph(run(["report", "-i", "d.dat", "--format", "graph"]).stdout),
            "dlprog.graph")
    # Without --follow-loads the glob matches nothing when the program starts: refused,
    # pointing at the option; and the option wants something to follow.
    p = record(["-o", "n.dat", "-F", glob, "--", prog("dlprog")], ok=False)
    check(p.returncode != 0 and glob in p.stderr and "--follow-loads" in p.stderr,
          "a glob for a library loaded later, without --follow-loads: %r" % p.stderr)
    check(p.stdout == "", "the program did not run")
    p = record(["-o", "n.dat", "--follow-loads", "--", prog("dlprog")], ok=False)
    check(p.returncode != 0 and "--filter" in p.stderr,
          "--follow-loads without -F: %r" % p.stderr)
    # A library the program never loads: nothing recorded, and record says which glob waited
    # for which library; not for a library that was loaded (its functions just did not run).
    p = record(["-o", "n.dat", "--follow-loads", "-F", "libnosuch.so:plugin_*",
                "-F", "libdlplugin.so:nosuch_*", "--", prog("dlprog")])
    check(p.stdout == "7\n" and "0 events" in p.stderr and
          "-F 'libnosuch.so:plugin_*' matched nothing: the program never loaded libnosuch.so"
          in p.stderr and "never loaded libdlplugin.so" not in p.stderr,
          "a library never loaded: %r" % p.stderr)
    # libz.so.1 is not in the program's namespace before the program loads it (dprobe's
    # libdw has its own, in dprobe's namespace); dlzlib's dlopen of a library that needs it
    # brings it in, and its functions are followed from then on.
    p = record(["-o", "z.dat", "--follow-loads", "-F", "libz.so.1:*compress",
                "--", prog("dlzlib")])
    check(p.stdout == "roundtrip 0\n", "dlzlib's output is kept (%r)" % p.stdout)
    graph = run(["report", "-i", "z.dat", "--format", "graph", "--no-header"]).stdout
    check(re.search(r"\|  compress\(\)", graph) and re.search(r"\|  uncompress\(\)", graph),
          "libz's functions, once the program's, are followed:\n" + graph)
    # attach: the same program, started first and waiting on its stdin.
    t = subprocess.Popen([prog("dlprog"), "wait"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True, cwd=WORK, env=ENV)
    m = re.match(r"ready (\d+)", t.stdout.readline())
    check(m is not None, "dlprog started")
    if m:
        p = run(["attach", "-B", "-q", "-p", m.group(1), "--follow-loads", "-F", glob,
                 "-o", "a.dat"], ok=False)
        check(p.returncode == 0, "attach --follow-loads: %r" % p.stderr)
        t.stdin.write("go\n")
        t.stdin.flush()
        out = t.stdout.read()
        check(t.wait(timeout=60) == 0 and out == "7\n", "attached program's output: %r" % out)
        graph = mask_graph(run(["report", "-i", "a.dat", "--format", "graph",
                                "--no-header"]).stdout)
        want = mask_graph(run(["report", "-i", "d.dat", "--format", "graph",
                               "--no-header"]).stdout)
        check(graph == want, "attach follows the same loads as record:\n" + graph)
    else:
        t.kill()
elif CASE == "noloss":
    # Default settings lose nothing (a full buffer waits for `record` to copy its pages
    # out): five threads making calls as fast as they can, and every libc call of ls. The
    # graph starts with main. With --no-wait and small buffers, events are lost: record
    # says by which thread and when, report marks where. In each flavour (the entries' cost
    # sets how fast the threads write); what depends on no flavour, in the fentry run.
    p = record(["-o", "n.dat", "--", prog("burst")])
    check(p.stdout == "4375000\n", "burst ran (%r)" % p.stdout)
    check("2500012 events (0 lost) from 5 threads" in p.stderr, "all recorded: %r" % p.stderr)
    # 16 bytes a function-graph entry or exit (uftrace's record: 16 too), with the pages' and
    # chunks' headers under 17.
    mb = re.search(r"([\d.]+) MB written", p.stderr)
    check(mb and float(mb.group(1)) * 1048576 / 2500012 < 17,
          "bytes per event: %r" % (mb and float(mb.group(1)) * 1048576 / 2500012))
    # report streams: its resident memory does not grow with the trace (this one about 40 MB
    # against a few KB). Not in the ASan build, whose quarantine keeps what is freed. Before
    # this script reads anything big: a child's peak starts at its parent's (fork copies it),
    # about 17 MB here, above report's own 12 MB; reading the whole trace would pass it.
    if FLAVOUR == "fentry" and not os.environ.get("DPROBE_E2E_ASAN_RUNTIME"):
        def report_rss(dat, fmt):
            with open(os.devnull, "w") as null:
                rp = subprocess.Popen([DPROBE, "report", "-i", dat, "--format", fmt], cwd=WORK,
                                      env=ENV, stdout=null, stderr=null)
                _, status, ru = os.wait4(rp.pid, 0)
                rp.returncode = os.waitstatus_to_exitcode(status)
            check(rp.returncode == 0, "report %s of %s" % (fmt, dat))
            return ru.ru_maxrss  # KB
        record(["-o", "t.dat", "--", prog("graph")])
        big = os.path.getsize(os.path.join(WORK, "n.dat")) // 1024
        for fmt in ("graph", "text"):
            small_kb, big_kb = report_rss("t.dat", fmt), report_rss("n.dat", fmt)
            print("report --format %s: %d KB resident for a %d KB trace, %d KB for a tiny one" %
                  (fmt, big_kb, big, small_kb))
            check(big_kb - small_kb < 8 * 1024,
                  "report --format %s: %d KB resident for a %d KB trace, %d KB for a tiny one" %
                  (fmt, big_kb, big, small_kb))
    g = run(["report", "-i", "n.dat", "--format", "graph", "--no-header"]).stdout
    check("LOST" not in g and g.count("|  main() {") == 1 and g.count("|  worker() {") == 4,
          "graph whole, from main on:\n" + g[:1500])
    p = record(["-o", "n.dat", "--no-wait", "-b", "16", "--", prog("burst")])
    lost = re.search(r"\((\d+) lost\)", p.stderr)
    check(lost and int(lost.group(1)) > 0, "--no-wait: losses: %r" % p.stderr)
    check(re.search(r"events lost by thread \d+ of process \d+ .*after the start "
                    r"\(its buffer was full", p.stderr), "losses told: %r" % p.stderr)
    g = run(["report", "-i", "n.dat", "--format", "graph", "--no-header"]).stdout
    check("/* LOST " in g, "report marks the losses")
    if FLAVOUR == "fentry":
        p = record(["-o", "n.dat", "-F", "libc.so.6:*", "--", "ls", "/usr/bin"])
        check(re.search(r"\d{4,} events \(0 lost\)", p.stderr), "ls: all recorded: %r" % p.stderr)
        # A shell that forks and execs: a forked child runs C library code before any fork
        # handler (its lock resets); that code writes nothing, least of all into its parent's
        # buffer (which then lost events), and neither does dprobe's own setup of the child.
        p = record(["-o", "n.dat", "-F", "libc.so.6:*", "--", "bash", "-c",
                    "for i in $(seq 15); do /bin/echo hi >/dev/null; x=$(echo hi); done"])
        check(re.search(r"\d{4,} events \(0 lost\) from \d+ threads in \d+ processes", p.stderr),
              "forks and execs: all recorded: %r" % p.stderr)
        t = run(["report", "-i", "n.dat", "--format", "text"]).stdout
        check("_IO_list_resetlock" not in t and "memfd_create" not in t,
              "no child's pre-handler calls, no dprobe setup calls:\n" +
              "\n".join(l for l in t.splitlines() if "resetlock" in l or "memfd" in l)[:2000])
        # record returns right after its program ends (no helper thread's poll timeout in the
        # program's exit, no sleep in record): the best of three under 0.1 s.
        import time
        lags = []
        for _ in range(3):
            p = record(["-o", "n.dat", "--", sys.executable, "-c",
                        "import time; print(time.monotonic(), flush=True)"])
            lags.append(time.monotonic() - float(p.stdout.split()[-1]))
        check(min(lags) < 0.1, "record returned %s s after its program's last line" % lags)
elif CASE == "many":
    # Thousands of events: more text than one environment string may hold (the agent reads
    # them from a file the command removes afterwards), created disabled and enabled in one
    # batch before main; every one fires on every call.
    n = 2400
    events = []
    for i in range(n):
        if i % 4 == 3:
            events += ["-e", "r:many/e%d args:add ret=$retval:s64" % i]
        else:
            events += ["-e", "p:many/e%d args:add a=%%di:s32 b=%%si:s32" % i]
    env_tmp = os.path.join(WORK, "tmp")
    os.makedirs(env_tmp)
    ENV["TMPDIR"] = env_tmp
    p = record(["-o", "m.dat"] + events + ["--", prog("args")])
    del ENV["TMPDIR"]
    untraced = subprocess.run([prog("args")], capture_output=True, text=True).stdout
    check(p.stdout == untraced, "the program's output is kept (%r, untraced %r)" %
          (p.stdout, untraced))
    check(os.listdir(env_tmp) == [], "events file left behind: %s" % os.listdir(env_tmp))
    out = run(["report", "-i", "m.dat", "--no-header"]).stdout
    hits = {}
    for m in re.finditer(r" (e\d+): \(", out):
        hits[m.group(1)] = hits.get(m.group(1), 0) + 1
    check(len(hits) == n and set(hits.values()) == {3},
          "each of %d events recorded 3 times (%d events seen, counts %s)" %
          (n, len(hits), sorted(set(hits.values()))))
elif CASE == "pending":
    # Probes on a library the program has not loaded yet (the kernel's pending probes on a
    # module, and its uprobes on any file): dlprog loads libdlplugin.so, unloads it and loads
    # it again elsewhere. The probes are armed at each load before the library's constructor
    # runs, by symbol (lib:sym) and by file offset (path:0xoffset).
    lib = prog("libdlplugin.so")
    out = subprocess.run(["readelf", "-sW", "-lW", lib], capture_output=True, text=True).stdout
    sym = re.search(r"^\s*\d+: ([0-9a-f]+)\s+\d+ FUNC\s+\S+\s+\S+\s+\S+ plugin_run$", out, re.M)
    loads = re.findall(r"^\s*LOAD\s+0x([0-9a-f]+) 0x([0-9a-f]+) 0x[0-9a-f]+ 0x([0-9a-f]+)", out,
                       re.M)
    check(sym and loads, "plugin_run and the segments of %s:\n%s" % (lib, out))
    vaddr = int(sym.group(1), 16)
    foff = [vaddr - int(v, 16) + int(o, 16) for o, v, sz in loads
            if int(v, 16) <= vaddr < int(v, 16) + int(sz, 16)][0]
    p = record(["-o", "p.dat",
                "-e", "p:pend/sq libdlplugin.so:plugin_square x=%di:s32",
                "-e", "r:pend/sqret libdlplugin.so:plugin_square ret=$retval:s32",
                "-e", "p:pend/run %s:0x%x round=%%di:s32" % (lib, foff),
                "--", prog("dlprog")])
    check(p.stdout == "7\n", "the program's output is kept (%r)" % p.stdout)
    # The probed places by name: each load of the library is described in the trace file
    # as it happens (the loader hook is there for the pending probes), without
    # --follow-loads (not raw addresses). A probe by file offset prints its
    # address, as the kernel's uprobe events do.
    compare(mask_text(run(["report", "-i", "p.dat"]).stdout), "pending.text")
    # With --follow-loads and a graph of the library, a pending probe on one of its
    # functions: the function stays in the graph (its site is made first, and the probe
    # rides on it), not silently left out.
    p = record(["-o", "g.dat", "--follow-loads", "-F", "libdlplugin.so:*",
                "-e", "p:pend/sq libdlplugin.so:plugin_square x=%di:s32",
                "--", prog("dlprog")])
    check(p.stdout == "7\n", "the program's output is kept (%r)" % p.stdout)
    graph = run(["report", "-i", "g.dat", "--format", "graph", "--no-header"]).stdout
    check(len(re.findall(r"\|    plugin_square\(\) \{", graph)) == 4 and
          len(re.findall(r"/\* sq: \(plugin_square\+0x0/0x[0-9a-f]+\) x=\d \*/", graph)) == 4,
          "plugin_square in the graph with its probe:\n" + graph)
    # A library that is not there at all is not pending: its file must exist.
    p = record(["-o", "n.dat", "-e", "p:pend/x /nonexistent/libx.so:0x1000", "--",
                prog("dlprog")], ok=False)
    check(p.returncode != 0 and "Failed to find the given file" in p.stderr,
          "a uprobe on a missing file: %r" % p.stderr)
elif CASE == "eprobe":
    # An event probe on an fprobe event, recorded: its records after the fprobe's, only for
    # the calls its filter lets through; an event probe alone (its event not enabled) is
    # refused nothing: the fprobe then runs in soft mode.
    record(["-o", "e.dat", "-e", "f:fp/add add a=$arg1:s32 b=$arg2:s32",
            "-e", "e:ep/neg fp.add a=$a b=$b:s32 if b < 0", "--", prog("args")])
    compare(mask_text(run(["report", "-i", "e.dat"]).stdout), "eprobe.text")
elif CASE == "trigger":
    # Event triggers from the command line: traceoff with a filter stops the trace after the
    # record that matched (a POST trigger: that record is kept); stacktrace with a count
    # follows its event's record once; a rejected trigger fails the start, naming the
    # option's text and showing the error_log entry with its caret.
    ev = "f:fp/add add a=$arg1:s32 b=$arg2:s32"
    record(["-o", "t.dat", "-e", ev, "--trigger", "fp:add:traceoff if a == 1", "--",
            prog("args")])
    text = run(["report", "-i", "t.dat"]).stdout
    adds = re.findall(r"add: \(add\+0x0/0x[0-9a-f]+\) a=(-?\d+) b=", text)
    check(adds == ["0", "1"], "traceoff if a == 1 keeps the calls up to a=1:\n" + text)
    record(["-o", "s.dat", "-e", ev, "--trigger", "fp:add:stacktrace:1", "--", prog("args")])
    text = run(["report", "-i", "s.dat"]).stdout
    check(text.count("<stack trace>") == 1 and
          re.search(r"a=0 b=0\n.*<stack trace>\n => add\n => main\n", text) is not None,
          "stacktrace:1 once, after the first record:\n" + text)
    p = record(["-o", "b.dat", "-e", ev, "--trigger", "fp:add:traceoff if nosuch == 1", "--",
                prog("args")], ok=False)
    check(p.returncode != 0 and
          "--trigger 'fp:add:traceoff if nosuch == 1' rejected" in p.stderr and
          "Field not found" in p.stderr and "Command: nosuch == 1" in p.stderr,
          "a bad trigger fails the start with its error_log entry: %r" % p.stderr)
    p = record(["-o", "b.dat", "-e", ev, "--trigger", "fp:nosuch:traceon", "--", prog("args")],
               ok=False)
    check(p.returncode != 0 and "no event fp/nosuch" in p.stderr,
          "a trigger on a missing event fails the start: %r" % p.stderr)
elif CASE == "hist":
    # A hist trigger from the command line is printed when the program ends, kept in the
    # recording (report --format hist prints it again), and report --hist computes the same
    # table from the recorded records with the same code: the two agree line for line.
    ev = "f:fp/add add a=$arg1:s32 b=$arg2:s32"
    p = record(["-o", "h.dat", "-e", ev, "--trigger", "fp:add:hist:keys=a:vals=b", "--",
                prog("args")])
    live = p.stdout[p.stdout.find("# events/fp/add/hist"):]
    check(re.search(r"^# events/fp/add/hist of \d+ \(args\)\n# event histogram\n", live, re.M)
          is not None and "# trigger info: hist:keys=a:vals=hitcount,b:sort=hitcount:size=2048"
          " [active]" in live, "the live hist printed at the end:\n" + p.stdout)
    for a, b in ((0, 0), (1, -10), (2, -20)):
        check(re.search(r"\{ a: +%d \} hitcount: +1  b: +%d\n" % (a, b & (2**64 - 1)), live)
              is not None, "a=%d b=%d counted:\n%s" % (a, b, live))
    check("    Hits: 3\n    Entries: 3\n    Dropped: 0\n" in live, "its totals:\n" + live)
    kept = run(["report", "-i", "h.dat", "--format", "hist"]).stdout
    check(kept == live, "report --format hist prints the recorded hist:\n%s\nvs\n%s" % (kept, live))
    computed = run(["report", "-i", "h.dat", "--format", "hist", "--hist",
                    "fp:add:keys=a:vals=b"]).stdout
    check(computed == live, "report --hist computes the same table from the records:\n%s\n"
          "vs\n%s" % (computed, live))
    filtered = run(["report", "-i", "h.dat", "--format", "hist", "--hist",
                    "fp:add:keys=b.hex:sort=b.descending if a > 0"]).stdout
    check("# trigger info: hist:keys=b.hex:vals=hitcount:sort=b.hex.descending:size=2048 if "
          "a > 0 [active]" in filtered and "Entries: 2\n" in filtered and
          0 <= filtered.find("{ b: fffffffffffffff6 }") < filtered.find("{ b: ffffffffffffffec }"),
          "a filter and a sort key:\n" + filtered)
    bad = run(["report", "-i", "h.dat", "--format", "hist", "--hist", "fp:add:keys=nosuch"],
              ok=False)
    check(bad.returncode != 0 and "Couldn't find field" in bad.stderr,
          "a bad --hist fails with the kernel's message: %r" % bad.stderr)
    nohist = run(["report", "-i", "h.dat", "--format", "hist", "--hist", "fp:nosuch:keys=a"],
                 ok=False)
    check(nohist.returncode != 0 and "no event fp/nosuch" in nohist.stderr,
          "--hist on an event the recording lacks: %r" % nohist.stderr)
elif CASE == "libc":
    # Every function of libc in a shell that forks subshells, command substitutions and
    # pipelines, and in a two-threaded program: same output and status as untraced, and
    # no process lost. (Found: a thread's first probe hit allocated its context through
    # probed libc functions and recursed; a fork child's first ring-buffer wait hung on a
    # static initialisation guard the parent held; a shell child's socket shutdown threw;
    # under load, a shell child exec'ing while its helper opened its session left a session
    # that never ended, and a thread that could not be created terminated the program.)
    script = ("s=0; for i in 1 2 3 4 5 6; do v=$(echo $i | tr 0-9 a-j); s=$((s+i)); "
              "( echo sub$i ) | cat; done; echo sum=$s $v; ls / > /dev/null; exit 3")
    for cmd in (["bash", "-c", script], [prog("graph")]):
        want = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        for attempt in range(2):
            p = record(["-o", "l.dat", "-F", "libc.so.6:*", "--"] + cmd, ok=False)
            check(p.returncode == want.returncode and p.stdout == want.stdout,
                  "%s under a libc-wide trace: status %d (want %d), stdout %r (want %r), "
                  "stderr %r" % (cmd[0], p.returncode, want.returncode, p.stdout, want.stdout,
                                 p.stderr[-2000:]))
            check("without flushing" not in p.stderr, "every process flushed: " + p.stderr)
    out = run(["report", "-i", "l.dat", "--no-header"]).stdout
    check(len(out.splitlines()) > 100, "libc functions recorded:\n" + out[:2000])
else:
    sys.exit("unknown case " + CASE)

if failures:
    print("%s/%s: %d check(s) failed (work dir %s)" % (CASE, FLAVOUR, len(failures), WORK))
    sys.exit(1)
import shutil
shutil.rmtree(WORK, ignore_errors=True)
print("%s/%s: ok" % (CASE, FLAVOUR))
