#include "arch/x86_64/insn_analysis.h"

#include "arch/x86_64/jump_table.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>

namespace dprobe::arch
{

namespace
{

std::string hex(uintptr_t v)
{
    char buf[24];
    std::snprintf(buf, sizeof(buf), "0x%" PRIxPTR, v);
    return buf;
}

// A tail call through one pointer slot: jmp *disp(%rip), no index.
bool is_pointer_tail_call(const insn &i)
{
    return i.k == insn::jmp_indirect && i.ind_is_mem && i.is_rip_relative && i.ind_index < 0;
}

// Scans a possible table at TABLE (see analyze_function): entries of ENTRY bytes, relative to
// BASE (4-byte) or absolute (8-byte), adding the targets inside the function to FA.
// False when the scan ran into the limit (then it proves nothing).
bool scan_table(func_analysis &fa, const mem_view &mem, uintptr_t from, uintptr_t base,
                uintptr_t table, size_t entry)
{
    constexpr size_t max_entries = 4096;
    for (size_t e = 0; e < max_entries; ++e) {
        uintptr_t t = 0;
        if (entry == 4) {
            int32_t rel;
            if (!mem.read(table + 4 * e, &rel, sizeof rel)) return true;
            t = base + static_cast<intptr_t>(rel);
        } else {
            uint64_t abs;
            if (!mem.read(table + 8 * e, &abs, sizeof abs)) return true;
            t = abs;
        }
        if (!mem.is_code(t)) return true; // past the table's end
        if (t > fa.start && t < fa.start + fa.size) fa.jump_targets.push_back({from, t});
    }
    return false;
}

// The over-approximation of every unresolved indirect jump's targets (analyze_function).
bool scan_tables(func_analysis &fa, const mem_view &mem)
{
    const uintptr_t from = fa.indirect_jumps.front();
    std::vector<int64_t> disps = table_load_disps(fa);
    disps.push_back(0);
    std::sort(disps.begin(), disps.end());
    disps.erase(std::unique(disps.begin(), disps.end()), disps.end());
    std::vector<uintptr_t> bases;
    for (const insn &i : fa.insns)
        if (i.is_rip_relative && (i.rip_target < fa.start || i.rip_target >= fa.start + fa.size) &&
            std::strcmp(i.mnemonic_name(), "lea") == 0)
            bases.push_back(i.rip_target);
    std::sort(bases.begin(), bases.end());
    bases.erase(std::unique(bases.begin(), bases.end()), bases.end());
    for (uintptr_t b : bases)
        for (int64_t d : disps)
            if (!scan_table(fa, mem, from, b, b + static_cast<uintptr_t>(d), 4)) return false;
    return true;
}

} // namespace

const insn *func_analysis::find(uintptr_t addr) const noexcept
{
    auto it = std::lower_bound(insns.begin(), insns.end(), addr,
                               [](const insn &i, uintptr_t a) { return i.addr < a; });
    return it != insns.end() && it->addr == addr ? &*it : nullptr;
}

namespace
{
struct live_view final : mem_view {
    bool read(uintptr_t addr, void *out, size_t len) const noexcept override
    {
        std::memcpy(out, reinterpret_cast<const void *>(addr), len);
        return true;
    }
};
} // namespace

const mem_view &live_memory() noexcept
{
    static const live_view v;
    return v;
}

func_analysis analyze_function(const void *code, uintptr_t start, size_t size, const mem_view *mem)
{
    func_analysis fa;
    fa.start = start;
    fa.size = size;
    const auto *p = static_cast<const uint8_t *>(code);
    size_t off = 0;
    while (off < size) {
        auto i = insn_decode(p + off, size - off, start + off);
        if (!i) {
            fa.decode_failed = true;
            fa.decode_fail_addr = start + off;
            break;
        }
        if (i->is_relative_branch() && i->branch_target >= start && i->branch_target < start + size)
            fa.jump_targets.push_back({i->addr, i->branch_target});
        // An address of this function's own code computed here (lea label(%rip)): what a
        // computed goto (&&label) looks like; count it as a possible branch target.
        if (i->is_rip_relative && i->rip_target > start && i->rip_target < start + size &&
            std::strcmp(i->mnemonic_name(), "lea") == 0)
            fa.jump_targets.push_back({i->addr, i->rip_target});
        if (i->k == insn::jmp_indirect && !is_pointer_tail_call(*i)) {
            fa.has_indirect_jump = true;
            fa.indirect_jumps.push_back(i->addr);
        }
        off += i->len;
        fa.insns.push_back(*i);
    }
    // Jump tables whose targets can be read make their jump known (read at their address,
    // through MEM or in this process when the code is the live text).
    if (!mem && code == reinterpret_cast<const void *>(start)) mem = &live_memory();
    if (fa.has_indirect_jump && !fa.decode_failed && mem) {
        std::vector<uintptr_t> unresolved;
        for (uintptr_t at : fa.indirect_jumps) {
            const insn *j = fa.find(at);
            const size_t k = j ? static_cast<size_t>(j - fa.insns.data()) : 0;
            auto targets = j ? jump_table_targets(fa, k, *mem) : std::nullopt;
            if (!targets && j && is_pointer_tail_jump(fa, k)) continue; // leaves the function
            if (!targets) {
                unresolved.push_back(at);
                continue;
            }
            for (uintptr_t t : *targets)
                fa.jump_targets.push_back({at, t});
        }
        fa.indirect_jumps = unresolved;
        fa.has_indirect_jump = !unresolved.empty();
        const bool all_relative =
            std::all_of(unresolved.begin(), unresolved.end(), [&](uintptr_t at) {
                const insn *j = fa.find(at);
                return j && is_relative_table_jump(fa, static_cast<size_t>(j - fa.insns.data()));
            });
        if (fa.has_indirect_jump && all_relative && mem->knows_code() && scan_tables(fa, *mem)) {
            fa.indirect_jumps.clear();
            fa.has_indirect_jump = false;
        }
    }
    std::sort(fa.jump_targets.begin(), fa.jump_targets.end(),
              [](const branch_edge &a, const branch_edge &b) {
                  return a.to < b.to || (a.to == b.to && a.from < b.from);
              });
    return fa;
}

const char *optimize_refusal_name(optimize_refusal r) noexcept
{
    switch (r) {
    case optimize_refusal::none:
        return "none";
    case optimize_refusal::outside_function:
        return "outside_function";
    case optimize_refusal::not_boundary:
        return "not_boundary";
    case optimize_refusal::decode_failed:
        return "decode_failed";
    case optimize_refusal::crosses_end:
        return "crosses_end";
    case optimize_refusal::jump_into_region:
        return "jump_into_region";
    case optimize_refusal::indirect_jump:
        return "indirect_jump";
    case optimize_refusal::cannot_relocate:
        return "cannot_relocate";
    case optimize_refusal::endbr_in_region:
        return "endbr_in_region";
    case optimize_refusal::exit_not_last:
        return "exit_not_last";
    case optimize_refusal::return_into_region:
        return "return_into_region";
    }
    return "?";
}

optimize_check can_optimize_region(const func_analysis &fa, uintptr_t addr, size_t min_len,
                                   std::span<const uintptr_t> extra_targets)
{
    optimize_check c;
    c.addr = addr;
    const auto refuse = [&](optimize_refusal r, std::string msg) {
        c.reason = r;
        c.message = std::move(msg);
        c.region.clear();
        c.len = 0;
        return std::move(c);
    };

    if (addr < fa.start || addr >= fa.start + fa.size)
        return refuse(optimize_refusal::outside_function,
                      "address " + hex(addr) + " is outside the function");
    const insn *first = fa.find(addr);
    if (!first) {
        if (fa.decode_failed && addr >= fa.decode_fail_addr)
            return refuse(optimize_refusal::decode_failed,
                          "the function could not be decoded at " + hex(fa.decode_fail_addr));
        return refuse(optimize_refusal::not_boundary,
                      "address " + hex(addr) + " is not an instruction boundary");
    }

    // The region: whole instructions from addr covering min_len bytes.
    size_t idx = static_cast<size_t>(first - fa.insns.data());
    size_t len = 0;
    while (len < min_len) {
        if (idx >= fa.insns.size() || fa.insns[idx].addr + fa.insns[idx].len > fa.start + fa.size) {
            if (fa.decode_failed)
                return refuse(optimize_refusal::decode_failed,
                              "the function could not be decoded at " + hex(fa.decode_fail_addr));
            return refuse(optimize_refusal::crosses_end, "region crosses the end of the function");
        }
        c.region.push_back(fa.insns[idx]);
        len += fa.insns[idx].len;
        ++idx;
    }
    c.len = len;

    for (size_t n = 0; n < c.region.size(); ++n) {
        const insn &i = c.region[n];
        const bool last = n + 1 == c.region.size();
        if (i.k == insn::endbr)
            return refuse(optimize_refusal::endbr_in_region,
                          "an indirect-branch landing pad (endbr64) is in the region at " +
                              hex(i.addr));
        if (const char *why = insn_ool_refusal(i))
            return refuse(optimize_refusal::cannot_relocate,
                          std::string("instruction cannot run out of line: ") + i.mnemonic_name() +
                              " at " + hex(i.addr) + " (" + why + ")");
        if (!last && i.is_unconditional_exit())
            return refuse(optimize_refusal::exit_not_last,
                          std::string("the region would extend past ") + i.mnemonic_name() +
                              " at " + hex(i.addr) +
                              " (only the last instruction may be a jmp or ret)");
        if (!last && (i.k == insn::call_rel || i.k == insn::call_indirect || i.k == insn::syscall))
            return refuse(optimize_refusal::return_into_region,
                          std::string("the return address of ") + i.mnemonic_name() + " at " +
                              hex(i.addr) + " would lie inside the region");
    }

    if (fa.decode_failed)
        return refuse(optimize_refusal::decode_failed,
                      "the function could not be decoded at " + hex(fa.decode_fail_addr) +
                          " (branches into the region cannot be ruled out)");
    if (fa.has_indirect_jump)
        return refuse(optimize_refusal::indirect_jump,
                      "indirect jump in the function (targets unknown) at " +
                          hex(fa.indirect_jumps.front()));

    const uintptr_t lo = addr + 1, hi = addr + len; // interior: [lo, hi)
    auto it = std::lower_bound(fa.jump_targets.begin(), fa.jump_targets.end(), lo,
                               [](const branch_edge &e, uintptr_t a) { return e.to < a; });
    if (it != fa.jump_targets.end() && it->to < hi)
        return refuse(optimize_refusal::jump_into_region,
                      "a branch in the function targets the inside of the region (at " +
                          hex(it->to) + ", from " + hex(it->from) + ")");
    for (uintptr_t t : extra_targets)
        if (t >= lo && t < hi)
            return refuse(optimize_refusal::jump_into_region,
                          "a known branch target lies inside the region (at " + hex(t) + ")");
    return c;
}

} // namespace dprobe::arch
