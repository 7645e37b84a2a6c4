// The original bytes of patched code (see text_journal.h). Notes are appended as they come
// (a batch of thousands of sites must not pay a sorted insert each); when they have doubled
// since the last compaction, they are reduced to one value per byte, the earliest.
#include "core/text_journal.h"

#include <algorithm>
#include <cstring>

namespace dprobe
{
namespace
{

struct note {
    uintptr_t addr;
    uint64_t seq;
    uint8_t len;
    uint8_t bytes[sizeof(arch::text_poke_req::bytes)];
};

struct journal {
    std::vector<note> notes;
    uint64_t seq = 0;
    size_t compacted = 0; // notes right after the last compaction
};

journal &jr()
{
    static auto *j = new journal; // freed with the runtime's memory (never destroyed)
    return *j;
}

struct byte_note {
    uintptr_t addr;
    uint64_t seq;
    uint8_t value;
};

// One value per byte, the earliest note's, as runs of consecutive bytes.
void compact(journal &j)
{
    std::vector<byte_note> bytes;
    for (const note &n : j.notes)
        for (unsigned i = 0; i < n.len; i++)
            bytes.push_back({n.addr + i, n.seq, n.bytes[i]});
    std::sort(bytes.begin(), bytes.end(), [](const byte_note &a, const byte_note &b) {
        return a.addr != b.addr ? a.addr < b.addr : a.seq < b.seq;
    });
    std::vector<note> out;
    for (size_t i = 0; i < bytes.size(); i++) {
        if (i && bytes[i].addr == bytes[i - 1].addr) continue; // a later note of that byte
        note *last = out.empty() ? nullptr : &out.back();
        if (last && last->addr + last->len == bytes[i].addr && last->len < sizeof last->bytes) {
            last->bytes[last->len++] = bytes[i].value;
            continue;
        }
        note n{bytes[i].addr, 0, 1, {}};
        n.bytes[0] = bytes[i].value;
        out.push_back(n);
    }
    j.notes = std::move(out);
    j.compacted = j.notes.size();
}

} // namespace

void text_journal_note(uintptr_t addr, size_t len)
{
    journal &j = jr();
    while (len) {
        note n{addr, ++j.seq, static_cast<uint8_t>(std::min(len, sizeof n.bytes)), {}};
        std::memcpy(n.bytes, reinterpret_cast<const void *>(addr), n.len);
        j.notes.push_back(n);
        addr += n.len;
        len -= n.len;
    }
    if (j.notes.size() > 2 * j.compacted + 1024) compact(j);
}

std::vector<arch::text_poke_req> text_journal_restore_reqs()
{
    journal &j = jr();
    compact(j);
    std::vector<arch::text_poke_req> reqs;
    for (const note &n : j.notes) {
        const auto *now = reinterpret_cast<const uint8_t *>(n.addr);
        for (unsigned i = 0; i < n.len;) {
            if (now[i] == n.bytes[i]) {
                i++;
                continue;
            }
            unsigned e = i;
            while (e < n.len && now[e] != n.bytes[e])
                e++;
            arch::text_poke_req r;
            r.addr = n.addr + i;
            r.len = static_cast<uint8_t>(e - i);
            std::memcpy(r.bytes, n.bytes + i, r.len);
            reqs.push_back(r);
            i = e;
        }
    }
    return reqs;
}

size_t text_journal_bytes()
{
    journal &j = jr();
    compact(j);
    size_t n = 0;
    for (const note &x : j.notes)
        n += x.len;
    return n;
}

} // namespace dprobe
