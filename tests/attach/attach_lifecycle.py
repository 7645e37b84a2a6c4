"""The randomized lifecycle case of attach_test.py: sessions of attach, an afternoon in the
tracefs tree chosen at random (events added, enabled, deleted, bad lines, function filters
and their commands, tracers, options, event triggers and hist, instances, markers, reads,
clears, synthetic events and the latency recipe) and detach, on one program, with the invariants checked after every step:

  - the program is alive, and every read of trace and hist is decodable (no record the
    reader cannot name);
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
# Marks of a record that its reader could not decode.
UNDECODABLE = ["Unknown type", "(NULL)", "[FAILED TO PARSE]", "<unknown event>"]


class Session:
    def __init__(self, lib, rng, t):
        self.lib, self.rng, self.t = lib, rng, t
        self.attached = False
        self.mount = ""
        self.events = {}  # "group/name" -> enabled
        self.triggers = {}  # "group/name" -> [trigger, ...] set on it
        self.instances = []
        self.synths = set()
        self.serial = 0
        self.boot = {}
        self.before = lib.Snapshot(t.pid)
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
        self.log.append("attach %s" % args[5:])
        p = self.lib.dprobe(*args, ok=False)
        if not self.check(p.returncode == 0, "attach: %d %r" % (p.returncode, p.stderr)):
            return
        self.attached = True
        self.mount = self.lib.mountpoint(p.stdout)
        self.events = {"fprobes/seed": True} if "-e" in args else {}
        self.triggers, self.instances, self.synths = {}, [], set()
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
        for fmt in self.rng.sample(["text", "graph", "chrome", "profile"], 2):
            r = self.lib.dprobe("report", "-i", dat, "--format", fmt, ok=False)
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
        stem, body = self.rng.choice(EVENT_KINDS)
        name = "%s%d" % (stem, self.rng.randrange(3))
        group = name.split("/")[0]
        char = "r" if "%return" in body and group == "kprobes" else KIND_CHAR[group]
        body = body.replace("%return", "") if char == "r" else body
        line = "%s:%s %s" % (char, name, body)
        self.log.append("add %s" % line)
        p = self.ctl("write", "-a", "dynamic_events", line)
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
            self.check(got.startswith("1" if on else "0"), "%s/enable reads %r" % (name, got))

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
        self.log.append("trigger %s %s" % (name, trig))
        p = self.ctl("write", "-a", "events/%s/trigger" % name, trig)
        if p.returncode == 0:
            set_.append(trig)
            listed = self.ctl("cat", "events/%s/trigger" % name).stdout
            self.check(trig.split(":")[0] in listed, "trigger %s not listed: %r" % (trig, listed))

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
                                ("set_event", "fprobes:*")])
        self.log.append("%s=%r" % (f, v))
        self.ctl("write", f, v)

    def instance(self):
        if self.instances and self.rng.random() < 0.4:
            name = self.instances.pop(self.rng.randrange(len(self.instances)))
            self.log.append("rmdir %s" % name)
            p = self.ctl("rmdir", "instances/%s" % name)
            self.check(p.returncode == 0, "rmdir instances/%s: %r" % (name, p.stderr))
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
        for name, trigs in self.triggers.items():
            if any(t.startswith("hist") for t in trigs) and name in self.events:
                h = self.ctl("cat", "events/%s/hist" % name).stdout
                self.check("# event histogram" in h and "Totals:" in h,
                           "events/%s/hist: %r" % (name, h[:300]))
        for f in ("enabled_functions", "set_ftrace_filter", "trace_stat/function0",
                  "kprobe_profile"):
            self.ctl("cat", f)

    def step(self):
        if not self.attached:
            self.attach()
            return
        acts = [(self.add_event, 14), (self.delete_event, 6), (self.bad_line, 3),
                (self.enable, 12), (self.trigger, 8), (self.filter, 7), (self.tracer, 6),
                (self.option, 7), (self.instance, 5), (self.marker, 5), (self.clear, 2),
                (self.read, 12), (self.synth, 3), (self.detach, 4)]
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
