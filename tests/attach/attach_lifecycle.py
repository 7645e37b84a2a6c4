"""The randomized lifecycle case of attach_test.py: sessions of attach, an afternoon in the
tracefs tree chosen at random (events of every kind added through dynamic_events,
kprobe_events or uprobe_events, enabled, filtered, deleted, bad lines, function filters and
their commands, tracers, options, clocks, pid filters, the profiler and the stack tracer,
event triggers and hist at the top level and in instances, eprobes, instances, markers,
snapshots, reads and live trace_pipe reads, clears, synthetic events and the latency
recipe) and detach, on one program, with the invariants checked after every step:

  - the program is alive, and every read of trace, trace_pipe (live) and snapshot is
    decodable (no record the reader cannot name);
  - every record of a session's event carries a value the program really passed (fib's
    argument and result, take_string's word and index...), after any re-attach, filter,
    trigger or eprobe; a filtered event writes only the records its filter keeps;
  - every hist table adds up (hitcounts to Hits, lines to Entries, nothing dropped) and
    its keys are values the program passed, at the top level and in instances;
  - a rejected dynamic_events line is refused and adds an error_log entry with a caret;
  - a new session starts from the boot state the first one found (no event, filter,
    tracer, option, instance or record of the last session);
  - after every detach, the session's file is read whole by `dprobe report` (two formats
    at random) and, converted to trace.dat, by `trace-cmd report`;
  - after every detach the process is as it was before the first attach: code byte for
    byte its files, the same descriptors, no dprobe mapping, thread, mount or socket, its
    memory within the bound.

run(lib, seed, steps) takes attach_test's namespace (Target, Snapshot, ctl, dprobe, ...).
The seed is printed first: DPROBE_LIFECYCLE_SEED replays a run.
"""
import os
import random
import re
import shutil
import subprocess
import time

# Events a session may add: (group/name stem, definition after the name, fields).
EVENT_KINDS = [
    ("fprobes/lf", "fib n=$arg1:s32"),
    ("fprobes/lx", "fib%return r=$retval:s32"),
    ("kprobes/lk", "take_string s=+0(%di):string n=%si:s32"),
    ("kprobes/lr", "take_string%return r=$retval:s32"),
    ("kprobes/ls", "sleep_ns ns=%di:s64"),
    ("fprobes/lw", "libc.so.6:write fd=$arg1:s32 n=$arg3:u64"),
]
KIND_CHAR = {"fprobes": "f", "kprobes": "p"}

# What the worker passes and gets back: fib(6..8) and its recursion, take_string() of three
# words with their index. Every record of an event on them must carry one of these values,
# whatever session, filter or trigger came before (a stale definition or a wrong fetch
# after a re-attach reads something else).
FIB = {0: 0, 1: 1, 2: 1, 3: 2, 4: 3, 5: 5, 6: 8, 7: 13, 8: 21}
WORDS = {"alpha": 0, "be": 1, "gamma": 2}
NUM = r"(-?(?:0x[0-9a-f]+|\d+))"
# Record lines of the sessions' events: name pattern, line pattern after "NAME: ", check.
CONTENT = [
    (r"(?:lf\d|seed)", r"\(fib\+0x0/0x[0-9a-f]+\) n=" + NUM + "$",
     lambda m: int(m[1], 0) in FIB),
    (r"lx\d", r"\(\S+ <- fib\) r=" + NUM + "$", lambda m: int(m[1], 0) in FIB.values()),
    (r"lk\d", r"\(take_string\+0x0/0x[0-9a-f]+\) s=\"(\w*)\" n=" + NUM + "$",
     lambda m: WORDS.get(m[1]) == int(m[2], 0)),
    (r"lr\d", r"\(\S+ <- take_string\) r=" + NUM + "$",
     lambda m: int(m[1], 0) in (len(w) + i for w, i in WORDS.items())),
    (r"ls\d", r"\(sleep_ns\+0x0/0x[0-9a-f]+\) ns=" + NUM + "$",
     lambda m: int(m[1], 0) in (1000000, 30000000)),
    (r"lw\d", r"\(write\+0x0/0x[0-9a-f]+\) fd=" + NUM + " n=" + NUM + "$",
     lambda m: int(m[1], 0) >= 0 and int(m[2], 0) > 0),
    (r"lu\d", r"\(0x[0-9a-f]+\) n=" + NUM + "$", lambda m: int(m[1], 0) in FIB),
    (r"ep\d", r"\(fprobes\.(?:lf\d|seed)\) nn=" + NUM + "$", lambda m: int(m[1], 0) in FIB),
    # The values `attach -A/-R` adds to take_string's graph.
    (r"args\d+", r"\(take_string\+0x0/0x[0-9a-f]+\) arg1=\"(\w*)\" arg2=" + NUM + "$",
     lambda m: WORDS.get(m[1]) == int(m[2], 0)),
    (r"retval\d+", r"\(\S+ <- take_string\) retval=" + NUM + "$",
     lambda m: int(m[1], 0) in (len(w) + i for w, i in WORDS.items())),
    (r"syn\d", r"lat=" + NUM + " pid=" + NUM + "$",
     lambda m: 0 <= int(m[1], 0) < 10**7 and int(m[2], 0) > 0),
]
CONTENT = [(re.compile(r"^\s*\S.*?\[\d+\] \S+ +[\d.]+: (%s): (.*)$" % n), re.compile(b), ok)
           for n, b, ok in CONTENT]

# Event filters a session may set, per event stem, with the predicate on a record's line.
EVENT_FILTERS = {
    "lf": [("n == 7", lambda t: t.endswith(" n=7")), ("n < 3", lambda t: re.search(r" n=[012]$", t))],
    "lk": [('s == "be"', lambda t: 's="be"' in t), ("n >= 2", lambda t: t.endswith(" n=2"))],
    "lx": [("r > 100", lambda t: False), ("r == 21", lambda t: t.endswith(" r=21"))],
}

# Lines the kernel refuses, with the message each one must log (BAD_PROBE_ADDR, BAD_TYPE,
# BAD_REG_NAME, BAD_RETPROBE, USED_ARG_NAME, BAD_EVENT_NAME).
BAD_LINES = [
    ("p:kprobes/bad no_such_function_zz", "Invalid probed address or symbol"),
    ("f:fprobes/bad fib n=$arg1:nosuchtype", "Unknown type is specified"),
    ("p:kprobes/bad take_string s=%zz", "Invalid register name"),
    ("r:kprobes/bad take_string+1", "Retprobe address must be an function entry"),
    ("f:fprobes/bad fib n=$arg1:s32 n=$arg2:s32", "This argument name is already used"),
    ("p:kprobes/1bad take_string", "Event name must follow the same rules as C identifiers"),
]

FILTERS = ["fib", "take_string", "fib take_string", "*_str*", "", "fib:traceoff",
           "fib:traceon:3", "take_string:stacktrace", "!fib:traceoff", "!fib:traceon",
           "spin_step:stacktrace:1", "sleep_ns"]
TRIGGERS = ["traceoff", "traceon", "stacktrace:2", "hist:keys=common_pid",
            "hist:keys=common_pid:vals=hitcount:sort=hitcount.descending", "snapshot:1"]
# hist triggers keyed on an event's own fields, with the keys each may show.
FIELD_HISTS = {
    "lf": ["hist:keys=n:vals=hitcount", "hist:keys=n.log2:sort=hitcount"],
    "lk": ["hist:keys=s,n:vals=hitcount:sort=n"],
    "lx": ["hist:keys=r:sort=r.descending"],
}
# Marks of a record that its reader could not decode.
UNDECODABLE = ["Unknown type", "(NULL)", "[FAILED TO PARSE]", "<unknown event>"]


def file_offset(path, sym):
    """The file offset of SYM's code in PATH (what a uprobe line names), or 0."""
    try:
        nm = subprocess.run(["nm", path], capture_output=True, text=True).stdout
        rd = subprocess.run(["readelf", "-lW", path], capture_output=True, text=True).stdout
    except OSError:
        return 0
    m = re.search(r"^([0-9a-f]+) [Tt] %s$" % re.escape(sym), nm, re.M)
    if not m:
        return 0
    addr = int(m[1], 16)
    for seg in re.finditer(r"LOAD\s+0x([0-9a-f]+) 0x([0-9a-f]+) 0x[0-9a-f]+ 0x[0-9a-f]+ "
                           r"0x([0-9a-f]+) R E", rd):
        off, va, size = (int(x, 16) for x in seg.groups())
        if va <= addr < va + size:
            return addr - va + off
    return 0


class Session:
    def __init__(self, lib, rng, t):
        self.lib, self.rng, self.t = lib, rng, t
        self.attached = False
        self.mount = ""
        self.events = {}  # "group/name" -> enabled
        self.triggers = {}  # "group/name" -> [trigger, ...] set on it
        self.itriggers = {}  # (instance, "group/name") -> [trigger, ...]
        self.instances = []
        self.synths = set()
        self.eprobes = {}  # "eprobes/epN" -> the event it is on
        self.serial = 0
        self.graph_args = False
        self.tree_graph = False
        self.boot = {}
        self.before = lib.Snapshot(t.pid)
        self.fib_off = file_offset(lib.TARGET, "fib")
        self.log = []

    def ctl(self, *args, ok=False):
        return self.lib.ctl(self.t.pid, *args, ok=ok)

    def check(self, cond, what):
        self.lib.check(cond, "%s (after: %s)" % (what, "; ".join(self.log[-6:])))
        return cond

    def alive(self):
        return self.check(self.t.p.poll() is None,
                          "the program died (status %s)" % self.t.p.poll())

    # ---- session start and end
    def attach(self):
        self.serial += 1
        args = ["attach", "-B", "-p", self.t.pid, "-o",
                os.path.join(self.lib.WORK, "life%d.dat" % self.serial)]
        # With neither, attach records the graph of every function (spin_step's loop: GBs).
        e, graph = self.rng.choice([(True, False), (True, True), (False, True)])
        if e:
            args += ["-e", "f:fprobes/seed fib n=$arg1:s32"]
        if graph:
            args += ["-F", "take_string"]
            # Values with the graph (uftrace's -A/-R), checked in the graph after the detach.
            if self.rng.random() < 0.4:
                args += ["-A", "take_string@arg1/s,arg2/d", "-R", "take_string@retval/d"]
        self.log.append("attach %s" % args[5:])
        self.graph_args = "-A" in args
        self.tree_graph = False
        p = self.lib.dprobe(*args, ok=False)
        if not self.check(p.returncode == 0, "attach: %d %r" % (p.returncode, p.stderr)):
            return
        self.attached = True
        self.mount = self.lib.mountpoint(p.stdout)
        self.events = {"fprobes/seed": True} if "-e" in args else {}
        self.triggers, self.instances, self.synths, self.eprobes = {}, [], set(), {}
        self.itriggers = {}
        # What the command line itself sets (set_event for -e, the graph for -F) is compared
        # with the first session started the same way.
        state = self.lib.boot_state(self.t.pid)
        key = ("-e" in args, "-F" in args)
        boot = self.boot.setdefault(key, state)
        for f in sorted(boot):
            self.check(state[f] == boot[f], "session %d starts with %s = %r, the first such "
                       "with %r" % (self.serial, f, state[f], boot[f]))
        dyn = self.ctl("cat", "dynamic_events").stdout
        want = "f:fprobes/seed fib n=$arg1:s32\n" if self.events else ""
        self.check(dyn == want, "session %d starts with events %r" % (self.serial, dyn))
        trace = self.ctl("cat", "trace").stdout
        self.check(not re.search(r"mark-\d+-", trace), "session %d's trace starts with an "
                   "earlier session's markers: %r" % (self.serial, trace[-300:]))
        # The spinner calls spin_step without pause: traced by the function tracers, it
        # would write hundreds of MB a session (what a user does too: keep hot leaves out).
        self.ctl("write", "set_ftrace_notrace", "spin_step")

    def detach(self):
        self.log.append("detach")
        p = self.lib.dprobe("detach", "-p", self.t.pid, ok=False)
        self.check(p.returncode == 0, "detach: %d %r" % (p.returncode, p.stderr))
        self.attached = False
        self.lib.check_detached(self.t, self.mount, self.before, "detach of session %d" % self.serial)
        # Every record the session wrote is readable by every reader of the file.
        dat = os.path.join(self.lib.WORK, "life%d.dat" % self.serial)
        fmts = self.rng.sample(["text", "graph", "chrome", "profile"], 2)
        if self.graph_args and "graph" not in fmts:
            fmts.append("graph")
        for fmt in fmts:
            r = self.lib.dprobe("report", "-i", dat, "--format", fmt, ok=False)
            if fmt == "graph" and self.graph_args:
                # Every call of take_string the graph shows carries its values, right.
                # A leaf: 'take_string("be", 1) = 3;'; with events inside it:
                # 'take_string("be", 1) {' ... '} /* take_string = 3 */'.
                wrong = []
                for ln in r.stdout.splitlines():
                    c = re.search(r'take_string\("(\w*)", (-?\d+)\)( = (-?\d+);| \{)$', ln)
                    e = re.search(r'\} /\* take_string = (-?\d+) \*/$', ln)
                    if c:
                        ok = WORDS.get(c[1]) == int(c[2]) and (
                            not c[4] or int(c[4]) == len(c[1]) + int(c[2]))
                    elif e:
                        ok = int(e[1]) in (len(w) + i for w, i in WORDS.items())
                    else:
                        # Without values only from the function_graph tracer of the tree
                        # (the kernel's, without funcgraph-args), when the session ran it.
                        ok = "take_string()" not in ln or self.tree_graph
                    if not ok:
                        wrong.append(ln)
                self.check(not wrong, "session %d's graph: take_string's values wrong: %s" %
                           (self.serial, wrong[:3]))
            bad = [m for m in UNDECODABLE if m in r.stdout]
            self.check(r.returncode == 0 and not bad and "warning" not in r.stderr,
                       "report --format %s of session %d: %d %s %r" %
                       (fmt, self.serial, r.returncode, bad, r.stderr[-300:]))
        if shutil.which("trace-cmd") and self.rng.random() < 0.5:
            td = os.path.join(self.lib.WORK, "life%d.trace.dat" % self.serial)
            r = self.lib.dprobe("report", "-i", dat, "--format", "trace-dat", "-o", td, ok=False)
            if self.check(r.returncode == 0, "trace-dat of session %d: %r" %
                          (self.serial, r.stderr[-300:])):
                tc = subprocess.run(["trace-cmd", "report", "-i", td], capture_output=True,
                                    text=True)
                bad = [m for m in UNDECODABLE if m in tc.stdout]
                self.check(tc.returncode == 0 and not bad,
                           "trace-cmd report of session %d: %d %s %r" %
                           (self.serial, tc.returncode, bad, tc.stderr[-300:]))

    # ---- the afternoon in the tree
    def add_event(self):
        kinds = EVENT_KINDS + ([("uprobes/lu", "%s:0x%x n=%%di:s32" % (self.lib.TARGET, self.fib_off))]
                               if self.fib_off else [])
        stem, body = self.rng.choice(kinds)
        name = "%s%d" % (stem, self.rng.randrange(3))
        group = name.split("/")[0]
        char = "r" if "%return" in body and group == "kprobes" else KIND_CHAR.get(group, "p")
        body = body.replace("%return", "") if char == "r" else body
        line = "%s:%s %s" % (char, name, body)
        # The kernel's older files take the same lines, for their own kinds.
        file = "dynamic_events"
        if self.rng.random() < 0.3 and group in ("kprobes", "uprobes"):
            file = group[:-1] + "_events"
        self.log.append("add %s (%s)" % (line, file))
        p = self.ctl("write", "-a", file, line)
        if name in self.events:
            self.check(p.returncode != 0, "a second %s was accepted" % name)
        elif self.check(p.returncode == 0, "%r refused: %r" % (line, p.stderr)):
            self.events[name] = False

    def delete_event(self):
        if not self.events:
            return
        name = self.rng.choice(sorted(self.events))
        self.log.append("delete %s" % name)
        p = self.ctl("write", "-a", "dynamic_events", "-:%s" % name)
        listed = self.ctl("cat", "dynamic_events").stdout
        present = re.search(r"^\S+:%s " % re.escape(name), listed, re.M) is not None
        if p.returncode == 0:
            self.check(not present, "%s deleted yet still listed" % name)
            self.events.pop(name)
            self.triggers.pop(name, None)
            self.itriggers = {k: v for k, v in self.itriggers.items() if k[1] != name}
        else:
            # Refused as the kernel refuses it: enabled, or used by a trigger.
            self.check(present, "deleting %s failed and it is gone: %r" % (name, p.stderr))

    def bad_line(self):
        line, err = self.rng.choice(BAD_LINES)
        self.log.append("bad %s" % line)
        before = self.ctl("cat", "dynamic_events").stdout
        p = self.ctl("write", "-a", "dynamic_events", line)
        self.check(p.returncode != 0, "bad line %r accepted" % line)
        log = self.ctl("cat", "error_log").stdout
        self.check(err in log and "^" in log, "error_log after %r: %r" % (line, log[-400:]))
        self.check(self.ctl("cat", "dynamic_events").stdout == before,
                   "a refused line changed dynamic_events")

    def enable(self):
        if not self.events:
            return
        name = self.rng.choice(sorted(self.events))
        on = self.rng.random() < 0.7
        self.log.append("enable %s %d" % (name, on))
        p = self.ctl("write", "events/%s/enable" % name, "1" if on else "0")
        if self.check(p.returncode == 0, "enable %s: %r" % (name, p.stderr)):
            self.events[name] = on
            got = self.ctl("cat", "events/%s/enable" % name).stdout.strip()
            # An enable_event/disable_event trigger on another event puts this one in soft
            # mode ("*"), and may switch it between the write and the read (as the kernel's).
            target = ":%s" % name.replace("/", ":")
            soft = any(t.endswith(target) for trigs in self.triggers.values() for t in trigs)
            want = ("1*", "0*") if soft else ("1" if on else "0",)
            self.check(got in want or (not soft and got.startswith(want[0])),
                       "%s/enable reads %r" % (name, got))

    def trigger(self):
        if not self.events:
            return
        name = self.rng.choice(sorted(self.events))
        set_ = self.triggers.setdefault(name, [])
        if set_ and self.rng.random() < 0.4:
            trig = set_.pop(self.rng.randrange(len(set_)))
            self.log.append("untrigger %s %s" % (name, trig))
            p = self.ctl("write", "-a", "events/%s/trigger" % name, "!" + trig)
            self.check(p.returncode == 0, "removing trigger %s of %s: %r" % (trig, name, p.stderr))
            return
        trig = self.rng.choice(TRIGGERS)
        others = sorted(e for e in self.events if e != name)
        r = self.rng.random()
        if others and r < 0.2:
            other = self.rng.choice(others).replace("/", ":")
            trig = "%s:%s" % (self.rng.choice(["enable_event", "disable_event"]), other)
        elif r < 0.35 and name.split("/")[1][:2] in FIELD_HISTS:
            trig = self.rng.choice(FIELD_HISTS[name.split("/")[1][:2]])
        self.log.append("trigger %s %s" % (name, trig))
        p = self.ctl("write", "-a", "events/%s/trigger" % name, trig)
        if p.returncode == 0:
            set_.append(trig)
            listed = self.ctl("cat", "events/%s/trigger" % name).stdout
            self.check(trig.split(":")[0] in listed, "trigger %s not listed: %r" % (trig, listed))

    def instance_trigger(self):
        """A trigger (hist most often) on an event of an instance: its own table, its own
        buffer's actions; gone with the instance's rmdir."""
        if not self.events or not self.instances:
            return
        inst = self.rng.choice(self.instances)
        name = self.rng.choice(sorted(self.events))
        set_ = self.itriggers.setdefault((inst, name), [])
        path = "instances/%s/events/%s/trigger" % (inst, name)
        if set_ and self.rng.random() < 0.4:
            trig = set_.pop(self.rng.randrange(len(set_)))
            self.log.append("untrigger %s %s" % (path, trig))
            p = self.ctl("write", "-a", path, "!" + trig)
            self.check(p.returncode == 0, "removing %s of %s: %r" % (trig, path, p.stderr))
            return
        stem = name.split("/")[1][:2]
        trig = self.rng.choice(FIELD_HISTS.get(stem, []) + TRIGGERS[3:])
        self.log.append("trigger %s %s" % (path, trig))
        p = self.ctl("write", "-a", path, trig)
        if p.returncode == 0:
            set_.append(trig)
            self.ctl("write", "instances/%s/events/%s/enable" % (inst, name), "1")

    def synth(self):
        """A synthetic event, and the latency recipe between fib's entry and exit when both
        events exist: ts0 saved on entry, onmatch() on exit generating it."""
        name = "syn%d" % self.rng.randrange(2)
        if name in self.synths and self.rng.random() < 0.5:
            self.log.append("delete synth %s" % name)
            p = self.ctl("write", "-a", "dynamic_events", "-:synthetic/%s" % name)
            if p.returncode == 0:
                self.synths.discard(name)
            return
        self.log.append("synth %s" % name)
        p = self.ctl("write", "-a", "dynamic_events", "s:%s u64 lat; pid_t pid" % name)
        if name in self.synths:
            self.check(p.returncode != 0, "a second synthetic %s was accepted" % name)
            return
        if not self.check(p.returncode == 0, "s:%s refused: %r" % (name, p.stderr)):
            return
        self.synths.add(name)
        entry = [e for e in self.events if e.startswith("fprobes/lf")]
        exit_ = [e for e in self.events if e.startswith("fprobes/lx")]
        if entry and exit_:
            en, ex = entry[0], exit_[0]
            self.ctl("write", "-a", "events/%s/trigger" % en,
                     "hist:keys=common_pid:ts0=common_timestamp.usecs")
            self.ctl("write", "-a", "events/%s/trigger" % ex,
                     "hist:keys=common_pid:lat=common_timestamp.usecs-$ts0:onmatch(%s)."
                     "trace(%s,$lat,common_pid)" % (en.replace("/", "."), name))
            self.ctl("write", "-a", "events/synthetic/%s/trigger" % name, "hist:keys=lat")

    def filter(self):
        f = self.rng.choice(FILTERS)
        append = self.rng.random() < 0.5
        self.log.append("set_ftrace_filter %s%r" % (">>" if append else ">", f))
        self.ctl("write", *(["-a"] if append else []), "set_ftrace_filter", f)
        self.ctl("cat", "set_ftrace_filter")

    def tracer(self):
        tr = self.rng.choice(["nop", "function", "function_graph"])
        self.log.append("tracer %s" % tr)
        self.tree_graph |= tr == "function_graph"
        p = self.ctl("write", "current_tracer", tr)
        if self.check(p.returncode == 0, "current_tracer %s: %r" % (tr, p.stderr)):
            got = self.ctl("cat", "current_tracer").stdout.strip()
            self.check(got == tr, "current_tracer reads %r after %s" % (got, tr))

    def option(self):
        f, v = self.rng.choice([("options/func_stack_trace", "1"),
                                ("options/func_stack_trace", "0"),
                                ("max_graph_depth", str(self.rng.randrange(5))),
                                ("set_graph_notrace", "spin_step"), ("set_graph_notrace", ""),
                                ("tracing_on", "0"), ("tracing_on", "1"), ("tracing_on", "1"),
                                ("buffer_size_kb", str(self.rng.choice([64, 256, 1408]))),
                                ("options/funcgraph-retval", "1"),
                                ("function_profile_enabled", self.rng.choice("01")),
                                ("stack_tracer_enabled", self.rng.choice("01")),
                                ("trace_clock", self.rng.choice(["global", "mono", "counter",
                                                                 "local", "x86-tsc"])),
                                ("set_event", "fprobes:*")])
        self.log.append("%s=%r" % (f, v))
        self.ctl("write", f, v)

    def instance(self):
        if self.instances and self.rng.random() < 0.4:
            name = self.instances.pop(self.rng.randrange(len(self.instances)))
            self.log.append("rmdir %s" % name)
            p = self.ctl("rmdir", "instances/%s" % name)
            self.check(p.returncode == 0, "rmdir instances/%s: %r" % (name, p.stderr))
            self.itriggers = {k: v for k, v in self.itriggers.items() if k[0] != name}
            return
        name = "i%d" % self.rng.randrange(4)
        self.log.append("mkdir %s" % name)
        p = self.ctl("mkdir", "instances/%s" % name)
        if name in self.instances:
            self.check(p.returncode != 0, "a second instances/%s" % name)
            return
        if not self.check(p.returncode == 0, "mkdir instances/%s: %r" % (name, p.stderr)):
            return
        self.instances.append(name)
        if self.rng.random() < 0.5:
            self.ctl("write", "instances/%s/current_tracer" % name, "function")
        if self.events:
            ev = self.rng.choice(sorted(self.events))
            self.ctl("write", "instances/%s/events/%s/enable" % (name, ev), "1")
        self.ctl("write", "instances/%s/trace_marker" % name, "mark-%d-inst" % self.serial)

    def marker(self):
        self.log.append("marker")
        p = self.ctl("write", "trace_marker", "mark-%d-%d" % (self.serial, self.rng.randrange(99)))
        # Refused with EBADF, as the kernel does, only while the buffer is off (tracing_on 0,
        # or a traceoff trigger fired).
        on = self.ctl("cat", "tracing_on").stdout.strip()
        self.check(p.returncode == 0 or ("Bad file descriptor" in p.stderr and on == "0"),
                   "trace_marker with tracing_on %s: %r" % (on, p.stderr))

    def clear(self):
        self.log.append("clear trace")
        self.ctl("write", "trace", "")

    def read(self):
        where = ""
        if self.instances and self.rng.random() < 0.3:
            where = "instances/%s/" % self.rng.choice(self.instances)
        self.log.append("read %strace" % where)
        p = self.ctl("cat", where + "trace")
        if self.check(p.returncode == 0, "cat %strace: %r" % (where, p.stderr)):
            bad = [m for m in UNDECODABLE if m in p.stdout]
            self.check(not bad, "%strace holds records it cannot decode (%s): %r" %
                       (where, bad, [ln for ln in p.stdout.splitlines()
                                     if any(m in ln for m in bad)][:5]))
            self.check_content(p.stdout, where + "trace")
        for name, trigs in self.triggers.items():
            if any(t.startswith("hist") for t in trigs) and name in self.events:
                h = self.ctl("cat", "events/%s/hist" % name).stdout
                self.check("# event histogram" in h and "Totals:" in h,
                           "events/%s/hist: %r" % (name, h[:300]))
                self.check_hist(name, h)
        for (inst, name), trigs in self.itriggers.items():
            if any(t.startswith("hist") for t in trigs) and name in self.events:
                h = self.ctl("cat", "instances/%s/events/%s/hist" % (inst, name)).stdout
                self.check_hist(name, h)
        for f in ("enabled_functions", "set_ftrace_filter", "trace_stat/function0",
                  "kprobe_profile"):
            self.ctl("cat", f)


    def check_hist(self, name, text):
        """Each table of a hist file adds up (its hitcounts sum to at most its Hits, one
        line an entry, nothing dropped at this size) and its keys are values the program passed."""
        ev = name.split("/")[1][:2]
        for table in text.split("# event histogram")[1:]:
            entries = re.findall(r"^\{ (.*) \} hitcount: +(\d+)", table, re.M)
            tot = re.search(r"Hits: (\d+)\s+Entries: (\d+)\s+Dropped: (\d+)", table)
            if not self.check(tot, "events/%s/hist has a table without Totals: %r" %
                              (name, table[:300])):
                continue
            # The program runs on while the file is read: as in the kernel, Hits is the
            # table's counter read after its entries were, so it may be a little ahead.
            hits, n, dropped = (int(x) for x in tot.groups())
            self.check(sum(int(c) for _, c in entries) <= hits and len(entries) == n
                       and dropped == 0, "events/%s/hist does not add up: %d entries of %d "
                       "hits, Totals %s" % (name, len(entries),
                                            sum(int(c) for _, c in entries), tot.groups()))
            for keys, _ in entries:
                kv = dict((k, v.strip()) for k, v in re.findall(r"(\w+): +([^,]+)", keys))
                bad = False
                if ev in ("lf", "ep") and re.fullmatch(r"\d+", kv.get("n", "x")):
                    bad = int(kv["n"]) not in FIB
                if ev == "lk" and "s" in kv and "n" in kv:
                    bad = WORDS.get(kv["s"]) != int(kv["n"])
                if ev == "lx" and re.fullmatch(r"-?\d+", kv.get("r", "x")):
                    bad = int(kv["r"]) not in FIB.values()
                self.check(not bad, "events/%s/hist has a key the program never passed: %r"
                           % (name, keys))

    def check_content(self, text, where):
        """Every record line of a session's event carries values the program really passed."""
        bad = []
        for line in text.splitlines():
            for head, body, ok in CONTENT:
                m = head.match(line)
                if not m:
                    continue
                b = body.search(m[2])
                if not b or not ok(b):
                    bad.append(line)
                break
        self.check(not bad, "%s has records with values the program never passed: %r" %
                   (where, bad[:4]))

    def pipe(self):
        """A live read of trace_pipe, as `cat trace_pipe` does until interrupted: what it
        gives is decodable and right, and consumed (trace no longer holds those lines)."""
        where = ""
        if self.instances and self.rng.random() < 0.3:
            where = "instances/%s/" % self.rng.choice(self.instances)
        self.log.append("pipe %s" % where)
        path = os.path.join(self.mount, where + "trace_pipe")
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        except OSError as e:
            self.check(False, "open %s: %s" % (path, e))
            return
        chunks, deadline = [], time.monotonic() + 0.2
        try:
            while time.monotonic() < deadline and sum(map(len, chunks)) < 1 << 20:
                try:
                    b = os.read(fd, 65536)
                except BlockingIOError:
                    time.sleep(0.01)
                    continue
                if not b:
                    time.sleep(0.01)
                    continue
                chunks.append(b)
        finally:
            os.close(fd)
        text = b"".join(chunks).decode("utf-8", "replace")
        self.check(not [m for m in UNDECODABLE if m in text],
                   "%strace_pipe gave records it cannot decode: %r" % (where, text[-300:]))
        self.check_content(text, where + "trace_pipe")

    def event_filter(self):
        """A filter on an event, then a cleared buffer: every record of that event since
        matches it (the kernel drops the others before they are written)."""
        cand = [e for e in self.events if e.split("/")[1][:2] in EVENT_FILTERS]
        if not cand:
            return
        name = self.rng.choice(sorted(cand))
        if self.rng.random() < 0.3:
            self.log.append("filter %s 0" % name)
            p = self.ctl("write", "events/%s/filter" % name, "0")
            self.check(p.returncode == 0, "clearing the filter of %s: %r" % (name, p.stderr))
            return
        text, pred = self.rng.choice(EVENT_FILTERS[name.split("/")[1][:2]])
        self.log.append("filter %s %r" % (name, text))
        p = self.ctl("write", "events/%s/filter" % name, text)
        if not self.check(p.returncode == 0, "filter %r on %s: %r" % (text, name, p.stderr)):
            return
        got = self.ctl("cat", "events/%s/filter" % name).stdout.strip()
        self.check(got == text, "events/%s/filter reads %r after %r" % (name, got, text))
        self.ctl("write", "trace", "")
        time.sleep(0.03)
        ev = name.split("/")[1]
        lines = [ln for ln in self.ctl("cat", "trace").stdout.splitlines()
                 if re.search(r"\] \S+ +[\d.]+: %s: " % re.escape(ev), ln)]
        wrong = [ln for ln in lines if not pred(ln)]
        self.check(not wrong, "records of %s that its filter %r drops: %r" % (name, text, wrong[:3]))

    def snapshot(self):
        """echo 0/1/2 > snapshot and a read of it. The session's own buffer is drained into
        its file, and a swap would take records from it: only instances take snapshots (the
        top level answers EBUSY, as the kernel does to a snapshot it cannot take)."""
        where = ""
        if self.instances and self.rng.random() < 0.7:
            where = "instances/%s/" % self.rng.choice(self.instances)
        v = self.rng.choice(["1", "1", "0", "2"])
        self.log.append("snapshot %s%s" % (where, v))
        p = self.ctl("write", where + "snapshot", v)
        self.check(p.returncode == 0 or (not where and v == "1" and "busy" in p.stderr),
                   "%ssnapshot %s: %r" % (where, v, p.stderr))
        p = self.ctl("cat", where + "snapshot")
        if self.check(p.returncode == 0, "cat snapshot: %r" % p.stderr):
            self.check(not [m for m in UNDECODABLE if m in p.stdout],
                       "snapshot holds records it cannot decode: %r" % p.stdout[-300:])
            self.check_content(p.stdout, "snapshot")

    def eprobe(self):
        """An event probe on one of the session's fib events, or its removal."""
        if self.eprobes and self.rng.random() < 0.4:
            name = self.rng.choice(sorted(self.eprobes))
            self.log.append("delete %s" % name)
            p = self.ctl("write", "-a", "dynamic_events", "-:%s" % name)
            if p.returncode == 0:
                self.eprobes.pop(name)
                self.events.pop(name, None)
                self.triggers.pop(name, None)
            return
        bases = [e for e in self.events if re.match(r"fprobes/(lf\d|seed)$", e)]
        if not bases:
            return
        base = self.rng.choice(sorted(bases))
        name = "eprobes/ep%d" % self.rng.randrange(2)
        line = "e:%s %s nn=$n" % (name, base)
        self.log.append("add %s" % line)
        p = self.ctl("write", "-a", "dynamic_events", line)
        if name in self.events:
            self.check(p.returncode != 0, "a second %s was accepted" % name)
        elif self.check(p.returncode == 0, "%r refused: %r" % (line, p.stderr)):
            self.events[name] = False
            self.eprobes[name] = base

    def pids(self):
        """set_event_pid / set_ftrace_pid: the worker's thread, the process, or nobody."""
        tids = sorted(int(t) for t in os.listdir("/proc/%d/task" % self.t.pid))
        f = self.rng.choice(["set_event_pid", "set_ftrace_pid", "set_event_notrace_pid"])
        v = self.rng.choice([str(self.t.pid), " ".join(map(str, tids)), ""])
        self.log.append("%s=%r" % (f, v))
        p = self.ctl("write", f, v)
        self.check(p.returncode == 0, "%s %r: %r" % (f, v, p.stderr))

    def step(self):
        if not self.attached:
            self.attach()
            return
        acts = [(self.add_event, 14), (self.delete_event, 6), (self.bad_line, 3),
                (self.enable, 12), (self.trigger, 8), (self.filter, 7), (self.tracer, 6),
                (self.option, 7), (self.instance, 5), (self.marker, 5), (self.clear, 2),
                (self.read, 12), (self.synth, 3), (self.pipe, 5), (self.event_filter, 4),
                (self.snapshot, 3), (self.eprobe, 4), (self.pids, 2),
                (self.instance_trigger, 4), (self.detach, 4)]
        fn = self.rng.choices([a for a, _ in acts], weights=[w for _, w in acts])[0]
        fn()
        self.alive()


def run(lib, seed, steps):
    print("lifecycle seed: %d, %d steps" % (seed, steps))
    rng = random.Random(seed)
    t = lib.Target()
    try:
        s = Session(lib, rng, t)
        for _ in range(steps):
            s.step()
            if lib.failures or t.p.poll() is not None:
                break
        if s.attached:
            s.detach()
        if t.p.poll() is None:
            out, rc = t.finish()
            lib.check(out == lib.EXPECTED, "program output after the sessions: %r" % out)
            lib.check(rc == 7, "program exit status %d" % rc)
        if lib.failures:
            print("steps: %s" % "; ".join(s.log))
    finally:
        t.kill()
