#!/usr/bin/env python3
"""Tests of `dprobe attach` and `dprobe detach` on a running multi-threaded program
(attach_target.c): the events recorded while attached are right, and the program finishes
with its normal output and exit status, as if nothing had happened.

  attach_test.py DPROBE TARGET EXIT_AUDIT_LIB CASE

CASE:
  basic       attach -B with an fprobe, a kprobe with arguments and a function graph; the
              events while attached (file and tracefs); detach; the program carries on
  foreground  attach in the foreground, Ctrl-C detaches
  busy        no thread in a system call: the runtime is loaded by a running thread
  sleepers    every thread in nanosleep: loaded by one, whose sleep must not end early
  twice       attach twice (refused), detach twice (refused), attach again after detach;
              a process `dprobe record` runs (refused)
  cycles      sessions one after another, each using the tracefs as a user would: after
              each detach the process is as it was (code, descriptors, memory, mappings),
              and each session starts from the boot state
  killed      the process killed after attach -B (no mount or socket left), the foreground
              attach killed (the session ended and the runtime unloaded all the same),
              dprobe record killed and then its program (no mount or socket left)
  noperm      another user's process (attached by root without CAP_SYS_PTRACE, and by a
              third user), a non-dumpable one: refused, with the reason
  exits       the process exits while the runtime is being loaded
  errors      no such process, kernel thread, bad event (process untouched), not attached
  notx86      a 32-bit x86 program (a tiny i386 ELF made here): refused, naming its machine
              (exit 77, skipped, where the kernel cannot run i386 programs)
  forks       children forked during a session: their sessions end with the detach of the
              process, which leaves them too as they were
  midcall     attach and detach killed at random moments while they hold a thread inside a
              call, with the thread parked in read, in nanosleep and running: the program
              carries on unharmed, and a detach afterwards leaves it as it was
  lifecycle   sessions of attach, random steps in the tracefs tree and detach, with the
              invariants checked after each step (attach_lifecycle.py)
  noloss      a busy program with tiny buffers, a SIGALRM handler and forks traced: by
              default nothing is lost (a full buffer waits for the agent's streamer), detach
              ends at once and the program and its children are unharmed; --no-wait drops
"""
import os
import errno
import random
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

DPROBE, TARGET, AUDIT, CASE = sys.argv[1:5]
WORK = tempfile.mkdtemp(prefix="dprobe-attach-")
os.chmod(WORK, 0o777)  # the noperm case runs commands as another user here
ENV = dict(os.environ, DPROBE_PROBES=os.path.join(WORK, "probes"),
           XDG_RUNTIME_DIR=os.path.join(WORK, "run"))
os.makedirs(ENV["XDG_RUNTIME_DIR"], mode=0o700)
# The targets serve their tracefs under the work directory too, away from the mounts and
# sockets of other processes (a process killed elsewhere leaves its mount behind).
TARGET_ENV = dict(os.environ, XDG_RUNTIME_DIR=ENV["XDG_RUNTIME_DIR"])
failures = []

FPROBE = "f:fibe fib n=$arg1:s32"
KPROBE = "p:take take_string s=+0(%di):string n=%si:s32"
LIBC_FPROBE = "f:wr libc.so.6:write fd=$arg1:s32"
LIBC_FPROBE_LISTED = "f:fprobes/wr libc.so.6:write fd=$arg1:s32"
EXPECTED = ("reader got: finish\nsleep anomalies: 0\n"
            "worker: 0 fib mismatches, 0 string mismatches, ran\n")
EXPECTED_QUIET = "sleep anomalies: 0\nworker: 0 fib mismatches, 0 string mismatches, ran\n"
NOBODY = 65534


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)
    return cond


def dprobe(*args, ok=True, prefix=(), timeout=60):
    p = subprocess.run(list(prefix) + [DPROBE] + [str(a) for a in args], cwd=WORK, env=ENV,
                       capture_output=True, text=True, timeout=timeout)
    if ok and p.returncode != 0:
        sys.exit("FAIL: dprobe %s exited %d\nstdout:\n%s\nstderr:\n%s" %
                 (" ".join(map(str, args)), p.returncode, p.stdout, p.stderr))
    return p


class Target:
    """attach_target running with its stdin and stdout on pipes."""

    def __init__(self, mode=None, prefix=(), env=None):
        cmd = list(prefix) + [TARGET] + ([mode] if mode else [])
        self.p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  text=True, cwd=WORK, env=env or TARGET_ENV)
        line = self.p.stdout.readline()
        m = re.match(r"ready (\d+)", line)
        if not m:
            sys.exit("FAIL: the target did not start: %r" % line)
        self.pid = int(m.group(1))

    def finish(self, how="stdin"):
        if how == "stdin":
            self.p.stdin.write("finish\n")
            self.p.stdin.flush()
        else:
            os.kill(self.pid, signal.SIGUSR1)
        out = self.p.stdout.read()
        return out, self.p.wait(timeout=60)

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()


def report(dat):
    p = dprobe("report", "-i", dat, "--no-header", ok=False)
    return p.stdout, p.stderr


def wait_for(dat, patterns, timeout=20):
    """Waits until the (growing) trace file shows a line matching each pattern."""
    end = time.time() + timeout
    while time.time() < end:
        out, _ = report(dat)
        if all(re.search(p, out, re.M) for p in patterns):
            return out
        time.sleep(0.05)
    out, _ = report(dat)
    check(False, "events %s not seen in %s within %d s; report:\n%s" %
          (patterns, dat, timeout, out[-2000:]))
    return out


def task_comms(pid):
    out = []
    for t in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/comm" % (pid, t)) as f:
                out.append(f.read().strip())
        except OSError:
            pass
    return out


def mounted(path):
    with open("/proc/self/mountinfo") as f:
        return any(line.split()[4] == path for line in f)


def check_events(out, fib=True):
    """The events are right: fib's argument, take_string's string and its length."""
    fibs = [int(n) for n in re.findall(r"fibe: \(fib\+0x0/0x[0-9a-f]+\) n=(-?\d+)", out)]
    takes = re.findall(r'take: \(take_string\+0x0/0x[0-9a-f]+\) s="([^"]*)" n=(-?\d+)', out)
    if fib:
        check(fibs and all(0 <= n <= 12 for n in fibs), "fib arguments: %s" % fibs[:20])
    check(takes and all((s, int(n)) in {("alpha", 0), ("be", 1), ("gamma", 2)}
                        for s, n in takes), "take_string arguments: %s" % takes[:10])


# What a detach may leave of the process's memory: glibc's allocator and stack caches move by
# a few pages, and the static TLS the runtime took is not given back (see
# Documentation/cli.md, "What detach leaves"). A loaded runtime is megabytes.
RSS_BOUND_KB = 512


class Snapshot:
    """What a process is, for 'the process is the one it was': its descriptors (by what they
    point to), its resident memory, and whether each file-backed executable mapping is byte
    for byte its file."""

    def __init__(self, pid):
        self.pid = pid
        self.fds = {}
        for fd in os.listdir("/proc/%d/fd" % pid):
            try:
                st = os.stat("/proc/%d/fd/%s" % (pid, fd))
                self.fds[int(fd)] = (st.st_dev, st.st_ino)
            except OSError:
                pass
        # Memory the process owns (anonymous), and file pages mapped: reading
        # its code below (through /proc/PID/mem) maps those pages, so the file part is
        # also taken after that, as the reference for the next look.
        self.rss_own_kb, self.rss_file_kb = self.rss()
        self.maps = []
        with open("/proc/%d/maps" % pid) as f:
            for line in f:
                parts = line.split(None, 5)
                path = parts[5].strip() if len(parts) == 6 else ""
                self.maps.append((parts[0], parts[1], int(parts[2], 16), path))
        self.text_diffs = []
        with open("/proc/%d/mem" % pid, "rb") as mem:
            for rng, perms, off, path in self.maps:
                if "x" not in perms or not path.startswith("/") or path.endswith("(deleted)"):
                    continue
                lo, hi = (int(x, 16) for x in rng.split("-"))
                try:
                    with open(path, "rb") as f:
                        f.seek(off)
                        want = f.read(hi - lo)
                    mem.seek(lo)
                    got = mem.read(len(want))
                except OSError:
                    continue
                if got != want:
                    at = next(i for i, (a, b) in enumerate(zip(got, want)) if a != b)
                    n = sum(1 for a, b in zip(got, want) if a != b)
                    self.text_diffs.append("%s: %d bytes differ from the file, the first at "
                                           "%#x" % (path, n, lo + at))

        self.rss_file_after_kb = self.rss()[1]

    def rss(self):
        # smaps_rollup, not status: the kernel's RSS counters in status are per-CPU
        # approximations (Linux 6.2 on), which can lag by a megabyte right after a detach.
        with open("/proc/%d/smaps_rollup" % self.pid) as f:
            st = f.read()
        kb = {k: int(v) for k, v in re.findall(r"^(\w+):\s+(\d+) kB", st, re.M)}
        return kb.get("Anonymous", 0), kb.get("Rss", 0) - kb.get("Anonymous", 0)

    def dprobe_mappings(self):
        return [m for m in self.maps if "libdprobe-preload" in m[3] or "memfd:dprobe" in m[3]]


def check_untouched(pid, before, what):
    """The process is as BEFORE (a Snapshot taken before the first attach)."""
    now = Snapshot(pid)
    check(not now.text_diffs, "%s: code left changed: %s" % (what, now.text_diffs))
    check(now.fds == before.fds, "%s: descriptors %s, before the attach %s" %
          (what, sorted(now.fds), sorted(before.fds)))
    check(not now.dprobe_mappings(), "%s: dprobe still mapped: %s" %
          (what, now.dprobe_mappings()[:4]))
    check(now.rss_own_kb <= before.rss_own_kb + RSS_BOUND_KB,
          "%s: anonymous RSS %d KB, %d KB before the attach"
          % (what, now.rss_own_kb, before.rss_own_kb))
    check(now.rss_file_kb <= before.rss_file_after_kb + RSS_BOUND_KB,
          "%s: file pages mapped %d KB, %d KB before the attach" %
          (what, now.rss_file_kb, before.rss_file_after_kb))


def check_detached(t, mount, before=None, what="detach"):
    """After detach: no agent thread, no mount, no tracefs socket answering; with BEFORE, the
    process as it was before the attach."""
    comms = task_comms(t.pid)
    check(not any(c.startswith("dprobe-") for c in comms),
          "agent threads left after detach: %s" % comms)
    check(not mount or not mounted(mount), "tracefs still mounted at %s" % mount)
    p = dprobe("ctl", "-p", t.pid, "cat", "dynamic_events", ok=False)
    check(p.returncode != 0, "the tracefs socket still answers after detach")
    sock = os.path.join(ENV["XDG_RUNTIME_DIR"], "dprobe", "dprobe-%d.sock" % t.pid)
    check(not os.path.exists(sock), "the tracefs socket file is left: %s" % sock)
    if before:
        check_untouched(t.pid, before, what)


def mountpoint(text):
    """The tracefs mount point attach reported ("" when it had none)."""
    m = re.search(r"^  tracefs: (\S+)$", text, re.M)
    return m.group(1) if m else ""


def case_basic():
    t = Target()
    dat = os.path.join(WORK, "basic.dat")
    try:
        before = Snapshot(t.pid)
        p = dprobe("attach", "-B", "-v", "-p", t.pid, "-e", FPROBE, "-e", KPROBE,
                   "-F", "take_string", "-o", dat)
        check("recording 2 events and the function graph of 1 function into" in p.stdout,
              "attach message: %r" % p.stdout)
        mount = mountpoint(p.stdout)
        check(not mount or mounted(mount), "tracefs not mounted at %r" % mount)
        check(re.search(r"loaded .*libdprobe-preload\.so with thread \d+ \(blocked in ", p.stderr),
              "attach -v message: %r" % p.stderr)
        out = wait_for(dat, [r"fibe: ", r"take: ", r"funcgraph_entry: --> take_string",
                             r"funcgraph_exit: <-- take_string"])
        check_events(out)
        # The tracefs of the process, as under record.
        p = dprobe("ctl", "-p", t.pid, "cat", "dynamic_events")
        check(p.stdout == "f:fprobes/fibe fib n=$arg1:s32\n"
                          "p:kprobes/take take_string s=+0(%di):string n=%si:s32\n",
              "dynamic_events: %r" % p.stdout)
        p = dprobe("ctl", "-p", t.pid, "cat", "enabled_functions")
        kl = dprobe("ctl", "-p", t.pid, "cat", "kprobes/list").stdout
        # take_string's graph: on its site (the kprobe rides on it), or, in the plain build,
        # where the kprobe created first holds the entry a jump site would replace, through
        # an int3 entry beside the kprobe: never both a jump site and an optimized kprobe
        # patching the same entry.
        on_site = re.search(r"^take_string \(\d\)", p.stdout, re.M)
        on_int3 = re.search(r"^[0-9a-f]+  r  take_string\+0x0", kl, re.M)
        check(re.search(r"^fib \(1\)", p.stdout, re.M) and (on_site or on_int3),
              "enabled_functions: %r, kprobes/list: %r" % (p.stdout, kl))
        check(not (on_site and re.search(r"take_string\+0x0 .*\[OPTIMIZED\]", kl)),
              "a jump site and an optimized kprobe on one entry: %r, %r" % (p.stdout, kl))
        check(any(c.startswith("dprobe-") for c in task_comms(t.pid)), "no agent thread")
        p = dprobe("detach", "-p", t.pid)
        m = re.search(r"process %d \(attach_target\) detached: (\d+) events \(\d+ lost\), "
                      r"[0-9.]+ MB written to (.*)" % t.pid, p.stdout)
        check(m and int(m.group(1)) > 0 and m.group(2) == dat, "detach message: %r" % p.stdout)
        check_detached(t, mount, before)
        size = os.path.getsize(dat)
        time.sleep(0.1)
        check(os.path.getsize(dat) == size, "the trace file grows after detach")
        out, err = report(dat)
        check_events(out)
        check("warning" not in err, "report warns: %r" % err)
        out, rc = t.finish()
        check(out == EXPECTED, "program output after detach: %r" % out)
        check(rc == 7, "program exit status %d" % rc)
    finally:
        t.kill()


def children(pid):
    out = []
    for t in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/children" % (pid, t)) as f:
                out += [int(c) for c in f.read().split()]
        except OSError:
            pass
    return sorted(out)


def case_forks():
    """Children forked during a session run sessions of their own (in the same file); the
    detach of the process ends theirs and takes the runtime out of them too: each child is
    then, like its parent, byte for byte its files, without a thread or mapping of dprobe."""
    t = Target("forks")
    dat = os.path.join(WORK, "forks.dat")
    kids = []
    try:
        before = Snapshot(t.pid)
        p = dprobe("attach", "-B", "-p", t.pid, "-e", FPROBE, "-e", KPROBE, "-F", "take_string",
                   "-o", dat)
        mount = mountpoint(p.stdout)
        for _ in range(2):
            os.kill(t.pid, signal.SIGUSR2)
            time.sleep(0.2)
        end = time.time() + 10
        while len(kids) < 2 and time.time() < end:
            kids = children(t.pid)
            time.sleep(0.05)
        check(len(kids) == 2, "children of the target: %s" % kids)
        # Each child records into the session's file, under its own pid.
        out = wait_for(dat, [r"attach_target-%d .* (take|fibe): " % k for k in kids])
        check_events(out)
        for k in kids:
            check(any(c.startswith("dprobe-") for c in task_comms(k)),
                  "no agent thread in the child %d: %s" % (k, task_comms(k)))
        p = dprobe("detach", "-p", t.pid)
        for k in kids:
            check(re.search(r"process %d \(attach_target\), forked during the session, detached: "
                            r"[1-9]\d* events" % k, p.stdout), "detach message for the child "
                            "%d: %r" % (k, p.stdout))
        check_detached(t, mount, before)
        for k in kids:
            now = Snapshot(k)
            check(not now.text_diffs, "child %d: code left changed: %s" % (k, now.text_diffs))
            check(not now.dprobe_mappings(), "child %d: dprobe still mapped: %s" %
                  (k, now.dprobe_mappings()[:4]))
            check(not any(c.startswith("dprobe-") for c in task_comms(k)),
                  "child %d: agent threads left: %s" % (k, task_comms(k)))
        size = os.path.getsize(dat)
        time.sleep(0.1)
        check(os.path.getsize(dat) == size, "the trace file grows after detach")
        for k in kids:
            os.kill(k, signal.SIGTERM)
        end = time.time() + 10
        for k in kids:
            path = os.path.join(WORK, "fork-%d.out" % k)
            while not os.path.exists(path) and time.time() < end:
                time.sleep(0.05)
            time.sleep(0.05)
            got = open(path).read() if os.path.exists(path) else None
            check(got == "child: 0 fib mismatches, 0 string mismatches, ran\n",
                  "child %d's report: %r" % (k, got))
        _, err = report(dat)
        check("warning" not in err, "report warns: %r" % err)
        out, rc = t.finish()
        check(out == EXPECTED, "program output after detach: %r" % out)
        check(rc == 7, "program exit status %d" % rc)
    finally:
        for k in kids:
            try:
                os.kill(k, signal.SIGKILL)
            except OSError:
                pass
        t.kill()


def case_foreground():
    t = Target()
    dat = os.path.join(WORK, "fg.dat")
    try:
        before = Snapshot(t.pid)
        a = subprocess.Popen([DPROBE, "attach", "-p", str(t.pid), "-e", FPROBE, "-e", KPROBE,
                              "-o", dat], cwd=WORK, env=ENV, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        line = a.stderr.readline()
        while line.startswith("dprobe: still waiting"):  # a slow machine
            line = a.stderr.readline()
        check("recording 2 events into %s; Ctrl-C to detach" % dat in line,
              "attach message: %r" % line)
        line = a.stderr.readline()
        mount = mountpoint(line)
        check_events(wait_for(dat, [r"fibe: ", r"take: "]))
        a.send_signal(signal.SIGINT)
        rest = a.stderr.read()
        rc = a.wait(timeout=60)
        check(rc == 0, "attach exited %d after Ctrl-C: %s" % (rc, rest))
        check(re.search(r"\[ dprobe attach: \d+ events \(\d+ lost\) from \d+ threads? in 1 "
                        r"process, [0-9.]+ MB written to ", rest), "summary: %r" % rest)
        check_detached(t, mount, before, "Ctrl-C")
        out, rc = t.finish()
        check(out == EXPECTED, "program output after detach: %r" % out)
        check(rc == 7, "program exit status %d" % rc)
    finally:
        t.kill()


def case_busy():
    t = Target("busy")
    dat = os.path.join(WORK, "busy.dat")
    try:
        before = Snapshot(t.pid)
        p = dprobe("attach", "-B", "-v", "-p", t.pid, "-e", KPROBE, "-F", "take_string",
                   "-o", dat)
        check(re.search(r"with thread \d+ \(running", p.stderr), "attach -v: %r" % p.stderr)
        out = wait_for(dat, [r"take: ", r"funcgraph_entry: --> take_string"])
        check_events(out, fib=False)
        dprobe("detach", "-p", t.pid)
        check_detached(t, mountpoint(p.stdout), before)
        out, rc = t.finish("usr1")
        check(out == "sleep anomalies: 0\nworker: 0 fib mismatches, 0 string mismatches, ran\n",
              "program output after detach: %r" % out)
        check(rc == 7, "program exit status %d" % rc)
    finally:
        t.kill()


def case_sleepers():
    t = Target("sleepers")
    dat = os.path.join(WORK, "sleepers.dat")
    try:
        before = Snapshot(t.pid)
        # Several sessions: each one borrows a sleeping thread and puts it back.
        for i in range(3):
            p = dprobe("attach", "-B", "-v", "-p", t.pid, "-e", FPROBE, "-e", KPROBE,
                       "-o", dat)
            check(re.search(r"with thread \d+ \(blocked in (clock_nanosleep|nanosleep|"
                            r"restart_syscall)\)", p.stderr), "attach -v: %r" % p.stderr)
            check_events(wait_for(dat, [r"fibe: ", r"take: "]))
            mount = mountpoint(p.stdout)
            dprobe("detach", "-p", t.pid)
            check_detached(t, mount, before, "detach %d" % (i + 1))
        out, rc = t.finish("usr1")
        check(out == EXPECTED_QUIET, "program output after detach: %r" % out)
        check(rc == 7, "program exit status %d" % rc)
    finally:
        t.kill()


def case_twice():
    t = Target()
    dat = os.path.join(WORK, "twice.dat")
    try:
        # The libc event reads an argument: the runtime then maps libc.so.6 whole to read it,
        # a second mapping of the file at offset 0, which the second attach must not take for
        # the loaded libc (it called mmap in it, and the process died of SIGSEGV).
        dprobe("attach", "-B", "-p", t.pid, "-e", FPROBE, "-e", LIBC_FPROBE, "-o", dat)
        p = dprobe("attach", "-B", "-p", t.pid, "-e", KPROBE, "-o", dat + "2", ok=False)
        check(p.returncode == 1 and "process %d (attach_target) is already attached" % t.pid
              in p.stderr and "'dprobe detach -p %d'" % t.pid in p.stderr,
              "second attach: %d %r" % (p.returncode, p.stderr))
        p = dprobe("ctl", "-p", t.pid, "cat", "dynamic_events")
        check(p.stdout == "f:fprobes/fibe fib n=$arg1:s32\n" + LIBC_FPROBE_LISTED + "\n",
              "the refused attach changed the session: %r" % p.stdout)
        wait_for(dat, [r"fibe: "])
        dprobe("detach", "-p", t.pid)
        p = dprobe("detach", "-p", t.pid, ok=False)
        check(p.returncode == 1 and "is not attached" in p.stderr,
              "second detach: %d %r" % (p.returncode, p.stderr))
        # Again: the runtime left idle serves a new session.
        dat2 = os.path.join(WORK, "again.dat")
        p = dprobe("attach", "-B", "-p", t.pid, "-e", KPROBE, "-o", dat2)
        out = wait_for(dat2, [r"take: "])
        check_events(out, fib=False)
        check("fibe:" not in out, "the first session's event came back")
        dprobe("detach", "-p", t.pid)
        check_detached(t, mountpoint(p.stdout))
        out, rc = t.finish()
        check(out == EXPECTED, "program output after detach: %r" % out)
        check(rc == 7, "program exit status %d" % rc)
    finally:
        t.kill()
    # A process that `dprobe record` started has its session already.
    t = Target(prefix=[DPROBE, "record", "-q", "-o", os.path.join(WORK, "rec.dat"), "-e",
                       KPROBE, "--"])
    try:
        p = dprobe("attach", "-B", "-p", t.pid, "-e", FPROBE, "-o", dat, ok=False)
        check(p.returncode == 1 and "is being recorded by 'dprobe record' already" in p.stderr,
              "attach to a recorded process: %d %r" % (p.returncode, p.stderr))
        p = dprobe("detach", "-p", t.pid, ok=False)
        check(p.returncode == 1 and "is being recorded by 'dprobe record'" in p.stderr,
              "detach of a recorded process: %d %r" % (p.returncode, p.stderr))
        out, rc = t.finish()
        check(out == EXPECTED and rc == 7, "recorded program: %r %d" % (out, rc))
        check_events(report(os.path.join(WORK, "rec.dat"))[0], fib=False)
    finally:
        t.kill()


def ctl(pid, *args, ok=True):
    return dprobe("ctl", "-p", pid, *args, ok=ok)


# Files whose content a new session must find as the first session found it (the kernel's
# boot state), whatever the sessions before it wrote.
BOOT_FILES = ["current_tracer", "set_ftrace_filter", "set_ftrace_notrace", "set_graph_function",
              "set_graph_notrace", "max_graph_depth", "trace_options", "tracing_on",
              "buffer_size_kb", "trace_clock", "set_event", "set_event_pid", "set_ftrace_pid",
              "tracing_thresh", "function_profile_enabled", "stack_tracer_enabled"]


def boot_state(pid):
    state = {f: ctl(pid, "cat", f, ok=False).stdout for f in BOOT_FILES}
    state["instances/"] = ctl(pid, "ls", "instances", ok=False).stdout
    return state


def case_cycles():
    """Sessions one after the other, each using the tree as a user would (a trigger on a
    function, tracers, options, an instance, an event added and a marker written): after
    each detach the process is as before the first attach, and each new session starts
    from the state the first one found (#30: the next session inherited the last one)."""
    t = Target()
    try:
        before = Snapshot(t.pid)
        boot = None
        tracers = ["function", "function_graph", "function"]
        for i in range(len(tracers)):
            dat = os.path.join(WORK, "cycle%d.dat" % i)
            p = dprobe("attach", "-B", "-p", t.pid, "-e", FPROBE, "-o", dat)
            mount = mountpoint(p.stdout)
            state = boot_state(t.pid)
            if boot is None:
                boot = state
            for f in sorted(boot):
                check(state[f] == boot[f], "session %d starts with %s = %r, the first with %r"
                      % (i, f, state[f], boot[f]))
            check(ctl(t.pid, "cat", "dynamic_events").stdout == "f:fprobes/fibe fib n=$arg1:s32\n",
                  "session %d starts with other events" % i)
            trace = ctl(t.pid, "cat", "trace").stdout
            check("extra%d:" % (i - 1) not in trace and "marker %d" % (i - 1) not in trace,
                  "session %d's trace starts with the last one's records" % i)
            # The afternoon in the tree.
            ctl(t.pid, "write", "-a", "set_ftrace_filter", "fib:enable_event:fprobes:fibe")
            ctl(t.pid, "write", "-a", "dynamic_events",
                "p:kprobes/extra%d take_string n=%%si:s32" % i)
            ctl(t.pid, "write", "events/kprobes/extra%d/enable" % i, "1")
            ctl(t.pid, "write", "-a", "set_ftrace_filter", "fib:traceoff:5")
            ctl(t.pid, "write", "set_graph_notrace", "spin_step")
            ctl(t.pid, "write", "max_graph_depth", "3")
            ctl(t.pid, "write", "options/func_stack_trace", "1")
            ctl(t.pid, "write", "current_tracer", tracers[i])
            ctl(t.pid, "write", "trace_marker", "marker %d" % i, ok=False)
            if mount:
                os.mkdir(os.path.join(mount, "instances", "inst%d" % i))
                ctl(t.pid, "write", "instances/inst%d/current_tracer" % i, "function")
            time.sleep(0.2)
            p = dprobe("detach", "-p", t.pid, ok=False)
            check(p.returncode == 0, "detach %d: %d %r" % (i, p.returncode, p.stderr))
            check_detached(t, mount, before, "detach %d" % i)
        out, rc = t.finish()
        check(out == EXPECTED, "program output after the sessions: %r" % out)
        check(rc == 7, "program exit status %d" % rc)
    finally:
        t.kill()


def wait_until(cond, timeout=10.0):
    end = time.time() + timeout
    while time.time() < end:
        if cond():
            return True
        time.sleep(0.05)
    return cond()


def case_killed():
    """Nothing is left behind when the process or the command is killed: the process's
    tracefs mount and socket after a SIGKILL of an attach -B'd process; the whole session
    (the runtime unloaded, the process as it was) after a SIGKILL of a foreground attach."""
    t = Target()
    try:
        p = dprobe("attach", "-B", "-p", t.pid, "-e", FPROBE, "-o", "killed.dat")
        mount = mountpoint(p.stdout)
        sock = os.path.join(ENV["XDG_RUNTIME_DIR"], "dprobe", "dprobe-%d.sock" % t.pid)
        check(os.path.exists(sock), "no tracefs socket at %s" % sock)
        os.kill(t.pid, signal.SIGKILL)
        t.p.wait()
        check(wait_until(lambda: not (mount and mounted(mount)) and not os.path.exists(sock)),
              "after SIGKILL of the process: mounted %s, socket %s" %
              (mount and mounted(mount), os.path.exists(sock)))
        check(not mount or not os.path.exists(mount), "the mount point is left: %s" % mount)
    finally:
        t.kill()
    # dprobe record killed, then its program: the mount and socket go with the program.
    t = Target(prefix=[DPROBE, "record", "-q", "-o", os.path.join(WORK, "killed_rec.dat"),
                       "-e", FPROBE, "--"])
    try:
        mount = os.path.join(ENV["XDG_RUNTIME_DIR"], "dprobe", str(t.pid))
        sock = os.path.join(ENV["XDG_RUNTIME_DIR"], "dprobe", "dprobe-%d.sock" % t.pid)
        check(wait_until(lambda: mounted(mount) and os.path.exists(sock)),
              "record's program serves no tracefs at %s" % mount)
        os.kill(t.p.pid, signal.SIGKILL)  # the record command
        t.p.wait()
        os.kill(t.pid, signal.SIGKILL)
        check(wait_until(lambda: not mounted(mount) and not os.path.exists(sock)
                         and not os.path.exists(mount)),
              "after SIGKILL of record and its program: mounted %s, socket %s" %
              (mounted(mount), os.path.exists(sock)))
    finally:
        try:
            os.kill(t.pid, signal.SIGKILL)
        except OSError:
            pass
        t.kill()
    t = Target()
    try:
        before = Snapshot(t.pid)
        dat = os.path.join(WORK, "killed_fg.dat")
        a = subprocess.Popen([DPROBE, "attach", "-q", "-p", str(t.pid), "-e", FPROBE, "-F",
                              "take_string", "-o", dat], cwd=WORK, env=ENV,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(dat, [r"fibe: ", r"funcgraph_entry: --> take_string"])
        a.kill()
        a.wait()

        def gone():
            now = Snapshot(t.pid)
            return not now.dprobe_mappings() and not any(
                c.startswith("dprobe-") for c in task_comms(t.pid))
        check(wait_until(gone, 20), "the runtime is still in the process 20 s after the "
              "foreground attach was killed")
        check_detached(t, "", before, "killed attach")
        out, err = report(dat)
        check("fibe: " in out and "warning" not in err,
              "the killed attach's trace, ended by its watcher: %r" % err)
        out, rc = t.finish()
        check(out == EXPECTED, "program output: %r" % out)
        check(rc == 7, "program exit status %d" % rc)
    finally:
        t.kill()


def case_noperm():
    as_nobody = ["setpriv", "--reuid=%d" % NOBODY, "--regid=%d" % NOBODY, "--clear-groups"]
    if os.geteuid() == 0:
        # Root without CAP_SYS_PTRACE, and a process of another user.
        t = Target(prefix=as_nobody)
        try:
            p = dprobe("attach", "-p", t.pid, "-e", FPROBE, ok=False,
                       prefix=["setpriv", "--bounding-set=-sys_ptrace"])
            check(p.returncode == 1 and re.search(
                r"cannot trace process %d \(attach_target\): permission denied: it runs as "
                r"user \S+ \(uid %d\) and you are \S+ \(uid 0\) without CAP_SYS_PTRACE: .*"
                r"kernel\.yama\.ptrace_scope" % (t.pid, NOBODY), p.stderr),
                "attach without CAP_SYS_PTRACE: %d %r" % (p.returncode, p.stderr))
            # Another non-root user.
            other = ["setpriv", "--reuid=%d" % (NOBODY - 1), "--regid=%d" % (NOBODY - 1),
                     "--clear-groups"]
            p = dprobe("attach", "-p", t.pid, "-e", FPROBE, ok=False, prefix=other)
            check(p.returncode == 1 and re.search(
                r"cannot trace process %d \(attach_target\): permission denied: it runs as "
                r"user \S+ \(uid %d\) and you are \S+ \(uid %d\) without CAP_SYS_PTRACE: .*"
                r"kernel\.yama\.ptrace_scope" % (t.pid, NOBODY, NOBODY - 1), p.stderr),
                "attach as another user: %d %r" % (p.returncode, p.stderr))
            p = dprobe("detach", "-p", t.pid, ok=False,
                       prefix=["setpriv", "--bounding-set=-sys_ptrace"])
            check(p.returncode == 1 and "permission denied" in p.stderr,
                  "detach without CAP_SYS_PTRACE: %r" % p.stderr)
            check(not os.path.exists(os.path.join(WORK, "dprobe.dat")),
                  "a refused attach created its trace file")
            out, rc = t.finish()
            check(out == EXPECTED and rc == 7, "program after refused attach: %r %d" % (out, rc))
        finally:
            t.kill()
        user = as_nobody
    else:
        user = []
    # A non-dumpable process of the same user.
    t = Target("nodump", prefix=user)
    try:
        p = dprobe("attach", "-p", t.pid, "-e", FPROBE, ok=False, prefix=user)
        check(p.returncode == 1 and re.search(
            r"cannot trace process %d \(attach_target\): permission denied: it is not "
            r"dumpable .* needs CAP_SYS_PTRACE; kernel\.yama\.ptrace_scope" % t.pid, p.stderr),
            "attach to a non-dumpable process: %d %r" % (p.returncode, p.stderr))
        out, rc = t.finish()
        check(out == EXPECTED and rc == 7, "program after refused attach: %r %d" % (out, rc))
    finally:
        t.kill()


def case_exits():
    # The process exits (status 3) when the dynamic linker opens the agent: in the middle
    # of the injected dlopen.
    t = Target(env=dict(TARGET_ENV, LD_AUDIT=AUDIT))
    try:
        p = dprobe("attach", "-p", t.pid, "-e", FPROBE, "-o", "exits.dat", ok=False)
        check(p.returncode == 1 and
              "process %d (attach_target) exited while dprobe was attaching" % t.pid in p.stderr,
              "attach to an exiting process: %d %r" % (p.returncode, p.stderr))
        rc = t.p.wait(timeout=30)
        check(rc == 3, "the process exited with %d, not by its audit library" % rc)
        check(not mounted(os.path.join(ENV["XDG_RUNTIME_DIR"], "dprobe", str(t.pid))),
              "a mount was left")
        p = dprobe("attach", "-p", t.pid, ok=False)
        check(p.returncode == 1 and "no process %d" % t.pid in p.stderr,
              "attach to a reaped process: %r" % p.stderr)
    finally:
        t.kill()


def case_errors():
    # No such process: a child reaped already.
    gone = subprocess.Popen(["true"])
    gone.wait()
    p = dprobe("attach", "-p", gone.pid, ok=False)
    check(p.returncode == 1 and p.stderr == "dprobe attach: no process %d\n" % gone.pid,
          "no such process: %r" % p.stderr)
    p = dprobe("detach", "-p", gone.pid, ok=False)
    check(p.returncode == 1 and p.stderr == "dprobe detach: no process %d\n" % gone.pid,
          "detach, no such process: %r" % p.stderr)
    p = dprobe("attach", "-p", 2, ok=False)
    check(p.returncode == 1 and "is a kernel thread" in p.stderr, "kthreadd: %r" % p.stderr)
    p = dprobe("attach", ok=False)
    check(p.returncode == 129 and "--pid is required" in p.stderr, "no -p: %r" % p.stderr)
    t = Target()
    try:
        # Rejected offline: the process is not touched at all.
        p = dprobe("attach", "-p", t.pid, "-e", "p:bad take_string x=%rzz", ok=False)
        check(p.returncode == 1 and "Invalid register name" in p.stderr and "^" in p.stderr,
              "bad event: %r" % p.stderr)
        with open("/proc/%d/maps" % t.pid) as f:
            check("libdprobe" not in f.read(), "a refused event line loaded the runtime")
        p = dprobe("detach", "-p", t.pid, ok=False)
        check(p.returncode == 1 and "is not attached (no dprobe runtime is loaded in it)"
              in p.stderr, "detach never attached: %r" % p.stderr)
        # Rejected by the process's tracefs: the error_log entry, nothing left applied, and
        # the process as it was (the runtime had prepared its code and the loader's hook:
        # taken out again as after a detach).
        before = Snapshot(t.pid)
        p = dprobe("attach", "-p", t.pid, "-e", FPROBE, "-e", "f:nope libc.so.6:no_such_fn",
                   "-o", "err.dat", ok=False)
        check(p.returncode == 1 and "event 'f:nope libc.so.6:no_such_fn' rejected" in p.stderr
              and "trace_fprobe: error:" in p.stderr, "unknown function: %r" % p.stderr)
        p = dprobe("detach", "-p", t.pid, ok=False)
        check(p.returncode == 1 and "is not attached" in p.stderr,
              "a failed attach left a session: %r" % p.stderr)
        comms = task_comms(t.pid)
        check(not any(c.startswith("dprobe-") for c in comms),
              "agent threads after a failed attach: %s" % comms)
        check_untouched(t.pid, before, "after an attach refused by the process's tracefs")
        p = dprobe("attach", "-p", t.pid, "-o", "/nonexistent/x.dat", ok=False)
        check(p.returncode == 1 and "cannot write '/nonexistent/x.dat'" in p.stderr,
              "unwritable output: %r" % p.stderr)
        out, rc = t.finish()
        check(out == EXPECTED and rc == 7, "program after failed attaches: %r %d" % (out, rc))
    finally:
        t.kill()


def detach_counts(text):
    m = re.search(r"detached: (\d+) events \((\d+) lost\)", text)
    return (int(m.group(1)), int(m.group(2))) if m else (0, -1)


def case_noloss():
    # 16 KB buffers fill in microseconds: without waiting for the streamer, a busy thread
    # loses most of its events (1.7 M of 9.7 M in 2 s with the default size, issue 30).
    t = Target("storm")
    dat = os.path.join(WORK, "noloss.dat")
    try:
        dprobe("attach", "-B", "-p", t.pid, "-F", "spin_step", "-b", "16", "-o", dat)
        time.sleep(1.5)
        start = time.time()
        p = dprobe("detach", "-p", t.pid, timeout=60)
        check(time.time() - start < 20, "detach took %.1f s" % (time.time() - start))
        events, lost = detach_counts(p.stdout)
        check(events > 10000 and lost == 0, "attach by default: %r" % p.stdout)
        out, rc = t.finish("usr1")
        check(out == "storm: 0 fork failures, 0 signal mismatches, forked, signalled\n" +
              EXPECTED_QUIET, "program output after detach: %r" % out)
        check(rc == 7, "program exit status %d" % rc)
    finally:
        t.kill()
    # The opt-out: the program never waits, and what does not fit is dropped (counted).
    t = Target("busy")
    try:
        dprobe("attach", "-B", "--no-wait", "-p", t.pid, "-F", "spin_step", "-b", "16",
               "-o", dat)
        time.sleep(0.5)
        p = dprobe("detach", "-p", t.pid, timeout=60)
        events, lost = detach_counts(p.stdout)
        check(events > 0 and lost > 0, "attach --no-wait: %r" % p.stdout)
        out, rc = t.finish("usr1")
        check(out == EXPECTED_QUIET and rc == 7, "program after --no-wait: %r %d" % (out, rc))
    finally:
        t.kill()


def i386_program(path):
    """Writes a tiny static i386 ELF program that calls pause() in a loop (int 0x80)."""
    code = bytes([0xb8, 29, 0, 0, 0,  # mov $29 (__NR_pause), %eax
                  0xcd, 0x80,         # int $0x80
                  0xeb, 0xf7])        # jmp back to the mov
    base, ehsize, phsize = 0x08048000, 52, 32
    ident = b"\x7fELF" + bytes([1, 1, 1]) + bytes(9)  # ELFCLASS32, little-endian, version 1
    eh = ident + struct.pack("<HHIIIIIHHHHHH", 2, 3, 1, base + ehsize + phsize, ehsize, 0, 0,
                             ehsize, phsize, 1, 0, 0, 0)  # ET_EXEC, EM_386, entry, 1 PT_LOAD
    size = ehsize + phsize + len(code)
    ph = struct.pack("<IIIIIIII", 1, 0, base, base, size, size, 5, 0x1000)  # PT_LOAD r-x
    with open(path, "wb") as f:
        f.write(eh + ph + code)
    os.chmod(path, 0o755)


def case_notx86():
    prog = os.path.join(WORK, "i386_pause")
    i386_program(prog)
    try:
        p = subprocess.Popen([prog])
    except OSError as e:
        if e.errno == errno.ENOEXEC:  # a kernel without 32-bit x86 emulation
            print("SKIP: this kernel does not run i386 programs")
            shutil.rmtree(WORK, ignore_errors=True)
            sys.exit(77)
        raise
    try:
        # Until it runs the program (not the exec in progress).
        for _ in range(200):
            if os.readlink("/proc/%d/exe" % p.pid) == prog:
                break
            time.sleep(0.01)
        want = ("process %d (i386_pause) is not an x86-64 program (ELF machine i386 (32-bit "
                "x86)): dprobe traces x86-64 processes only\n" % p.pid)
        for cmd in ("attach", "detach"):
            r = dprobe(cmd, "-p", p.pid, ok=False)
            check(r.returncode == 1 and r.stderr == "dprobe %s: %s" % (cmd, want),
                  "%s of an i386 process: %d %r" % (cmd, r.returncode, r.stderr))
        check(p.poll() is None, "the i386 process did not survive the refused attach")
        with open("/proc/%d/status" % p.pid) as f:
            check("TracerPid:\t0\n" in f.read(), "the i386 process is left traced")
    finally:
        p.kill()
        p.wait()


def case_midcall():
    """The command killed (SIGKILL) at random moments of attach and detach, while it holds a
    thread of the process inside a call (mmap, dlopen, the runtime's start or unload): the
    thread returns through its signal frame, and the program carries on unharmed; a detach
    afterwards takes out whatever runtime is left. In each way a thread can be parked: in
    read (restarted), in nanosleep (slept again, never early), running."""
    seed = int(os.environ.get("DPROBE_MIDCALL_SEED", random.randrange(1 << 30)))
    print("seed: %d" % seed)
    rng = random.Random(seed)
    for mode, how, expected in ((None, "stdin", EXPECTED), ("sleepers", "usr1", EXPECTED_QUIET),
                                ("busy", "usr1", EXPECTED_QUIET)):
        t = Target(mode)
        try:
            before = Snapshot(t.pid)
            # How long a whole attach and a whole detach take here: the kills fall inside.
            t0 = time.time()
            dprobe("attach", "-B", "-p", t.pid, "-e", FPROBE, "-o",
                   os.path.join(WORK, "midcall.dat"))
            t_attach = time.time() - t0
            t0 = time.time()
            dprobe("detach", "-p", t.pid)
            t_detach = time.time() - t0
            for i in range(6):
                for args, span in ((["attach", "-B", "-p", str(t.pid), "-e", FPROBE, "-o",
                                     os.path.join(WORK, "midcall%d.dat" % i)], t_attach),
                                   (["detach", "-p", str(t.pid)], t_detach)):
                    a = subprocess.Popen([DPROBE] + args, cwd=WORK, env=ENV,
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                    time.sleep(rng.uniform(0.0, span))
                    a.kill()
                    a.wait()
                    check(t.p.poll() is None, "%s: the program died (status %s) after `dprobe "
                          "%s` was killed" % (mode or "default", t.p.poll(), args[0]))
                    if t.p.poll() is not None:
                        return
            # What the killed commands left: a runtime (started or not), taken out now.
            said = []
            for _ in range(3):
                d = dprobe("detach", "-p", t.pid, ok=False)
                said.append("%d %s%s" % (d.returncode, d.stdout.strip(), d.stderr.strip()))
                if d.returncode != 0:
                    break

            def gone():
                now = Snapshot(t.pid)
                return not now.dprobe_mappings() and not any(
                    c.startswith("dprobe-") for c in task_comms(t.pid))
            check(wait_until(gone, 20), "%s: the runtime is still in the process after the "
                  "killed commands and a detach: %s" % (mode or "default", said))
            now = Snapshot(t.pid)
            check(not now.text_diffs, "code left changed: %s" % now.text_diffs)
            check(now.fds == before.fds, "descriptors %s, before %s" %
                  (sorted(now.fds), sorted(before.fds)))
            with open("/proc/%d/status" % t.pid) as f:
                check("TracerPid:\t0\n" in f.read(), "the process is left traced")
            out, rc = t.finish(how)
            check(out == expected, "%s: program output: %r" % (mode or "default", out))
            check(rc == 7, "program exit status %d" % rc)
        finally:
            t.kill()


def case_lifecycle():
    import attach_lifecycle
    seed = int(os.environ.get("DPROBE_LIFECYCLE_SEED", random.randrange(1 << 30)))
    attach_lifecycle.run(sys.modules[__name__], seed,
                         int(os.environ.get("DPROBE_LIFECYCLE_STEPS", "200")))


CASES = {"basic": case_basic, "foreground": case_foreground, "busy": case_busy,
         "sleepers": case_sleepers, "twice": case_twice, "noperm": case_noperm,
         "cycles": case_cycles, "killed": case_killed,
         "exits": case_exits, "errors": case_errors, "notx86": case_notx86,
         "noloss": case_noloss, "midcall": case_midcall, "forks": case_forks,
         "lifecycle": case_lifecycle}
CASES[CASE]()
if failures:
    sys.exit("%d failure(s) in case %s (work dir %s)" % (len(failures), CASE, WORK))
print("ok: %s" % CASE)
shutil.rmtree(WORK, ignore_errors=True)
