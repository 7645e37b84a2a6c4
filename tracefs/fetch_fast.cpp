// Compiling fetch programs into fetch_fast_stores, and running them (fetch_fast.h): the
// shapes a store runs are read off the program's instructions, so the compiled form cannot
// disagree with the interpreter about what an argument means.
#include "tracefs/fetch_fast.h"

#include "core/compiler.h"

#include "arch/x86_64/uaccess.h"

#include <dprobe/ptrace.h>

#include <cstddef>
#include <cstring>
#include <iterator>

namespace dprobe
{

bool fetch_fast_compile(std::span<const probe_arg> args, size_t args_off,
                        std::vector<fetch_fast_store> &out)
{
    // The interpreter's ARG: the SysV argument registers.
    static constexpr uint32_t arg_regs[] = {offsetof(pt_regs, di), offsetof(pt_regs, si),
                                            offsetof(pt_regs, dx), offsetof(pt_regs, cx),
                                            offsetof(pt_regs, r8), offsetof(pt_regs, r9)};
    out.clear();
    for (const probe_arg &a : args) {
        if (a.count || a.dynamic) return false;
        const fetch_insn *c = a.prog.code.data();
        if (c->op == fetch_op::NOP_SYMBOL) c++;
        fetch_fast_store f{};
        switch (c->op) {
        case fetch_op::REG:
            if (c->param > offsetof(pt_regs, ss) || c->param % sizeof(long)) return false;
            f.src = fetch_fast_store::REGS;
            f.param = c->param;
            break;
        case fetch_op::ARG:
            if (c->param >= std::size(arg_regs)) return false;
            f.src = fetch_fast_store::REGS;
            f.param = arg_regs[c->param];
            break;
        case fetch_op::RETVAL:
            f.src = fetch_fast_store::REGS;
            f.param = offsetof(pt_regs, ax);
            break;
        case fetch_op::STACKP:
            f.src = fetch_fast_store::REGS;
            f.param = offsetof(pt_regs, sp);
            break;
        case fetch_op::IMM:
            f.src = fetch_fast_store::IMM;
            f.imm = c->immediate;
            break;
        case fetch_op::EDATA:
            f.src = fetch_fast_store::EDATA;
            f.param = static_cast<uint32_t>(c->offset);
            break;
        default:
            return false;
        }
        const fetch_insn *st = c + 1;
        if (st->op == fetch_op::ST_RAW) {
            f.mem = false;
        } else if (st->op == fetch_op::ST_MEM || st->op == fetch_op::ST_UMEM) {
            f.mem = true;
            f.mem_off = st->offset;
        } else {
            return false;
        }
        if ((st + 1)->op != fetch_op::END || !st->size || st->size > 8 ||
            a.prog.field_size != st->size)
            return false;
        f.size = st->size;
        f.dest = static_cast<uint16_t>(args_off + a.offset);
        out.push_back(f);
    }
    return true;
}

DPROBE_NOPROBE void fetch_fast_run(std::span<const fetch_fast_store> stores,
                                   const fetch_context &ctx, uint8_t *rec) noexcept
{
    const auto *regs = reinterpret_cast<const char *>(ctx.regs);
    for (const fetch_fast_store &f : stores) {
        unsigned long v = 0;
        switch (f.src) {
        case fetch_fast_store::REGS:
            std::memcpy(&v, regs + f.param, sizeof(v));
            break;
        case fetch_fast_store::IMM:
            v = f.imm;
            break;
        case fetch_fast_store::EDATA:
            if (!ctx.edata) {
                std::memset(rec + f.dest, 0, f.size);
                continue;
            }
            std::memcpy(&v, static_cast<const char *>(ctx.edata) + f.param, sizeof(v));
            break;
        }
        uint8_t *dst = rec + f.dest;
        if (f.mem) {
            if (copy_from_user_nofault(dst, reinterpret_cast<const void *>(v + f.mem_off), f.size))
                std::memset(dst, 0, f.size);
        } else {
            switch (f.size) { // little-endian: the low bytes
            case 8:
                std::memcpy(dst, &v, 8);
                break;
            case 4: {
                uint32_t x = uint32_t(v);
                std::memcpy(dst, &x, 4);
                break;
            }
            case 2: {
                uint16_t x = uint16_t(v);
                std::memcpy(dst, &x, 2);
                break;
            }
            default:
                std::memcpy(dst, &v, f.size);
                break;
            }
        }
    }
}

} // namespace dprobe
