# Run by gdb (tests/gdb/CMakeLists.txt): checks what gdb shows of tests/gdb/gdb_prog.c
# through dprobe's trampolines, with the unwinder gdb auto-loaded from the program's dprobe
# (libdprobe.so's or the static archive's .debug_gdb_scripts section).
#
# Environment: DPROBE_GDB_MODES, the gdb_prog modes to check after "none" (comma-separated);
# DPROBE_GDB_ENTRY_FRAME=1 if the probed function shows in a stop in its entry handler
# (patch sites; a jump site's detour has no frame gdb can show); DPROBE_GDB_CORE=0 leaves
# out the core file check (an ASan process's core would hold its terabytes of shadow).
#
# For each mode the program runs to the breakpoint at stop_here() and the backtrace must
# name the same functions, in the same order, as in mode "none" (the frames that are the
# hooked returns into the trampoline, which `bt` leaves out, are checked to be there with
# `bt -no-filters`). In the fprobe and kretprobe modes the registers gdb unwinds to for
# each caller (pc, sp, and the callee-saved rbx, rbp, r12-r15) are checked against the
# CPU's when the call returns there, and one hooked return is followed instruction by
# instruction through the trampoline and the exit dispatch, checking the walk at each.
# Exit status: 0 all passed, 1 a check failed, 77 gdb cannot run a program here (skip).

import os
import re
import shutil
import sys
import tempfile

import gdb

CHAIN = ["inner", "recurse", "recurse", "recurse", "recurse", "middle", "outer", "main"]
CALLEE_SAVED = ["rbx", "rbp", "r12", "r13", "r14", "r15"]
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL: " + what)
    return ok


def finish(status):
    sys.stdout.flush()
    gdb.execute("kill", to_string=True) if gdb.selected_inferior().pid else None
    gdb.execute("quit %d" % status)


def bt_names(cmd):
    """Function names of the frames `cmd` prints, and whether the walk ended cleanly."""
    out = gdb.execute(cmd, to_string=True)
    names = []
    for line in out.splitlines():
        m = re.match(r"#\d+\s+(?:0x[0-9a-f]+ in )?(.+?) \(", line)
        if m:
            names.append(m.group(1))
    return names, "Backtrace stopped" not in out, out


def is_return_tramp(name):
    # The code a hooked return "comes from": the call of a function's body by the fentry
    # trampoline, or the nop before the trampoline of a replaced return address.
    return name.startswith(("dprobe_fgraph_call_", "dprobe_return_trampoline_"))


def run(mode):
    try:
        out = gdb.execute("run " + mode, to_string=True)
    except gdb.error as e:
        msg = str(e)
        if mode == "none" and re.search(r"ptrace|Operation not permitted|Couldn't get registers|"
                                        r"not allowed|Cannot create process", msg):
            print("SKIP: gdb cannot run a program here: " + msg)
            finish(77)
        raise
    frame = gdb.selected_frame() if gdb.selected_inferior().pid else None
    if not check(frame is not None and frame.name() == "stop_here",
                 "%s: the program did not stop at stop_here: %s" % (mode, out.strip()[-300:])):
        return False
    return True


def walk():
    """gdb.Frame objects from the newest, unfiltered, and the last frame's stop reason."""
    frames = []
    f = gdb.newest_frame()
    while f is not None:
        frames.append(f)
        last = f
        f = f.older()
    return frames, last.unwind_stop_reason()


def chain_from(names, first):
    """The names from the first FIRST onward, without the hooked-return frames, up to main."""
    if first not in names:
        return []
    tail = [n for n in names[names.index(first):] if not is_return_tramp(n)]
    return tail[: tail.index("main") + 1] if "main" in tail else tail


def registers(frame):
    return {r: int(frame.read_register(r)) for r in ["pc", "sp"] + CALLEE_SAVED}


def check_registers(mode):
    """Each caller's registers as gdb unwinds them == the CPU's when the call returns."""
    frames, _ = walk()
    want = []
    for f in frames[1:]:
        if f.name() in CHAIN:
            want.append((f.name(), f.level(), registers(f)))
    check(len(want) == len(CHAIN), "%s: %d program frames in the walk" % (mode, len(want)))
    bps = []
    for name, level, regs in want:
        bp = gdb.Breakpoint("*%#x" % regs["pc"], internal=True)
        bp.condition = "$sp == %#x" % regs["sp"]
        bps.append((bp, name, level, regs))
    for bp, name, level, regs in bps:
        if name == "main":
            break  # main does not return while the program runs
        gdb.execute("continue", to_string=True)
        now = registers(gdb.selected_frame())
        check(now == regs, "%s: registers of frame #%d (%s): unwound %s, at the return %s" % (
            mode, level, name, fmt(regs), fmt(now)))
    for bp, *_ in bps:
        bp.delete()


def fmt(regs):
    return " ".join("%s=%#x" % (r, v) for r, v in regs.items())


def step_through_return(mode):
    """Follows inner's hooked return instruction by instruction (trampoline, exit dispatch,
    handlers) until it reaches recurse: at each instruction the walk must go on from
    recurse(0) down to main, with recurse(0)'s registers as at the stop."""
    frames, _ = walk()
    rec = next(f for f in frames if f.name() == "recurse")
    rec_regs = registers(rec)
    gdb.execute("frame function inner", to_string=True)
    gdb.execute("finish", to_string=True)
    f0 = gdb.selected_frame()
    if not check((f0.name() or "").startswith(("dprobe_fgraph_return_",
                                                 "dprobe_return_to_handler_")),
                 "%s: finish from inner stopped in %s, not the return trampoline"
                 % (mode, f0.name())):
        return
    steps = 0
    while steps < 20000:
        frames, reason = walk()
        if frames[0].pc() == rec_regs["pc"]:
            break
        names = [f.name() or "??" for f in frames]
        ok = check(chain_from(names, "recurse") == CHAIN[1:] and reason in
                   (gdb.FRAME_UNWIND_NO_REASON, gdb.FRAME_UNWIND_OUTERMOST),
                   "%s: walk at step %d, pc %#x: %s" % (mode, steps, frames[0].pc(), names))
        r = next((f for f in frames if f.name() == "recurse"), None)
        ok = ok and check(r is not None and registers(r) == rec_regs,
                          "%s: recurse(0)'s registers at step %d, pc %#x: %s, want %s" % (
                              mode, steps, frames[0].pc(), fmt(registers(r)) if r else None,
                              fmt(rec_regs)))
        if not ok:
            return
        gdb.execute("stepi", to_string=True)
        steps += 1
    check(frames[0].pc() == rec_regs["pc"] and int(frames[0].read_register("sp")) == rec_regs["sp"],
          "%s: the return did not reach recurse in %d steps" % (mode, steps))
    print("%s: %d instructions from the trampoline to recurse, each walked" % (mode, steps))


def check_threads(mode):
    """Both threads' walks complete: the main one stopped in stop_here, the worker blocked
    in read() under the same hooked chain."""
    threads = sorted(gdb.selected_inferior().threads(), key=lambda t: t.num)
    check(len(threads) == 2, "%s: %d threads" % (mode, len(threads)))
    for t in threads:
        t.switch()
        names, clean, _ = bt_names("bt")
        raw, _, _ = bt_names("bt -no-filters")
        print("%s: thread %d: bt %s" % (mode, t.num, " ".join(names)))
        if "worker_main" in names:
            want = ["park"] + CHAIN[:-1] + ["worker_main"]
            got = names[names.index("park"):names.index("worker_main") + 1] \
                if "park" in names else names
        else:
            want, got = ["stop_here"] + CHAIN, names
        check(clean and got == want, "%s: thread %d: bt %s, want %s" % (mode, t.num, names, want))
        check(sum(map(is_return_tramp, raw)) == len(CHAIN) - 1,
              "%s: thread %d: bt -no-filters %s" % (mode, t.num, raw))
    all_bt = gdb.execute("thread apply all bt", to_string=True)
    check("Backtrace stopped" not in all_bt and all_bt.count(" in main (") == 1
          and all_bt.count(" in worker_main (") == 1,
          "%s: thread apply all bt:\n%s" % (mode, all_bt))


def main():
    gdb.execute("set pagination off")
    gdb.execute("set confirm off")
    gdb.execute("set width 0")
    gdb.execute("set suppress-cli-notifications on")  # no stop location at each stepi
    gdb.execute("break stop_here", to_string=True)
    modes = [m for m in os.environ.get("DPROBE_GDB_MODES", "").split(",") if m]
    entry_frame = os.environ.get("DPROBE_GDB_ENTRY_FRAME") == "1"

    run("none")
    expected, clean, out = bt_names("bt")
    # gdb makes a frame for via_tail, which tail-calls inner, from the call-site information
    # of its caller, recurse. Through a hooked return the caller gdb sees is the trampoline:
    # no such frame (Documentation/reliability.md).
    tail_calls = [f.name() for f in walk()[0] if f.type() == gdb.TAILCALL_FRAME]
    print("none: bt %s (tail-call frames: %s)" % (" ".join(expected), tail_calls))
    expected = [n for n in expected if n not in tail_calls]
    if not check(expected == ["stop_here"] + CHAIN and clean, "none: bt %s" % expected):
        print(out)
        finish(1)
    loaded = any(u.name == "dprobe" for u in gdb.frame_unwinders)
    if not check(loaded, "the dprobe unwinder was not auto-loaded"):
        finish(1)

    for mode in modes:
        if not run(mode):
            continue
        names, clean, out = bt_names("bt")
        raw, raw_clean, raw_out = bt_names("bt -no-filters")
        hooked = sum(map(is_return_tramp, raw))
        print("%s: bt %s (%d hooked returns)" % (mode, " ".join(names), hooked))
        check(clean and raw_clean, "%s: backtrace stopped:\n%s" % (mode, out + raw_out))
        if mode in ("fprobe", "kretprobe"):
            check(names == expected, "%s: bt %s, want %s" % (mode, names, expected))
            check([n for n in raw if not is_return_tramp(n)] == expected,
                  "%s: bt -no-filters %s" % (mode, raw))
            # Every function of the chain but main returns into the trampoline.
            check(hooked == len(CHAIN) - 1, "%s: %d hooked returns, want %d" % (
                mode, hooked, len(CHAIN) - 1))
            step_through_return(mode)
            gdb.execute("kill", to_string=True)
            run(mode)
            check_registers(mode)
        elif mode in ("exit", "kretexit"):
            handler = "on_exit_" if mode == "exit" else "on_kret"
            check(handler in names, "%s: no %s in %s" % (mode, handler, names))
            check(chain_from(names, "recurse") == CHAIN[1:]
                  and names[-len(CHAIN) + 1:] == CHAIN[1:],
                  "%s: bt %s, want it to end with %s" % (mode, names, CHAIN[1:]))
        elif mode == "entry":
            check("on_entry" in names, "%s: no on_entry in %s" % (mode, names))
            want = CHAIN if entry_frame else CHAIN[1:]
            check(names[-len(want):] == want and chain_from(names, want[0]) == want,
                  "%s: bt %s, want it to end with %s" % (mode, names, want))
        elif mode == "threads":
            check(names == expected, "%s: main thread's bt %s, want %s" % (mode, names, expected))
            check_threads(mode)
            if os.environ.get("DPROBE_GDB_CORE") == "0":
                gdb.execute("kill", to_string=True)
                continue
            # The same from a core file of the process.
            core = os.path.join(tempfile.mkdtemp(prefix="dprobe-gdb-"), "core")
            try:
                gdb.execute("gcore " + core, to_string=True)
                gdb.execute("kill", to_string=True)
                gdb.execute("core-file " + core, to_string=True)
                gdb.selected_inferior().threads()[0].switch()
                check_threads(mode + " (core file)")
                gdb.execute("core-file", to_string=True)
            finally:
                shutil.rmtree(os.path.dirname(core))
            continue
        else:
            check(False, "unknown mode " + mode)
        gdb.execute("kill", to_string=True)

    print("%d failures" % len(failures))
    finish(1 if failures else 0)


try:
    main()
except Exception as e:  # an error of the check itself is a failure, never a pass
    print("FAIL: %s: %s" % (type(e).__name__, e))
    finish(1)
