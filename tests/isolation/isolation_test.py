#!/usr/bin/env python3
"""What dprobe loads into a program neither binds to the program's symbols nor is bound by
them (Documentation/design.md, "What the preload brings into a program").

  isolation_test.py DPROBE PRELOAD OWN_SYMBOLS CASE

OWN_SYMBOLS (own_symbols.cpp) exports its own inflate, elf_begin and operator new/delete,
counts their calls, and prints which functions of dprobe's libraries its scope finds.

CASE:
  preload  the file: DT_NEEDED only the C library and the loader (libm allowed): nothing it
           brings can bind to it, so a detach can unload it;
           exactly the expected dynamic symbols exported; nothing imported but from those;
           no STB_GNU_UNIQUE symbol (it would pin the object)
  control  the counts see a libdw that is in the program's scope (LD_PRELOAD=libdw.so.1):
           its calls reach the program's elf_begin and inflate, dlsym finds dwarf_begin.
           What the other cases would see if dprobe's libraries were not kept apart.
  record   dprobe record with an fprobe whose arguments come from the (compressed) DWARF
           and a function graph: the program's output and counts are those of an untraced
           run, its scope finds nothing of dprobe's, the events are right; -F inflate traces
           the program's own inflate; a glob of dprobe's own functions only is refused, and
           says so
  attach   the same around attach -B ... detach, on a program that runs before, during and
           after: the same counts and output as untraced, the events of the rounds traced
"""
import os
import re
import subprocess
import sys
import tempfile

DPROBE, PRELOAD, PROG, CASE = sys.argv[1:5]
WORK = tempfile.mkdtemp(prefix="dprobe-isolation-")
ENV = dict(os.environ, XDG_RUNTIME_DIR=os.path.join(WORK, "run"),
           DPROBE_PROBES=os.path.join(WORK, "probes"))
os.makedirs(ENV["XDG_RUNTIME_DIR"], mode=0o700)
failures = []

FPROBE = "f:w work_step round total"  # argument names from the DWARF
GRAPH = "work_*"


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)
    return cond


def run(args, ok=True, env=None, **kw):
    p = subprocess.run([str(a) for a in args], cwd=WORK, env=env or ENV, capture_output=True,
                       text=True, timeout=120, **kw)
    if ok and p.returncode != 0:
        sys.exit("FAIL: %s exited %d\nstdout:\n%s\nstderr:\n%s" %
                 (" ".join(map(str, args)), p.returncode, p.stdout, p.stderr))
    return p


def dprobe(*args, ok=True):
    return run([DPROBE] + list(args), ok=ok)


def counts(out):
    """The last counts line of OUT as a dict."""
    lines = [l for l in out.splitlines() if l.startswith("counts ")]
    if not lines:
        return {}
    return dict(kv.split("=", 1) for kv in lines[-1].split()[1:])


def rounds(out):
    """[(round, total after it)] as the program printed them."""
    return [(int(r), int(t)) for r, t in re.findall(r"^round (\d+) total (-?\d+)$", out, re.M)]


def check_events(dat, want_rounds):
    """The fprobe's events: one per round, its arguments read through the DWARF names, and
    the graph of each round."""
    out = dprobe("report", "-i", dat, "--no-header").stdout
    got = [(int(r), int(t)) for r, t in
           re.findall(r" w: \(work_step\+0x0/0x[0-9a-f]+\) round=(-?\d+) total=(-?\d+)", out)]
    check(got == want_rounds, "fprobe events (round, total): %s, want %s\n%s" %
          (got, want_rounds, out[:2000]))
    graph = dprobe("report", "-i", dat, "--format", "graph", "--no-header").stdout
    check(graph.count("work_round(") == len(want_rounds) and
          graph.count("work_leaf();") == 8 * len(want_rounds),
          "graph: %d work_round, %d work_leaf (want %d, %d)\n%s" %
          (graph.count("work_round("), graph.count("work_leaf();"), len(want_rounds),
           8 * len(want_rounds), graph[:2000]))


def case_preload():
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[(.*)\]",
                        run(["readelf", "-d", PRELOAD]).stdout)
    allowed = {"libc.so.6", "ld-linux-x86-64.so.2", "libm.so.6"}
    check(needed and set(needed) <= allowed,
          "DT_NEEDED: %s (allowed: %s)" % (needed, sorted(allowed)))
    syms = run(["readelf", "-W", "--dyn-syms", PRELOAD]).stdout
    defined, imported, unique = set(), [], []
    for line in syms.splitlines():
        f = line.split()
        if len(f) < 8 or not f[0].rstrip(":").isdigit() or f[0] == "0:":
            continue
        kind, bind, ndx, name = f[3], f[4], f[6], f[7]
        if bind == "UNIQUE":
            unique.append(name)
        if ndx == "UND":
            imported.append((name, bind))
        elif kind != "OBJECT" or ndx != "ABS":  # not a version node's symbol
            defined.add(name)
    check(not unique, "STB_GNU_UNIQUE symbols (dlclose could not unload): %s" % unique)
    want = {
        # interposers
        "execve", "execv", "execvp", "execvpe", "execl", "execlp", "execle", "fexecve",
        "_exit", "_Exit", "posix_spawn", "posix_spawnp", "sigaction", "signal",
        "sigprocmask", "pthread_sigmask", "swapcontext", "setcontext", "close",
        "close_range", "closefrom", "_Unwind_RaiseException@GCC_3.0",
        "_Unwind_ForcedUnwind@GCC_3.0", "_Unwind_Backtrace@GCC_3.3",
        "__cxa_begin_catch@CXXABI_1.3", "backtrace", "__fentry__",
        "__start_dprobe_noprobe_text", "__stop_dprobe_noprobe_text",
        # the C API
        "register_fprobe", "register_fprobe_ips", "register_fprobe_syms", "unregister_fprobe",
        "fprobe_count_ips_from_filter", "register_kprobe", "register_kprobes",
        "unregister_kprobe", "unregister_kprobes", "register_kretprobe",
        "register_kretprobes", "unregister_kretprobe", "unregister_kretprobes",
        "enable_kprobe", "disable_kprobe", "get_kprobe", "get_kretprobe",
        "get_kretprobe_retaddr", "kprobe_busy_begin", "kprobe_busy_end",
        "kprobe_on_func_entry", "kprobe_running", "kprobes_enabled", "kprobes_optimization",
        "kprobes_set_enabled", "kprobes_set_optimization", "dump_kprobe",
        "within_kprobe_blacklist", "regs_query_register_name", "regs_query_register_offset",
        "register_jprobe", "register_jprobes", "unregister_jprobe", "unregister_jprobes",
        "jprobe_return",
    }
    extra = {n for n in defined - want if not n.startswith("dprobe_")}
    check(not extra, "exported beyond the interposers and the C API: %s" % sorted(extra))
    check(not (want - defined), "not exported: %s" % sorted(want - defined))
    # Every import comes from the C library or the loader (their versions), but
    # for the weak hooks every C++ object carries (gprof's, libitm's transactional clones).
    hooks = re.compile(r"^(__gmon_start__|_ITM_\w+|_ZGTt\w+)$")
    stray = [n for n, b in imported
             if not re.search(r"@GLIBC_[0-9.]+$", n) and not (b == "WEAK" and hooks.match(n))]
    check(not stray, "imported from the program's scope: %s" % stray)
    for lib in ("libdw", "libelf", "libZydis", "libfuse", "libstdc++", "libgcc_s", "libz.",
                "liblzma", "libbz2", "libtraceevent"):
        check(not any(lib in n for n in needed), "%s needed" % lib)


def case_control():
    p = run([PROG, "dwarf"], env=dict(ENV, LD_PRELOAD="libdw.so.1"))
    c = counts(p.stdout)
    check("dwarf: read" in p.stdout, "the program read its DWARF with libdw: %r" % p.stdout)
    check(int(c.get("elf_begin", 0)) > 0 and int(c.get("inflate", 0)) > 0,
          "libdw in the program's scope calls its elf_begin and inflate: %r" % c)
    check("dwarf_begin" in c.get("visible", ""), "dlsym finds libdw's dwarf_begin: %r" % c)
    # And without: nothing in scope.
    p = run([PROG, "dwarf"], ok=False)
    check(p.stdout.startswith("dwarf: no libdw in scope") and counts(p.stdout).get("visible") == "-",
          "no libdw in the program's scope of its own: %r" % p.stdout)


def case_record():
    want = run([PROG, "3"]).stdout
    wc = counts(want)
    check(wc.get("visible") == "-" and int(wc["new"]) > 0 and int(wc["inflate"]) == 3 and
          int(wc["elf_begin"]) == 3, "untraced counts: %r" % wc)
    dat = os.path.join(WORK, "r.dat")
    p = dprobe("record", "-o", dat, "-e", FPROBE, "-F", GRAPH, "--", PROG, "3")
    check(p.stdout == want, "recorded output and counts\n%s\nwant\n%s" % (p.stdout, want))
    check(counts(p.stdout).get("visible") == "-",
          "dprobe's libraries are in the program's scope: %r" % counts(p.stdout))
    r = rounds(want)
    check_events(dat, [(n, r[n - 1][1] if n else 0) for n, _ in r])
    # A glob naming inflate matches the program's own, traced as any function of it.
    dat = os.path.join(WORK, "i.dat")
    p = dprobe("record", "-o", dat, "-F", "inflate", "--", PROG, "3")
    check(p.stdout == want, "-F inflate: output\n%s" % p.stdout)
    check("left out" not in p.stderr and "dprobe itself" not in p.stderr,
          "-F inflate: %r" % p.stderr)
    graph = dprobe("report", "-i", dat, "--format", "graph", "--no-header").stdout
    check(graph.count("inflate();") == 3, "3 calls of the program's inflate:\n" + graph)
    # A glob of dprobe's own functions only: refused, saying so.
    p = dprobe("record", "-o", dat, "-F", "libdprobe-preload.so:*", "--", PROG, "1", ok=False)
    check(p.returncode != 0 and "-F 'libdprobe-preload.so:*' matches only dprobe's own "
          "functions" in p.stderr, "a glob of dprobe's own functions: %r" % p.stderr)


def case_attach():
    script = ["work 2", "counts", "ATTACH", "work 3", "counts", "DETACH", "work 2", "counts",
              "quit"]
    # The same commands untraced.
    want = run([PROG, "wait"],
               input="".join(l + "\n" for l in script if l not in ("ATTACH", "DETACH"))).stdout
    want = want.split("\n", 1)[1]  # the ready line
    dat = os.path.join(WORK, "a.dat")
    t = subprocess.Popen([PROG, "wait"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True, cwd=WORK, env=ENV)
    out = ""
    try:
        m = re.match(r"ready (\d+)", t.stdout.readline())
        if not m:
            sys.exit("FAIL: own_symbols did not start")
        pid = m.group(1)
        for cmd in script:
            if cmd == "ATTACH":
                dprobe("attach", "-B", "-q", "-p", pid, "-e", FPROBE, "-F", GRAPH, "-o", dat)
                continue
            if cmd == "DETACH":
                dprobe("detach", "-p", pid)
                continue
            t.stdin.write(cmd + "\n")
            t.stdin.flush()
            if cmd == "quit":
                break
            # Wait for the answer, so that attach and detach come between the commands.
            n = int(cmd.split()[1]) if cmd.startswith("work") else 1
            for _ in range(n):
                out += t.stdout.readline()
        out += t.stdout.read()
        check(t.wait(timeout=60) == 0, "own_symbols exit status %s" % t.returncode)
    finally:
        if t.poll() is None:
            t.kill()
            t.wait()
    check(out == want, "output and counts with attach/detach\n%s\nwant\n%s" % (out, want))
    lines = [l for l in out.splitlines() if l.startswith("counts ")]
    check(len(lines) == 3 and all(counts(l).get("visible") == "-" for l in lines),
          "dprobe's libraries in the program's scope, before, while or after attached: %s" %
          lines)
    r = rounds(out)
    check_events(dat, [(n, r[n - 1][1]) for n in (2, 3, 4)])


{"preload": case_preload, "control": case_control, "record": case_record,
 "attach": case_attach}[CASE]()
if failures:
    sys.exit("%d failure(s)" % len(failures))
print("ok")
