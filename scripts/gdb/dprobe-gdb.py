# gdb support for programs that run dprobe: a frame unwinder that walks through hooked
# returns, so that `bt`, `up`, `frame N` and `finish` see the real callers of functions
# with fprobe exit handlers or kretprobes.
#
# A hooked function returns into dprobe's return trampoline: its return-address slot holds
# the trampoline's address, and the real one is on the thread's shadow stack. gdb's own
# unwinders stop there ("Backtrace stopped: frame did not save the PC"). This unwinder
# claims the frames whose pc is in a return trampoline, finds the shadow-stack frame of
# their slot and gives gdb the registers of the real caller.
#
# Loaded automatically with libdprobe.so (and with a program linked with dprobe's static
# archive) from their .debug_gdb_scripts section, when gdb's auto-load safe-path allows
# it; by hand: `source <prefix>/share/dprobe/gdb/dprobe-gdb.py`.
# Documentation/reliability.md, "What a debugger sees", says more.
#
# What it reads is described by the runtime itself: the exported constant
# dprobe_debugger_info (core/task_ctx.cpp) and the trampolines' layout table it points to
# (arch/x86_64/ftrace_tramp.S).

import struct

import gdb
import gdb.unwinder

_MAGIC = 0x626465626F727064  # "dprobedb"
_VERSION = 2
_CALLEE_SAVED = ("rbp", "r12", "r13", "r14", "r15")
_MAX_THREADS = 1 << 20  # a bound on the walk of the context list, against garbage
# struct pt_regs (include/dprobe/ptrace.h, the kernel's layout): the fentry trampoline's
# frame once it has saved the registers.
_PT_REGS = {
    "r15": 0, "r14": 8, "r13": 16, "r12": 24, "rbp": 32, "rbx": 40, "r11": 48, "r10": 56,
    "r9": 64, "r8": 72, "rax": 80, "rcx": 88, "rdx": 96, "rsi": 104, "rdi": 112,
}
_SCRATCH = ("rcx", "rdx", "rsi", "rdi", "r8", "r9", "r10")


class _NotReady(Exception):
    """The description is not usable yet (the dynamic loader has not relocated it)."""


def _ordered(*addrs):
    return all(a <= b for a, b in zip(addrs, addrs[1:])) and addrs[0] > 0


class _Tramp:
    """One return trampoline (a RETURN_LAYOUT record)."""

    def __init__(self, w):
        (
            self.begin,  # the nop an unwinder looks up (return address - 1)
            self.entry,  # what a hooked slot holds; where the trampoline starts
            self.framed,
            self.rbx_frame,
            self.rsp_frame,
            self.unframed,
            self.end,
            self.bx_saved,
            self.bx_restored,
            self.slot_offset,
            self.bx_offset,
            self.unframed_slot,
        ) = w[:12]
        if self.unframed_slot >= 1 << 63:
            self.unframed_slot -= 1 << 64
        if not _ordered(self.begin, self.entry, self.framed, self.rbx_frame, self.rsp_frame,
                        self.unframed, self.end) or not (
                            self.framed <= self.bx_saved <= self.bx_restored <= self.unframed):
            raise _NotReady()


class _EntryTramp:
    """One fentry trampoline (an ENTRY_LAYOUT record)."""

    def __init__(self, w):
        (
            self.begin,
            self.framed,
            self.rbx_frame,
            self.rsp_frame,
            self.unframed,
            self.end,
            self.ax_saved,
            self.saved,
            self.restored,
            self.ret_offset,
            self.func_offset,
            self.func_saved,
        ) = w[:12]
        if not _ordered(self.begin, self.framed, self.ax_saved, self.saved, self.func_saved,
                        self.rbx_frame, self.rsp_frame, self.restored, self.unframed,
                        self.end):
            raise _NotReady()


class _Runtime:
    """dprobe_debugger_info of one process, decoded."""

    def __init__(self, inferior, addr):
        head = _read_words(inferior, addr, 3)
        if head[0] != _MAGIC:
            raise ValueError("bad magic number")
        if head[1] != _VERSION or head[2] < 20:
            raise ValueError("version %d, this script knows %d" % (head[1], _VERSION))
        w = _read_words(inferior, addr, head[2])
        (
            self.ctx_head,
            self.ctx_next,
            self.ctx_in_use,
            self.ctx_tid,
            self.ctx_shadow_top,
            self.ctx_shadow,
            self.ctx_dropped_next,
            self.ctx_dropped,
            self.dropped_ring,
            self.sf_ret,
            self.sf_retp,
            tramps,
            ntramps,
            tramp_words,
            entry_tramps,
            nentry_tramps,
            entry_tramp_words,
        ) = w[3:20]
        self.tramps = [
            _Tramp(_read_words(inferior, tramps + i * tramp_words * 8, tramp_words))
            for i in range(ntramps)
        ]
        self.entry_tramps = [
            _EntryTramp(
                _read_words(inferior, entry_tramps + i * entry_tramp_words * 8, entry_tramp_words)
            )
            for i in range(nentry_tramps)
        ]
        self.entries = frozenset(t.entry for t in self.tramps)
        # All trampolines are in one section of one object: one range rejects other code.
        every = self.tramps + self.entry_tramps
        self.lo = min(t.begin for t in every)
        self.hi = max(t.end for t in every)

    def tramp_at(self, pc):
        """The return or fentry trampoline PC is in, or None."""
        if pc < self.lo or pc >= self.hi:
            return None
        for t in self.tramps:
            if t.begin <= pc < t.end:
                return t
        for t in self.entry_tramps:
            if t.begin <= pc < t.end:
                return t
        return None

    def task_ctx(self, inferior, tid):
        """The context of thread TID (the one in use with that tid), or 0."""
        t = _read_word(inferior, self.ctx_head)
        for _ in range(_MAX_THREADS):
            if not t:
                break
            if (
                _read_u32(inferior, t + self.ctx_in_use)
                and _read_u32(inferior, t + self.ctx_tid) == tid
            ):
                return t
            t = _read_word(inferior, t + self.ctx_next)
        return 0

    def real_return(self, inferior, tid, slot):
        """The real return address of the hooked frame whose slot is SLOT, or None."""
        t = self.task_ctx(inferior, tid)
        if not t:
            return None
        top = _read_u32(inferior, t + self.ctx_shadow_top)
        if top:
            w = _read_words(inferior, t + self.ctx_shadow, top)
            # The newest frame of that slot; a hooked function tail-called by another one
            # has the trampoline as its return address, and the caller's frame (the same
            # slot, further down) has the real one (core/shadow_stack.cpp,
            # shadow_real_return()).
            i = top
            while i > 0:
                n = w[i - 1]
                if n < 4 or n > i:
                    return None  # not a shadow stack we can read
                base = i - n
                if w[base + self.sf_retp] == slot:
                    ret = w[base + self.sf_ret]
                    if ret not in self.entries:
                        return ret
                i = base
        # A frame dropped as gone by mistake still returns through the ring of dropped
        # frames (shadow_dropped_return()).
        nxt = _read_u32(inferior, t + self.ctx_dropped_next)
        ring = self.dropped_ring
        for i in range(min(ring, nxt)):
            k = (nxt - 1 - i) % ring
            e_slot, e_ret = _read_words(inferior, t + self.ctx_dropped + k * 16, 2)
            if e_slot == slot and e_ret:
                return e_ret
        return None


def _read_words(inferior, addr, n):
    return struct.unpack("<%dQ" % n, bytes(inferior.read_memory(addr, 8 * n)))


def _read_word(inferior, addr):
    return _read_words(inferior, addr, 1)[0]


def _read_u32(inferior, addr):
    return struct.unpack("<I", bytes(inferior.read_memory(addr, 4)))[0]


class _State:
    """Where dprobe_debugger_info is, per program space, found outside of unwinding (an
    expression evaluated while gdb unwinds may need the very frame being unwound)."""

    def __init__(self):
        self.addr = {}  # gdb.Progspace -> address or None
        self.runtime = {}  # (progspace, pid, addr) -> _Runtime or None
        self.warned = set()

    def locate(self, *_):
        ps = gdb.current_progspace()
        addr = None
        try:
            sym = gdb.lookup_global_symbol("dprobe_debugger_info")
            if sym is not None:
                addr = int(sym.value().address)
        except gdb.error:
            pass
        if addr is None:
            try:
                addr = int(gdb.parse_and_eval("(unsigned long)&dprobe_debugger_info"))
            except gdb.error:
                addr = None
        # Read again at each stop: cheap, and a description read before the dynamic loader
        # relocated it must not stick.
        self.runtime.clear()
        if self.addr.get(ps) != addr:
            self.addr[ps] = addr
            gdb.invalidate_cached_frames()

    def forget(self, *_):
        self.addr.clear()
        self.runtime.clear()

    def get(self):
        ps = gdb.current_progspace()
        addr = self.addr.get(ps)
        if addr is None:
            return None
        inferior = gdb.selected_inferior()
        if not inferior.pid:
            return None  # no process: the file's contents are not relocated yet
        key = (ps, inferior.pid, addr)
        if key not in self.runtime:
            try:
                self.runtime[key] = _Runtime(inferior, addr)
            except ValueError as e:
                self.runtime[key] = None
                if key not in self.warned:
                    self.warned.add(key)
                    gdb.write("dprobe: cannot use dprobe_debugger_info: %s\n" % e, gdb.STDERR)
            except (_NotReady, gdb.MemoryError, gdb.error, struct.error):
                return None  # not relocated yet, or not mapped: try again later
        return self.runtime[key]


class _FrameId:
    def __init__(self, sp, pc):
        self.sp = sp
        self.pc = pc


def _known_function(addr):
    """Whether ADDR is in a function gdb knows (a probed function's site)."""
    try:
        block = gdb.current_progspace().block_for_pc(addr)
    except RuntimeError:
        return False
    while block is not None and block.function is None:
        block = block.superblock
    return block is not None


def _frame_base(tramp, pc, sp, rbx):
    """The address of a trampoline's frame at PC: rsp or rbx (which holds it while rsp is
    aligned for the handlers), or None before the frame is built and after it is gone."""
    if tramp.framed <= pc < tramp.rbx_frame or tramp.rsp_frame <= pc < tramp.unframed:
        return sp
    if tramp.rbx_frame <= pc < tramp.rsp_frame:
        return rbx
    return None


class TrampolineUnwinder(gdb.unwinder.Unwinder):
    """Unwinds a frame in one of dprobe's trampolines: a return trampoline into the hooked
    function's real caller, an fentry trampoline into the probed function at its entry."""

    def __init__(self, state):
        super().__init__("dprobe")
        self.state = state
        self.u64 = None

    def value(self, x):
        if self.u64 is None:
            self.u64 = gdb.lookup_type("unsigned long")
        return gdb.Value(x).cast(self.u64)

    def __call__(self, pending_frame):
        rt = self.state.get()
        if rt is None:
            return None
        pc = int(pending_frame.read_register("rip"))
        tramp = rt.tramp_at(pc)
        if tramp is None:
            return None
        try:
            if isinstance(tramp, _EntryTramp):
                return self.unwind_entry(tramp, pc, pending_frame)
            return self.unwind_return(rt, tramp, pc, pending_frame)
        except (gdb.MemoryError, struct.error):
            return None

    def unwind_entry(self, tramp, pc, pending_frame):
        # The probed function's site jumped to the trampoline (through its stub): the
        # function's caller's return address is just above the trampoline's frame
        # (arch/x86_64/ftrace_tramp.S, FTRACE_CALLER), and the function itself is at its
        # entry. Which function: the site record in r11 says so until the trampoline has
        # stored the site's address in its frame. Out of the frame (the final jump), the
        # trampoline's CFI, which goes to the probed function's caller, is all gdb uses.
        inferior = gdb.selected_inferior()
        sp = int(pending_frame.read_register("rsp"))
        rbx = int(pending_frame.read_register("rbx"))
        frame = _frame_base(tramp, pc, sp, rbx)
        if frame is None and pc != tramp.begin:
            return None
        ret_slot = sp if frame is None else frame + tramp.ret_offset
        if pc < tramp.func_saved:
            func = _read_word(inferior, int(pending_frame.read_register("r11")))
        else:
            func = _read_word(inferior, frame + tramp.func_offset)
        if not _known_function(func):
            return None
        info = pending_frame.create_unwind_info(
            _FrameId(self.value(ret_slot + 8), self.value(tramp.begin))
        )
        info.add_saved_register("rip", self.value(func))
        info.add_saved_register("rsp", self.value(ret_slot))
        # The function's registers: live, or in the frame (a struct pt_regs, which the
        # handlers may have changed: the function gets those values) while it holds them.
        saved = frame is not None and tramp.saved <= pc < tramp.restored
        regs = {}
        if saved:
            w = _read_words(inferior, frame, 15)
            regs = {r: w[off // 8] for r, off in _PT_REGS.items()}
        for r in _SCRATCH + ("rbx",):
            info.add_saved_register(
                r, self.value(regs[r]) if saved else pending_frame.read_register(r)
            )
        if frame is not None and tramp.ax_saved <= pc < tramp.restored:
            rax = _read_word(inferior, frame + _PT_REGS["rax"])
            info.add_saved_register("rax", self.value(rax))
        else:
            info.add_saved_register("rax", pending_frame.read_register("rax"))
        if pc < tramp.saved:
            # The stub parked the function's r11 just below the return address.
            info.add_saved_register("r11", self.value(_read_word(inferior, ret_slot - 8)))
        elif saved:
            info.add_saved_register("r11", self.value(regs["r11"]))
        else:
            info.add_saved_register("r11", pending_frame.read_register("r11"))
        for r in _CALLEE_SAVED:
            info.add_saved_register(r, pending_frame.read_register(r))
        return info

    def unwind_return(self, rt, tramp, pc, pending_frame):
        inferior = gdb.selected_inferior()
        sp = int(pending_frame.read_register("rsp"))
        rbx = int(pending_frame.read_register("rbx"))
        # Where the slot the hooked function returned from is, at this instruction
        # (arch/x86_64/ftrace_tramp.S, RETURN_HANDLER): before the frame is built and after
        # it is gone, just below the stack pointer; in between, at a fixed offset in the
        # frame, which rbx holds while rsp is aligned for the handlers.
        frame = _frame_base(tramp, pc, sp, rbx)
        if frame is not None:
            slot = frame + tramp.slot_offset
        elif pc >= tramp.unframed:
            slot = sp + tramp.unframed_slot  # the balanced one returns with ret, the other jmp
        else:
            slot = sp - 8
        caller_rbx = rbx
        if frame is not None and tramp.bx_saved <= pc < tramp.bx_restored:
            caller_rbx = _read_word(inferior, frame + tramp.bx_offset)
        # The slot holds the real return address once the exit dispatch has put it back
        # (before any exit handler runs); until then only the shadow stack knows it.
        ret = _read_word(inferior, slot)
        if ret in rt.entries:
            thread = gdb.selected_thread()
            if thread is None:
                return None
            ret = rt.real_return(inferior, thread.ptid[1], slot)
            if ret is None:
                return None
        info = pending_frame.create_unwind_info(
            _FrameId(self.value(slot + 8), self.value(tramp.entry))
        )
        info.add_saved_register("rip", self.value(ret))
        info.add_saved_register("rsp", self.value(slot + 8))
        info.add_saved_register("rbx", self.value(caller_rbx))
        # The other callee-saved registers: the trampoline never changes them, and the
        # hooked function restored them before it returned.
        for r in _CALLEE_SAVED:
            info.add_saved_register(r, pending_frame.read_register(r))
        return info


class ReturnTrampolineFilter:
    """Leaves out of `bt` the frames that are only a hooked function's return into the
    trampoline (not yet running: pc at its first instruction, not the innermost frame), so
    that `bt` reads as without dprobe. `bt -no-filters` shows them."""

    def __init__(self, state):
        self.name = "dprobe-return-trampoline"
        self.priority = 100
        self.enabled = True
        self.state = state

    def filter(self, frames):
        rt = self.state.get()
        if rt is None:
            return frames
        return (f for f in frames if not self.pending_return(rt, f.inferior_frame()))

    @staticmethod
    def pending_return(rt, frame):
        return frame.level() > 0 and frame.pc() in rt.entries


def _install():
    old = getattr(gdb, "_dprobe_gdb_state", None)
    if old is not None:
        # Loaded again (libdprobe.so and a static program, or `source` by hand): replace.
        for registry, fn in old.connections:
            registry.disconnect(fn)
    state = _State()
    state.connections = []
    for registry, fn in (
        (gdb.events.new_objfile, state.locate),
        (gdb.events.clear_objfiles, state.forget),
        (gdb.events.stop, state.locate),
    ):
        registry.connect(fn)
        state.connections.append((registry, fn))
    gdb._dprobe_gdb_state = state
    gdb.unwinder.register_unwinder(None, TrampolineUnwinder(state), replace=True)
    gdb.frame_filters["dprobe-return-trampoline"] = ReturnTrampolineFilter(state)
    state.locate()


_install()
