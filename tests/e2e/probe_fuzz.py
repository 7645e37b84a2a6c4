#!/usr/bin/env python3
# Random probe definitions on a live program, through its tracefs mount: kprobes at random
# offsets of its functions and of libc's, kretprobes, fprobes, with random fetch arguments
# (registers, $argN, $stackN, dereferences of any of them, strings, bitfields, arrays),
# enabled while two threads call the probed functions, then disabled and removed; meanwhile
# another thread makes and removes instances and lists the tree. Whatever dprobe accepts
# must leave the program as it was: kselftest_prog checks every result it computes and
# exits with 2 or 3 when one is wrong, and it must still be serving after every round.
#
#   probe_fuzz.py PROGRAM [SEED [ROUNDS]]
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time

PROG = sys.argv[1]
SEED = int(sys.argv[2]) if len(sys.argv) > 2 else 1
ROUNDS = int(sys.argv[3]) if len(sys.argv) > 3 else 60

FUNCS = ["kst_read", "kst_open", "kst_clone", "kst_create_dir", "kst_sys_open",
         "kst_sys_openat2", "kst_free", "kst_exit", "kst_schedule", "kst_softirq",
         "nanosleep", "openat", "close"]
REGS = ["%ax", "%bx", "%cx", "%dx", "%si", "%di", "%bp", "%sp", "%r8", "%r9", "%r10",
        "%r11", "%r12", "%r13", "%r14", "%r15", "%ip", "%flags"]
TYPES = ["u8", "s16", "u32", "x64", "s64", "string", "ustring", "symbol", "char", "b3@2/8",
         "x8[4]", "u16[2]", ""]

rnd = random.Random(SEED)


def fetch_arg():
    k = rnd.random()
    if k < 0.3:
        base = rnd.choice(REGS)
    elif k < 0.5:
        base = "$arg%d" % rnd.randint(1, 6)
    elif k < 0.6:
        base = "$stack%d" % rnd.randint(0, 8)
    elif k < 0.7:
        base = "$stack"
    elif k < 0.75:
        base = "$comm"
    elif k < 0.8:
        base = "@sink"
    else:
        base = "+%d(%s)" % (rnd.randint(-64, 64), rnd.choice(REGS + ["$arg1", "$arg2"]))
    if rnd.random() < 0.4:
        base = "+%d(%s)" % (rnd.randint(-16, 32), base)
    if rnd.random() < 0.2:
        base = "+0(" + base + ")"
    t = rnd.choice(TYPES)
    return base + (":" + t if t else "")


def probe_line(name):
    f = rnd.choice(FUNCS)
    args = " ".join(fetch_arg() for _ in range(rnd.randint(0, 5)))
    k = rnd.random()
    if k < 0.5:
        off = rnd.choice([0, 0, 1, 2, 3, 4, 5, 8, rnd.randint(0, 60)])
        return "p:kprobes/%s %s+%d %s" % (name, f, off, args)
    if k < 0.7:
        return "r%s:kprobes/%s %s %s $retval" % (rnd.choice(["", "5"]), name, f, args)
    if k < 0.9:
        return "f:fprobes/%s %s%s %s" % (name, f, rnd.choice(["", "%return"]), args)
    return "p:kprobes/%s %s %s" % (name, f, args)


def write(path, text, mode="w"):
    try:
        with open(path, mode) as f:
            f.write(text)
        return True
    except OSError:
        return False


# Only DPROBE_NO_FUSE=1 skips (77): anywhere else a program that mounts no tree fails the test.
if os.environ.get("DPROBE_NO_FUSE") == "1":
    print("probe_fuzz: DPROBE_NO_FUSE=1: skipped")
    sys.exit(77)

prog = subprocess.Popen([PROG], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
mount = None
deadline = time.time() + 20
for line in prog.stdout:
    m = re.search(r"mount=(\S+)", line)
    if m:
        mount = m.group(1)
        break
    if time.time() > deadline:
        break
if not mount or not os.path.isdir(mount):
    prog.kill()
    prog.wait()
    sys.exit("probe_fuzz: the program mounted no tracefs (set DPROBE_NO_FUSE=1 to skip where "
             "FUSE cannot mount)")

stop = threading.Event()


def churn_tree():
    # Instances made and removed while the tree is listed (an open directory of a removed
    # instance once killed the program).
    while not stop.is_set():
        d = os.path.join(mount, "instances", "fz")
        try:
            os.mkdir(d)
        except OSError:
            pass
        for root, dirs, files in os.walk(mount):
            pass
        try:
            os.rmdir(d)
        except OSError:
            pass


churner = threading.Thread(target=churn_tree)
churner.start()
failures = []
accepted = tried = lines = 0
try:
    for r in range(ROUNDS):
        names = []
        for i in range(rnd.randint(1, 6)):
            line = probe_line("z%d_%d" % (r, i))
            tried += 1
            if write(os.path.join(mount, "dynamic_events"), line + "\n", "a"):
                accepted += 1
                names.append((line.split()[0].split(":")[1], line))
        for name, _ in names:
            write(os.path.join(mount, "events", name, "enable"), "1")
        time.sleep(0.03)
        try:
            with open(os.path.join(mount, "trace"), "rb") as f:
                lines += f.read().count(b"\n")
        except OSError as e:
            failures.append("round %d: trace unreadable: %s" % (r, e))
        for name, _ in names:
            write(os.path.join(mount, "events", name, "enable"), "0")
        if not write(os.path.join(mount, "dynamic_events"), ""):
            failures.append("round %d: dynamic_events could not be cleared" % r)
        write(os.path.join(mount, "trace"), "")
        if prog.poll() is not None:
            failures.append("round %d: the program ended (status %d) with these probes:\n  %s" %
                            (r, prog.returncode, "\n  ".join(l for _, l in names)))
            break
finally:
    stop.set()
    churner.join()

if prog.poll() is None:
    prog.send_signal(signal.SIGTERM)
    try:
        prog.wait(timeout=30)
    except subprocess.TimeoutExpired:
        prog.kill()
        prog.wait()
        failures.append("the program did not end after SIGTERM")
    if prog.returncode != 0:
        failures.append("the program ended with status %d (2, 3: a result it computed was "
                        "wrong)" % prog.returncode)
# The fuzz must have placed probes that fired, or it tested nothing.
if accepted < tried // 10 or lines == 0:
    failures.append("only %d of %d probe lines accepted, %d trace lines" %
                    (accepted, tried, lines))
print("probe_fuzz: seed %d, %d rounds, %d of %d probe lines accepted, %d trace lines" %
      (SEED, ROUNDS, accepted, tried, lines))
for f in failures:
    print("FAIL:", f)
sys.exit(1 if failures else 0)
