// Compile units' producers, for callers_may_rely_on_clobbers() (see sym_producer.h).
#include "core/sym_producer.h"

#include "core/symbols.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

namespace dprobe
{

namespace
{

struct unit_range {
    uint64_t lo, hi; // link-time addresses [lo, hi)
    bool ipa_ra;     // producer_allows_ipa_ra() of its unit
};

// One object's units, by address (overlaps do not occur in well-formed DWARF; a lookup takes
// the first range that contains the address).
struct object_units {
    std::vector<unit_range> ranges;
};

std::mutex units_mutex;

void read_units(const loaded_object &o, object_units &out)
{
    if (o.path.empty()) return;
    const int fd = ::open(o.path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    Dwarf *dw = dwarf_begin(fd, DWARF_C_READ);
    if (dw) {
        Dwarf_Off off = 0, next = 0;
        size_t header = 0;
        while (dwarf_nextcu(dw, off, &next, &header, nullptr, nullptr, nullptr) == 0) {
            Dwarf_Die cu;
            if (dwarf_offdie(dw, off + header, &cu)) {
                Dwarf_Attribute a;
                const char *p = dwarf_formstring(dwarf_attr(&cu, DW_AT_producer, &a));
                const bool ipa_ra = producer_allows_ipa_ra(p ? p : "");
                Dwarf_Addr base = 0, lo = 0, hi = 0;
                for (ptrdiff_t r = 0; (r = dwarf_ranges(&cu, r, &base, &lo, &hi)) > 0;)
                    if (hi > lo) out.ranges.push_back({lo, hi, ipa_ra});
            }
            off = next;
        }
        dwarf_end(dw);
    }
    ::close(fd);
    std::sort(out.ranges.begin(), out.ranges.end(),
              [](const unit_range &a, const unit_range &b) { return a.lo < b.lo; });
}

const object_units &units_of(const loaded_object &o)
{
    // Never shrinks: an object id is never reused.
    static auto *cache = new std::map<uint64_t, std::unique_ptr<object_units>>;
    auto it = cache->find(o.id);
    if (it != cache->end()) return *it->second;
    auto u = std::make_unique<object_units>();
    read_units(o, *u);
    return *cache->emplace(o.id, std::move(u)).first->second;
}

// The option OPT appears in P as a word of its own (options are separated by spaces).
bool has_option(std::string_view p, std::string_view opt)
{
    for (size_t at = p.find(opt); at != std::string_view::npos; at = p.find(opt, at + 1)) {
        const size_t end = at + opt.size();
        if (at > 0 && p[at - 1] == ' ' && (end == p.size() || p[end] == ' ' || p[end] == '='))
            return true;
    }
    return false;
}

} // namespace

bool producer_allows_ipa_ra(std::string_view p)
{
    // clang: interprocedural register allocation is off unless asked for (-mllvm -enable-ipra).
    if (p.find("clang") != std::string_view::npos) return p.find("enable-ipra") != p.npos;
    // GCC's C, C++, Fortran... front ends: "GNU C17 12.2.0 -mtune=generic -O2 ...". Anything
    // else (the assembler's "GNU AS 2.40", an unknown compiler) may do as it likes.
    if (p.substr(0, 4) != "GNU " || p.substr(0, 7) == "GNU AS ") return true;
    if (has_option(p, "-fipa-ra")) return true; // asked for explicitly
    if (has_option(p, "-fpatchable-function-entry") || has_option(p, "-pg") ||
        has_option(p, "-fno-ipa-ra"))
        return false;
    // The last -O level counts; -fipa-ra starts at -O2 (and -Os); no -O at all is -O0.
    const size_t o = p.rfind(" -O");
    if (o == std::string_view::npos) return false;
    const char level = o + 3 < p.size() ? p[o + 3] : '1';
    return !(level == '0' || level == '1' || level == ' ' || level == 'g');
}

bool callers_may_rely_on_clobbers(const loaded_object &obj, uintptr_t func)
{
    if (obj.is_vdso) return true;
    std::lock_guard<std::mutex> g(units_mutex);
    const object_units &u = units_of(obj);
    const uint64_t vaddr = func - obj.load_bias;
    auto it = std::upper_bound(u.ranges.begin(), u.ranges.end(), vaddr,
                               [](uint64_t v, const unit_range &r) { return v < r.lo; });
    // Ranges sorted by start: the candidates start at or below VADDR; units' ranges do not
    // nest, so the nearest one is the only one that can contain it.
    if (it == u.ranges.begin()) return true;
    --it;
    return vaddr < it->hi ? it->ipa_ra : true;
}

} // namespace dprobe
