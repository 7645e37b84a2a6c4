// Fetch-arg interpreter (the kernel's process_fetch_insn), for user-space probes: runs the
// programs fetch_arg.cpp compiles when a probe fires and stores the values into the event
// record. Hot path: noexcept, no allocation, nofault reads only. Runtime only (it reads the
// traced process's memory through arch/x86_64/uaccess and hooks SIGSEGV/SIGBUS for it).
#include "tracefs/fetch_arg.h"

#include "arch/x86_64/uaccess.h"

#include <climits>
#include <csignal>
#include <cstring>
#include <mutex>

#include "core/compiler.h"
#include "core/signal_chain.h"

namespace dprobe
{

// ------------------------------------------------------------------------------------------
// Resolving compiled args in this process (symbols, file offsets) before they run

namespace
{

// Whether running PROG may read memory through a pointer from the traced program.
bool reads_memory(const fetch_prog &prog)
{
    for (const fetch_insn &in : prog.code) {
        switch (in.op) {
        case fetch_op::STACK:
        case fetch_op::DEREF:
        case fetch_op::UDEREF:
        case fetch_op::ST_MEM:
        case fetch_op::ST_UMEM:
        case fetch_op::ST_STRING:
        case fetch_op::ST_USTRING:
            return true;
        case fetch_op::ARG:
            if (in.param >= PT_REGS_ARG_COUNT) return true;
            break;
        case fetch_op::END:
            return false;
        default:
            break;
        }
    }
    return false;
}

} // namespace

probe_error resolve_fetch_args(std::span<probe_arg> args, const fetch_resolver &resolver,
                               int first_argv_index)
{
    // A probe about to be registered: make sure bad pointers fault softly.
    for (const auto &a : args) {
        if (reads_memory(a.prog)) {
            fetch_install_fault_handler();
            break;
        }
    }
    for (size_t i = 0; i < args.size(); i++) {
        auto &a = args[i];
        auto err =
            probe_error::make(probe_err::BAD_PROBE_ADDR, first_argv_index + static_cast<int>(i),
                              a.sym_pos < 0 ? 0 : a.sym_pos, ENOENT);
        for (size_t k = 0; k + 1 < a.prog.code.size(); k++) {
            fetch_insn &in = a.prog.code[k];
            if (in.op == fetch_op::END) break;
            if (in.op == fetch_op::NOP_SYMBOL) {
                if (!resolver.symbol) continue;
                // "sym", "sym+off", "sym-off": the kernel's traceprobe_split_symbol_offset.
                std::string_view text(a.prog.data);
                long long off = 0;
                size_t p = text.find_first_of("+-");
                std::string_view name = text.substr(0, p);
                if (p != std::string_view::npos && kstrtoll(text.substr(p), 0, off)) return err;
                if (name.empty()) return err;
                auto addr = resolver.symbol(name);
                if (!addr) return err;
                a.prog.code[k + 1].immediate = *addr + static_cast<uint64_t>(off);
            } else if (in.op == fetch_op::FOFFS && resolver.file_offset) {
                auto addr = resolver.file_offset(static_cast<uint64_t>(in.offset));
                if (!addr)
                    return probe_error::make(probe_err::BAD_FILE_OFFS,
                                             first_argv_index + static_cast<int>(i), 0, ENOENT);
                in.immediate = *addr;
            }
        }
    }
    return {};
}

// ------------------------------------------------------------------------------------------
// Interpreter (hot path: noexcept, no allocation, nofault reads only)

namespace
{

constexpr const char hexdig[] = "0123456789abcdef";

DPROBE_NOPROBE inline bool read_word(unsigned long &val, uintptr_t addr) noexcept
{
    return copy_from_user_nofault(&val, reinterpret_cast<const void *>(addr), sizeof(val)) == 0;
}

// The accessors of <dprobe/ptrace.h> take a pt_regs they may write; fetch args only read.
DPROBE_NOPROBE inline pt_regs *regs_of(const fetch_context &ctx) noexcept
{
    return const_cast<pt_regs *>(ctx.regs);
}

// Function argument N (0-based) at function entry: a register, or a stack word read
// without faulting.
DPROBE_NOPROBE inline bool read_arg(const fetch_context &ctx, uint32_t n,
                                    unsigned long &val) noexcept
{
    pt_regs *regs = regs_of(ctx);
    if (!regs) return false;
    if (const unsigned long *slot = regs_get_kernel_argument_addr(regs, n))
        return read_word(val, reinterpret_cast<uintptr_t>(slot));
    val = regs_get_kernel_argument(regs, n);
    return true;
}

// An event probe's field of the attached event's record (the kernel's get_event_field()):
// a number sign- or zero-extended from its size, a string as its address.
DPROBE_NOPROBE inline bool get_event_field(const fetch_insn *code, const fetch_context &ctx,
                                           unsigned long &val) noexcept
{
    if (!ctx.event_rec) return false;
    const uint8_t *p = ctx.event_rec + code->offset;
    switch (code->param) {
    case 2: { // __data_loc: the offset from the record start in the low 16 bits
        uint32_t dl;
        std::memcpy(&dl, p, sizeof dl);
        val = reinterpret_cast<uintptr_t>(ctx.event_rec + (dl & 0xffff));
        return true;
    }
    case 3:
        val = reinterpret_cast<uintptr_t>(p);
        return true;
    default:
        break;
    }
    const bool sign = code->param == 1;
    switch (code->size) {
    case 1: {
        uint8_t v;
        std::memcpy(&v, p, 1);
        val = sign ? static_cast<unsigned long>(static_cast<int8_t>(v)) : v;
        break;
    }
    case 2: {
        uint16_t v;
        std::memcpy(&v, p, 2);
        val = sign ? static_cast<unsigned long>(static_cast<int16_t>(v)) : v;
        break;
    }
    case 4: {
        uint32_t v;
        std::memcpy(&v, p, 4);
        val = sign ? static_cast<unsigned long>(static_cast<int32_t>(v)) : v;
        break;
    }
    default:
        std::memcpy(&val, p, sizeof val);
        break;
    }
    return true;
}

// Stage 1. False when the value cannot be read.
DPROBE_NOPROBE inline bool fetch_stage1(const fetch_insn *&code, const fetch_prog &prog,
                                        const fetch_context &ctx, unsigned long &val) noexcept
{
    if (code->op == fetch_op::NOP_SYMBOL) code++; // the resolved address follows as an IMM
    pt_regs *regs = regs_of(ctx);
    switch (code->op) {
    case fetch_op::REG:
        if (!regs) return false;
        val = regs_get_register(regs, code->param);
        return true;
    case fetch_op::STACK:
        return regs && read_word(val, reinterpret_cast<uintptr_t>(
                                          regs_get_kernel_stack_nth_addr(regs, code->param)));
    case fetch_op::STACKP:
        if (!regs) return false;
        val = kernel_stack_pointer(regs);
        return true;
    case fetch_op::RETVAL:
        if (!regs) return false;
        val = regs_return_value(regs);
        return true;
    case fetch_op::IMM:
        val = code->immediate;
        return true;
    case fetch_op::FOFFS:
        val = code->immediate;
        return val != 0;
    case fetch_op::COMM:
        val = reinterpret_cast<uintptr_t>(fetch_current_comm());
        return true;
    case fetch_op::DATA:
        val = reinterpret_cast<uintptr_t>(prog.data);
        return true;
    case fetch_op::ARG:
        return read_arg(ctx, code->param, val);
    case fetch_op::EDATA:
        if (!ctx.edata) return false;
        std::memcpy(&val, static_cast<const char *>(ctx.edata) + code->offset, sizeof(val));
        return true;
    case fetch_op::TP_ARG:
        return get_event_field(code, ctx, val);
    default:
        return false;
    }
}

DPROBE_NOPROBE inline void store_raw(uint8_t *dest, unsigned long val, uint8_t size) noexcept
{
    std::memcpy(dest, &val, size <= sizeof(val) ? size : sizeof(val)); // little-endian
}

DPROBE_NOPROBE inline void apply_bitfield(const fetch_insn *bf, uint8_t *dest) noexcept
{
    switch (bf->basesize) {
    case 1: {
        uint8_t v;
        std::memcpy(&v, dest, 1);
        v = static_cast<uint8_t>(static_cast<uint8_t>(v << bf->lshift) >> bf->rshift);
        std::memcpy(dest, &v, 1);
        break;
    }
    case 2: {
        uint16_t v;
        std::memcpy(&v, dest, 2);
        v = static_cast<uint16_t>(static_cast<uint16_t>(v << bf->lshift) >> bf->rshift);
        std::memcpy(dest, &v, 2);
        break;
    }
    case 4: {
        uint32_t v;
        std::memcpy(&v, dest, 4);
        v = (v << bf->lshift) >> bf->rshift;
        std::memcpy(dest, &v, 4);
        break;
    }
    case 8: {
        uint64_t v;
        std::memcpy(&v, dest, 8);
        v = (v << bf->lshift) >> bf->rshift;
        std::memcpy(dest, &v, 8);
        break;
    }
    default:
        break;
    }
}

// "0x<hex>" into buf; returns the length.
DPROBE_NOPROBE size_t print_hex(char *buf, size_t len, uintptr_t v) noexcept
{
    char tmp[2 + 16 + 1];
    size_t n = 0;
    tmp[n++] = '0';
    tmp[n++] = 'x';
    int shift = 60;
    while (shift > 0 && ((v >> shift) & 0xf) == 0)
        shift -= 4;
    for (; shift >= 0; shift -= 4)
        tmp[n++] = hexdig[(v >> shift) & 0xf];
    if (!len) return 0;
    size_t c = n < len - 1 ? n : len - 1;
    std::memcpy(buf, tmp, c);
    buf[c] = '\0';
    return c;
}

// Stores one string element. DEST NULL = length pass. Returns the bytes used (incl. NUL),
// 0 on a fault.
DPROBE_NOPROBE size_t store_string(const fetch_insn *st, unsigned long val,
                                   const fetch_context &ctx, uint8_t *record, uint8_t *dl,
                                   size_t dyn_off, size_t avail) noexcept
{
    const uintptr_t addr = val + static_cast<uintptr_t>(st->offset);
    size_t maxlen = avail < static_cast<size_t>(MAX_STRING_SIZE) ? avail : MAX_STRING_SIZE;
    if (!record) {
        // Length pass.
        if (st->op == fetch_op::ST_SYMSTR) {
            char buf[512];
            size_t n = ctx.symbolize ? ctx.symbolize(buf, sizeof(buf), addr)
                                     : print_hex(buf, sizeof(buf), addr);
            return n + 1;
        }
        long n = strnlen_user_nofault(reinterpret_cast<const void *>(addr), MAX_STRING_SIZE);
        if (n < 0) return 0;
        return static_cast<size_t>(n) + 1 > static_cast<size_t>(MAX_STRING_SIZE)
                   ? MAX_STRING_SIZE
                   : static_cast<size_t>(n) + 1;
    }
    uint32_t loc = make_data_loc(0, static_cast<uint32_t>(dyn_off));
    size_t used = 0;
    if (maxlen > 0) {
        char *dst = reinterpret_cast<char *>(record + dyn_off);
        long n;
        if (st->op == fetch_op::ST_SYMSTR) {
            n = static_cast<long>(ctx.symbolize ? ctx.symbolize(dst, maxlen, addr)
                                                : print_hex(dst, maxlen, addr));
        } else {
            n = strncpy_from_user_nofault(dst, reinterpret_cast<const void *>(addr),
                                          static_cast<long>(maxlen));
        }
        if (n >= 0) {
            used = static_cast<size_t>(n) + 1;
            loc = make_data_loc(static_cast<uint32_t>(used), static_cast<uint32_t>(dyn_off));
        }
    }
    std::memcpy(dl, &loc, sizeof(loc));
    return used;
}

// Runs PROG; RECORD NULL = length pass (returns the dynamic bytes it would use).
DPROBE_NOPROBE size_t run_prog(const fetch_prog &prog, const fetch_context &ctx, uint8_t *record,
                               size_t field_off, size_t dyn_off, size_t dyn_avail) noexcept
{
    uint8_t *dest = record ? record + field_off : nullptr;
    if (dest) std::memset(dest, 0, prog.field_size);

    const fetch_insn *code = prog.code.data();
    unsigned long val = 0;
    if (!fetch_stage1(code, prog, ctx, val)) goto fault;
    code++;

    {
        // Stage 2.
        unsigned long lval = val;
        const fetch_insn *last_deref = nullptr;
        for (; code->op == fetch_op::DEREF || code->op == fetch_op::UDEREF; code++) {
            lval = val;
            last_deref = code;
            if (!read_word(val, val + static_cast<uintptr_t>(code->offset))) goto fault;
        }
        const fetch_insn *st = code;
        const fetch_insn *bf = (st + 1)->op == fetch_op::MOD_BF ? st + 1 : nullptr;
        const fetch_insn *lp = (bf ? bf + 1 : st + 1);
        uint32_t count = lp->op == fetch_op::LP_ARRAY ? lp->param : 1;
        const bool is_str = st->op == fetch_op::ST_STRING || st->op == fetch_op::ST_USTRING ||
                            st->op == fetch_op::ST_SYMSTR;
        size_t total = 0;

        for (uint32_t i = 0; i < count; i++) {
            uint8_t *edest = dest ? dest + static_cast<size_t>(i) * st->size : nullptr;
            if (is_str) {
                bool ok = true;
                if (i > 0) {
                    // Next string pointer: the slot after the previous one.
                    ok = last_deref &&
                         read_word(val, lval + i * sizeof(char *) +
                                            static_cast<uintptr_t>(last_deref->offset));
                }
                size_t off = dyn_off + total;
                size_t avail = dyn_avail > total ? dyn_avail - total : 0;
                if (record && off > 0xffff) avail = 0; // __data_loc offsets are 16-bit
                if (ok) {
                    total += store_string(st, val, ctx, record, edest, off, avail);
                } else if (edest) {
                    uint32_t loc = make_data_loc(0, static_cast<uint32_t>(off));
                    std::memcpy(edest, &loc, sizeof(loc));
                }
                continue;
            }
            if (!edest) continue;
            switch (st->op) {
            case fetch_op::ST_RAW:
                store_raw(edest, val, st->size);
                break;
            case fetch_op::ST_MEM:
            case fetch_op::ST_UMEM: {
                uintptr_t a =
                    val + static_cast<uintptr_t>(st->offset) + static_cast<uintptr_t>(i) * st->size;
                if (copy_from_user_nofault(edest, reinterpret_cast<const void *>(a), st->size))
                    std::memset(edest, 0, st->size);
                break;
            }
            default:
                break;
            }
            if (bf) apply_bitfield(bf, edest);
        }
        return total;
    }

fault:
    if (dest) {
        // Scalars stay zero; strings get __data_loc with length 0.
        const fetch_insn *st = prog.code.data();
        while (st->op != fetch_op::END && st->op != fetch_op::ST_STRING &&
               st->op != fetch_op::ST_USTRING && st->op != fetch_op::ST_SYMSTR)
            st++;
        if (st->op != fetch_op::END) {
            uint32_t loc = make_data_loc(0, static_cast<uint32_t>(dyn_off));
            for (size_t off = 0; off + 4 <= prog.field_size; off += 4)
                std::memcpy(dest + off, &loc, sizeof(loc));
        }
    }
    return 0;
}

} // namespace

DPROBE_NOPROBE size_t fetch_run(const fetch_prog &prog, const fetch_context &ctx, uint8_t *record,
                                size_t field_off, size_t dyn_off, size_t dyn_avail) noexcept
{
    if (!record) return 0;
    return run_prog(prog, ctx, record, field_off, dyn_off, dyn_avail);
}

DPROBE_NOPROBE size_t fetch_dynamic_size(const fetch_prog &prog, const fetch_context &ctx) noexcept
{
    return run_prog(prog, ctx, nullptr, 0, 0, SIZE_MAX);
}

DPROBE_NOPROBE size_t store_trace_args(std::span<const probe_arg> args, uint32_t args_size,
                                       const fetch_context &ctx, uint8_t *record, size_t args_off,
                                       size_t capacity) noexcept
{
    size_t dyn = args_off + args_size;
    if (dyn > capacity) return 0;
    for (const auto &a : args) {
        size_t avail = capacity - dyn;
        dyn += fetch_run(a.prog, ctx, record, args_off + a.offset, dyn, avail);
    }
    return dyn;
}

DPROBE_NOPROBE size_t trace_args_dynamic_size(std::span<const probe_arg> args,
                                              const fetch_context &ctx) noexcept
{
    size_t n = 0;
    for (const auto &a : args)
        if (a.dynamic) n += fetch_dynamic_size(a.prog, ctx);
    return n;
}

DPROBE_NOPROBE void store_entry_args(const entry_arg_table &eargs, const pt_regs *regs,
                                     void *edata) noexcept
{
    auto *out = static_cast<unsigned char *>(edata);
    fetch_context ctx;
    ctx.regs = regs;
    for (uint16_t i = 0; i < eargs.count; i++) {
        unsigned long v = 0;
        if (!read_arg(ctx, eargs.arg[i], v)) v = 0;
        std::memcpy(out + i * sizeof(v), &v, sizeof(v));
    }
}

void fetch_install_fault_handler()
{
    static std::once_flag once;
    std::call_once(once, [] {
        signal_chain_add_hook(SIGSEGV, uaccess_fixup_fault);
        signal_chain_add_hook(SIGBUS, uaccess_fixup_fault);
    });
}

} // namespace dprobe
