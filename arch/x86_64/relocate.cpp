#include "arch/x86_64/relocate.h"

#include <Zydis/Zydis.h>

#include <cinttypes>
#include <cstdio>
#include <cstring>

namespace dprobe::arch
{

namespace
{

constexpr int fail(relocate_error::code_t c)
{
    return -static_cast<int>(c);
}

bool fits_i32(int64_t v)
{
    return v >= INT32_MIN && v <= INT32_MAX;
}

// Encodes REQ for address AT at OUT+*LEN, advancing *LEN. REQ holds relative values.
bool encode_at(const ZydisEncoderRequest &req, uint8_t *out, size_t cap, size_t *len) noexcept
{
    ZyanUSize n = cap - *len;
    if (!ZYAN_SUCCESS(ZydisEncoderEncodeInstruction(&req, out + *len, &n))) return false;
    *len += n;
    return true;
}

// Encodes REQ, whose relative field REL (a branch immediate or a RIP displacement) must make
// the instruction reach ABS from address AT + *LEN. Zydis' absolute mode mispredicts the
// length with some prefixes (bnd), so encode once to learn the length, then with the final
// value, and insist the length did not change.
// Returns 0, or a negative relocate_error code (out_of_range when ABS is not reachable).
int encode_relative(ZydisEncoderRequest &req, int64_t &rel, uintptr_t abs, uintptr_t at,
                    uint8_t *out, size_t cap, size_t *len) noexcept
{
    const uintptr_t here = at + *len;
    size_t trial = *len;
    rel = 0;
    if (!encode_at(req, out, cap, &trial)) return fail(relocate_error::encode_failed);
    const size_t n = trial - *len;
    const int64_t v = static_cast<int64_t>(abs - (here + n));
    if (!fits_i32(v)) return fail(relocate_error::out_of_range);
    rel = v;
    trial = *len;
    if (!encode_at(req, out, cap, &trial) || trial - *len != n)
        return fail(relocate_error::encode_failed);
    *len = trial;
    return 0;
}

ZydisEncoderRequest request(ZydisMnemonic m) noexcept
{
    ZydisEncoderRequest req;
    std::memset(&req, 0, sizeof(req));
    req.machine_mode = ZYDIS_MACHINE_MODE_LONG_64;
    req.mnemonic = m;
    return req;
}

// jmp/call rel32 to an absolute target; 0 or a negative relocate_error code.
int encode_branch32(ZydisMnemonic m, uintptr_t target, uintptr_t at, uint8_t *out, size_t cap,
                    size_t *len) noexcept
{
    auto req = request(m);
    req.branch_type = ZYDIS_BRANCH_TYPE_NEAR;
    req.branch_width = ZYDIS_BRANCH_WIDTH_32;
    req.operand_count = 1;
    req.operands[0].type = ZYDIS_OPERAND_TYPE_IMMEDIATE;
    return encode_relative(req, req.operands[0].imm.s, target, at, out, cap, len);
}

// Pushes the 64-bit VALUE without touching flags or any register but rsp:
// `push $imm32` (sign-extended to 64 bits), then the high half fixed by `movl $hi, 4(%rsp)`.
bool encode_push64(uint64_t value, uintptr_t at, uint8_t *out, size_t cap, size_t *len) noexcept
{
    const auto lo = static_cast<int32_t>(static_cast<uint32_t>(value));
    auto push = request(ZYDIS_MNEMONIC_PUSH);
    push.operand_size_hint = ZYDIS_OPERAND_SIZE_HINT_64;
    push.operand_count = 1;
    push.operands[0].type = ZYDIS_OPERAND_TYPE_IMMEDIATE;
    push.operands[0].imm.s = lo;
    if (!encode_at(push, out, cap, len)) return false;
    if (static_cast<uint64_t>(static_cast<int64_t>(lo)) == value) return true;
    auto mov = request(ZYDIS_MNEMONIC_MOV);
    mov.operand_count = 2;
    mov.operands[0].type = ZYDIS_OPERAND_TYPE_MEMORY;
    mov.operands[0].mem.base = ZYDIS_REGISTER_RSP;
    mov.operands[0].mem.displacement = 4;
    mov.operands[0].mem.size = 4;
    mov.operands[1].type = ZYDIS_OPERAND_TYPE_IMMEDIATE;
    mov.operands[1].imm.u = value >> 32;
    return encode_at(mov, out, cap, len);
}

bool decode_request(const insn &i, ZydisEncoderRequest &req) noexcept
{
    ZydisDecoder dec;
    ZydisDecodedInstruction zi;
    ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
    if (!ZYAN_SUCCESS(ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64)) ||
        !ZYAN_SUCCESS(ZydisDecoderDecodeFull(&dec, i.bytes, i.len, &zi, ops)))
        return false;
    return ZYAN_SUCCESS(
        ZydisEncoderDecodedInstructionToEncoderRequest(&zi, ops, zi.operand_count_visible, &req));
}

} // namespace

int relocate_one(const insn &i, uintptr_t at, uint8_t (&out)[MAX_RELOCATED_INSN_SIZE],
                 const char **why) noexcept
{
    constexpr size_t cap = MAX_RELOCATED_INSN_SIZE;
    size_t len = 0;
    if (const char *r = insn_ool_refusal(i)) {
        *why = r;
        return fail(relocate_error::unsupported);
    }
    const auto out_of_range = [&](const char *what) {
        *why = what;
        return fail(relocate_error::out_of_range);
    };
    const auto encode_failed = [&]() {
        *why = "encoder failure";
        return fail(relocate_error::encode_failed);
    };

    switch (i.k) {
    case insn::jmp_rel:
    case insn::jcc_rel: {
        ZydisEncoderRequest req;
        if (!decode_request(i, req)) return encode_failed();
        req.branch_type = ZYDIS_BRANCH_TYPE_NEAR;
        req.branch_width = ZYDIS_BRANCH_WIDTH_32;
        const int e =
            encode_relative(req, req.operands[0].imm.s, i.branch_target, at, out, cap, &len);
        if (e == fail(relocate_error::out_of_range))
            return out_of_range("branch target beyond +-2 GiB of the copy");
        if (e) return encode_failed();
        return static_cast<int>(len);
    }
    case insn::loop_rel: {
        // <op> +2 (skip the short jmp) ; jmp +5 (fall through: skip the long jmp) ;
        // jmp rel32 target. The rel8 is the instruction's last byte.
        const uintptr_t jmp_at = at + i.len + JMP8_INSN_SIZE;
        auto j = make_jmp_rel32(jmp_at, i.branch_target);
        if (!j) return out_of_range("branch target beyond +-2 GiB of the copy");
        std::memcpy(out, i.bytes, i.len);
        out[i.len - 1] = JMP8_INSN_SIZE;
        out[i.len] = JMP8_INSN_OPCODE;
        out[i.len + 1] = JMP32_INSN_SIZE;
        std::memcpy(out + i.len + JMP8_INSN_SIZE, j->data(), j->size());
        return static_cast<int>(i.len + JMP8_INSN_SIZE + JMP32_INSN_SIZE);
    }
    case insn::call_rel:
        if (!encode_push64(i.next(), at, out, cap, &len)) return encode_failed();
        if (const int e = encode_branch32(ZYDIS_MNEMONIC_JMP, i.branch_target, at, out, cap, &len))
            return e == fail(relocate_error::out_of_range)
                       ? out_of_range("call target beyond +-2 GiB of the copy")
                       : encode_failed();
        return static_cast<int>(len);
    case insn::call_indirect: {
        ZydisEncoderRequest req;
        if (!decode_request(i, req)) return encode_failed();
        if (!encode_push64(i.next(), at, out, cap, &len)) return encode_failed();
        req.mnemonic = ZYDIS_MNEMONIC_JMP;
        auto &op = req.operands[0];
        if (op.type == ZYDIS_OPERAND_TYPE_MEMORY && op.mem.base == ZYDIS_REGISTER_RSP)
            op.mem.displacement += 8; // read after our push moved rsp
        if (op.type == ZYDIS_OPERAND_TYPE_MEMORY && op.mem.base == ZYDIS_REGISTER_RIP) {
            const int e =
                encode_relative(req, op.mem.displacement, i.rip_target, at, out, cap, &len);
            if (e == fail(relocate_error::out_of_range))
                return out_of_range("rip-relative operand beyond +-2 GiB of the copy");
            if (e) return encode_failed();
        } else if (!encode_at(req, out, cap, &len)) {
            return encode_failed();
        }
        return static_cast<int>(len);
    }
    default:
        break;
    }

    // Everything else runs as is; a RIP-relative disp32 is re-aimed at the same address.
    std::memcpy(out, i.bytes, i.len);
    if (i.is_rip_relative) {
        const int64_t d = static_cast<int64_t>(i.rip_target - (at + i.len));
        if (!fits_i32(d)) return out_of_range("rip-relative operand beyond +-2 GiB of the copy");
        const auto d32 = static_cast<int32_t>(d);
        std::memcpy(out + i.disp_offset, &d32, sizeof(d32));
    }
    return i.len;
}

uintptr_t relocated::copy_of(std::span<const insn> region, uintptr_t orig_addr) const noexcept
{
    for (size_t n = 0; n < region.size() && n < insn_offsets.size(); ++n)
        if (region[n].addr == orig_addr) return new_addr + insn_offsets[n];
    return 0;
}

relocate_result relocate_insns(std::span<const insn> region, uintptr_t new_addr,
                               uintptr_t resume_addr, bool append_jmp_back)
{
    relocate_result res;
    const auto set_error = [&](relocate_error::code_t c, uintptr_t where, std::string msg) {
        res.error.code = c;
        res.error.insn_addr = where;
        res.error.message = std::move(msg);
        return std::move(res);
    };
    if (region.empty()) return set_error(relocate_error::empty, 0, "no instructions to relocate");

    relocated r;
    r.new_addr = new_addr;
    for (const insn &i : region) {
        uint8_t buf[MAX_RELOCATED_INSN_SIZE];
        const char *why = "";
        const uintptr_t at = new_addr + r.bytes.size();
        const int n = relocate_one(i, at, buf, &why);
        if (n < 0) {
            const auto code = static_cast<relocate_error::code_t>(-n);
            char msg[256];
            if (code == relocate_error::unsupported)
                std::snprintf(msg, sizeof(msg),
                              "instruction cannot run out of line: %s at 0x%" PRIxPTR " (%s)",
                              i.mnemonic_name(), i.addr, why);
            else
                std::snprintf(msg, sizeof(msg),
                              "cannot relocate %s at 0x%" PRIxPTR " to 0x%" PRIxPTR ": %s",
                              i.mnemonic_name(), i.addr, at, why);
            return set_error(code, i.addr, msg);
        }
        r.insn_offsets.push_back(static_cast<uint32_t>(r.bytes.size()));
        r.bytes.insert(r.bytes.end(), buf, buf + n);
    }
    if (append_jmp_back) {
        const uintptr_t at = new_addr + r.bytes.size();
        auto j = make_jmp_rel32(at, resume_addr);
        if (!j) {
            char msg[160];
            std::snprintf(msg, sizeof(msg),
                          "cannot jump back from 0x%" PRIxPTR " to 0x%" PRIxPTR ": beyond +-2 GiB",
                          at, resume_addr);
            return set_error(relocate_error::out_of_range, resume_addr, msg);
        }
        r.jmp_back_offset = static_cast<uint32_t>(r.bytes.size());
        r.bytes.insert(r.bytes.end(), j->begin(), j->end());
    }
    res.copy = std::move(r);
    return res;
}

} // namespace dprobe::arch
