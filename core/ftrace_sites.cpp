// Finding the patch sites of each loaded object, and turning __fentry__ calls into NOPs.
#include "core/ftrace_internal.h"
#include "core/self_objects.h"

#include "arch/x86_64/ftrace_frame.h"

#include <cstddef>

#include "arch/x86_64/ftrace_make.h"
#include "arch/x86_64/insn_bytes.h"
#include "core/dl_notify.h"
#include "core/text_poke.h"

#include <algorithm>
#include <cstring>
#include <sys/mman.h>
#include <unordered_set>

extern "C" void __fentry__();

namespace dprobe
{

// The trampolines read these fields of a site record by offset.
static_assert(offsetof(ftrace_site, ip) == SITE_IP);
static_assert(offsetof(ftrace_site, body) == SITE_BODY);
static_assert(offsetof(ftrace_site, light) == SITE_LIGHT);

ftrace_state &ftrace_st()
{
    static ftrace_state *st = new ftrace_state; // never destroyed: sites outlive exit()
    return *st;
}

const char *site_kind_name(site_kind k)
{
    switch (k) {
    case site_kind::fentry:
        return "fentry";
    case site_kind::fentry6:
        return "fentry";
    case site_kind::nop:
        return "patchable";
    case site_kind::jump:
        return "jump";
    }
    return "?";
}

namespace
{

constexpr const char *k_late_sled = "one-byte NOP sled found after other threads started";

// Copies up to 16 bytes of code at IP that lie inside the object's executable segment.
bool read_entry(const loaded_object &obj, uintptr_t ip, uint8_t (&buf)[16])
{
    for (auto &s : obj.segments) {
        if (!(s.prot & PROT_EXEC) || ip < s.start || ip >= s.end) continue;
        size_t n = std::min<size_t>(16, s.end - ip);
        std::memset(buf, 0, sizeof buf);
        std::memcpy(buf, reinterpret_cast<const void *>(ip), n);
        return n >= 6;
    }
    return false;
}

bool object_may_have_sites(const loaded_object &obj, uintptr_t fentry)
{
    if (obj.is_vdso) return false;
    return !obj.fentry_got_slots.empty() || !obj.patchable_entries.empty() || obj.contains(fentry);
}

} // namespace

// Scans OBJ and records its sites; __fentry__ calls (and gcc's one-byte NOP sleds, when no
// other thread can be inside one) go into NOPS to be rewritten. UNREACHED: no thread can
// have run OBJ's code yet (ftrace_loader_update).
void scan_object_sites(const object_ptr &obj, std::vector<text_poke_req> &nops,
                       bool single_threaded, bool unreached)
{
    ftrace_state &st = ftrace_st();
    const auto fentry = reinterpret_cast<uintptr_t>(&__fentry__);
    auto &list = st.by_object[obj->id];
    list.obj = obj;
    list.seq = ++st.seq;
    list.unreached = unreached;
    if (unreached) st.unreached.push_back(obj->id);
    if (!object_may_have_sites(*obj, fentry)) return;
    std::unordered_set<uintptr_t> got(obj->fentry_got_slots.begin(), obj->fentry_got_slots.end());
    std::unordered_set<uintptr_t> pfe(obj->patchable_entries.begin(), obj->patchable_entries.end());
    uintptr_t last = 0;
    for (const ksym &sym : obj->funcs) {
        if (sym.addr == last || sym.size < 5)
            continue; // aliases share one site; the first (preferred) name wins
        last = sym.addr;
        uint8_t code[16];
        if (!read_entry(*obj, sym.addr, code)) continue;
        uintptr_t ip = sym.addr;
        if (arch::is_endbr64(code)) {
            ip += arch::ENDBR64_INSN_SIZE;
            if (!read_entry(*obj, ip, code)) continue;
        }
        arch::entry_insn e = arch::classify_entry(reinterpret_cast<uintptr_t>(code));
        auto site = std::make_unique<ftrace_site>();
        site->ip = ip;
        site->func = sym.addr;
        site->sym = &sym;
        site->obj = obj;
        site->usable = true;
        site->unreached = unreached;
        bool convert = false;
        switch (e.kind) {
        case arch::entry_kind::fentry_call: {
            uintptr_t target = ip + (e.target - reinterpret_cast<uintptr_t>(code));
            auto slot = target == fentry ? std::optional<uintptr_t>{} : arch::plt_got_slot(target);
            if (target != fentry && !(slot && got.count(*slot))) continue;
            site->kind = e.len == 5 ? site_kind::fentry : site_kind::fentry6;
            site->len = e.len;
            convert = true;
            break;
        }
        case arch::entry_kind::fentry_got: {
            uintptr_t slot = ip + 6 + (e.target - reinterpret_cast<uintptr_t>(code) - 6);
            if (!got.count(slot)) continue;
            site->kind = site_kind::fentry6;
            site->len = 6;
            convert = true;
            break;
        }
        case arch::entry_kind::nop:
            if (!pfe.count(ip) && !pfe.count(sym.addr)) continue;
            site->kind = site_kind::nop;
            site->len = e.len;
            break;
        case arch::entry_kind::nop_sled:
            if (!pfe.count(ip) && !pfe.count(sym.addr)) continue;
            site->kind = site_kind::nop;
            site->len = 5;
            if (single_threaded) {
                convert = true;
            } else {
                // A thread could be between two of the one-byte NOPs; rewriting them as one
                // instruction under it would make it run the middle of an instruction.
                // ftrace_convert_sleds() does it with the threads stopped.
                site->usable = false;
                site->why = k_late_sled;
            }
            break;
        case arch::entry_kind::none:
            continue;
        }
        if (convert) nops.push_back(arch::ftrace_make_nop(ip, site->len));
        st.by_ip[site->ip] = site.get();
        st.by_func[site->func] = site.get();
        list.sites.push_back(std::move(site));
    }
}

namespace
{

// A library loaded for dprobe alone (libz under libdw, say: self_objects.h) becomes the
// program's when an object loaded since needs it. Its functions were refused until now; their
// refusals are forgotten, and the object is counted as recorded anew, so that the next
// loader notification hands it to the followers (FPROBE_FL_FOLLOW_LOADS, `dprobe record
// --follow-loads`) with the objects that dlopen mapped. st.lock held.
void adopt_program_libraries(ftrace_state &st)
{
    std::unordered_set<uint64_t> only;
    for (auto &[id, list] : st.by_object)
        if (loaded_for_dprobe_only(*list.obj)) only.insert(id);
    for (uint64_t id : st.dprobe_only) {
        auto it = st.by_object.find(id);
        if (only.count(id) || it == st.by_object.end()) continue;
        const loaded_object &obj = *it->second.obj;
        std::erase_if(st.refused, [&](const auto &r) { return obj.contains(r.first); });
        std::erase_if(st.jump_ok, [&](uintptr_t a) { return obj.contains(a); });
        it->second.seq = ++st.seq;
    }
    st.dprobe_only = std::move(only);
}

// Forgets the objects of ST no longer loaded, then records the new ones (st.lock held). The
// order matters: a library loaded again at the same address gets new records at the same
// addresses. IN_LOADER (ftrace_loader_update), or with the loader hook active, no thread can
// have run a new object yet: it is recorded unreached.
void update_objects_locked(ftrace_state &st, bool in_loader)
{
    const bool fresh = in_loader || dl_hook_active();
    kallsyms::instance().refresh();
    auto objs = kallsyms::instance().objects();
    if (st.seen && objs.get() == st.seen.get())
        return; // same list as last time (st.seen keeps it alive: no address reuse)
    // Removals are found here, not from refresh()'s report: another caller of refresh() (the
    // agent's streamer, say) may have consumed that.
    std::unordered_set<uint64_t> loaded;
    for (const object_ptr &o : *objs)
        loaded.insert(o->id);
    for (auto it = st.by_object.begin(); it != st.by_object.end();) {
        if (loaded.count(it->first)) {
            ++it;
            continue;
        }
        // The code is gone: forget the sites. Their records stay allocated (a late reader
        // may hold one), and users must have detached or will find nothing to detach.
        const loaded_object &gone_obj = *it->second.obj;
        for (auto &s : it->second.sites) {
            if (auto f = st.by_ip.find(s->ip); f != st.by_ip.end() && f->second == s.get())
                st.by_ip.erase(f);
            if (auto f = st.by_func.find(s->func); f != st.by_func.end() && f->second == s.get())
                st.by_func.erase(f);
            s->gone = true;
            s->unreached = false;
            st.gone.push_back(std::move(s));
        }
        std::erase_if(st.refused, [&](const auto &r) { return gone_obj.contains(r.first); });
        std::erase_if(st.jump_ok, [&](uintptr_t a) { return gone_obj.contains(a); });
        std::erase(st.unreached, it->first);
        it = st.by_object.erase(it);
    }
    std::vector<text_poke_req> nops;
    bool single = fresh || process_thread_count() == 1;
    for (const object_ptr &o : *objs)
        if (!st.by_object.count(o->id)) scan_object_sites(o, nops, single, fresh);
    if (!nops.empty()) {
        if (fresh)
            text_poke_early(nops); // nobody runs this code yet
        else
            text_poke_batch(nops);
    }
    st.seen = std::move(objs);
    adopt_program_libraries(st);
}

} // namespace

void ftrace_update_objects()
{
    ftrace_state &st = ftrace_st();
    std::lock_guard<fair_mutex> g(st.lock);
    update_objects_locked(st, false);
}

void ftrace_loader_unmapping()
{
    ftrace_st().lock.lock();
}

std::vector<object_ptr> ftrace_loader_update(uint64_t *mark, bool unmapping)
{
    ftrace_state &st = ftrace_st();
    std::unique_lock<fair_mutex> g(st.lock, std::defer_lock);
    if (unmapping)
        g = std::unique_lock<fair_mutex>(st.lock, std::adopt_lock);
    else
        g.lock();
    update_objects_locked(st, true);
    std::vector<object_ptr> out;
    for (auto &[id, list] : st.by_object)
        if (list.seq > *mark) out.push_back(list.obj);
    *mark = st.seq;
    return out;
}

void ftrace_loader_done()
{
    ftrace_state &st = ftrace_st();
    std::lock_guard<fair_mutex> g(st.lock);
    for (uint64_t id : st.unreached) {
        auto it = st.by_object.find(id);
        if (it == st.by_object.end()) continue;
        it->second.unreached = false;
        for (auto &s : it->second.sites)
            s->unreached = false;
    }
    st.unreached.clear();
}

uint64_t ftrace_objects_mark()
{
    ftrace_state &st = ftrace_st();
    std::lock_guard<fair_mutex> g(st.lock);
    return st.seq;
}

int ftrace_convert_sleds()
{
    ftrace_update_objects();
    ftrace_state &st = ftrace_st();
    std::lock_guard<fair_mutex> g(st.lock);
    std::vector<ftrace_site *> sleds;
    std::vector<text_poke_req> reqs;
    std::vector<rip_move> moves;
    for (auto &[id, list] : st.by_object)
        for (auto &s : list.sites) {
            if (s->kind != site_kind::nop || s->usable || s->why != k_late_sled || s->gone)
                continue;
            reqs.push_back(arch::ftrace_make_nop(s->ip, s->len));
            arch::sled_moves(s->ip, s->len, moves);
            sleds.push_back(s.get());
        }
    if (sleds.empty()) return 0;
    std::sort(moves.begin(), moves.end(),
              [](const rip_move &a, const rip_move &b) { return a.from < b.from; });
    if (int err = text_poke_stopped(reqs, moves)) return err;
    for (ftrace_site *s : sleds) {
        s->usable = true;
        s->why = nullptr;
    }
    return static_cast<int>(sleds.size());
}

ftrace_site *ftrace_location_or_jump(uintptr_t ip)
{
    if (ftrace_site *s = ftrace_location(ip)) return s;
    auto hit = kallsyms::instance().lookup_addr(ip);
    if (!hit || hit->sym->addr != ip) return nullptr;
    ftrace_state &st = ftrace_st();
    std::lock_guard<fair_mutex> g(st.lock);
    return make_jump_site(hit->obj, *hit->sym);
}

ftrace_site *ftrace_location(uintptr_t ip)
{
    ftrace_state &st = ftrace_st();
    std::lock_guard<fair_mutex> g(st.lock);
    if (auto it = st.by_ip.find(ip); it != st.by_ip.end()) return it->second;
    if (auto it = st.by_func.find(ip); it != st.by_func.end()) return it->second;
    return nullptr;
}

namespace
{

std::vector<ftrace_site *> sites_of(const std::vector<sym_hit> &hits)
{
    ftrace_state &st = ftrace_st();
    std::lock_guard<fair_mutex> g(st.lock);
    std::vector<ftrace_site *> out;
    for (auto &h : hits) {
        if (auto it = st.by_func.find(h.sym->addr); it != st.by_func.end())
            out.push_back(it->second);
        else if (ftrace_site *j = make_jump_site(h.obj, *h.sym))
            out.push_back(j);
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
}

} // namespace

std::vector<ftrace_site *> ftrace_match_sites(std::string_view filter, std::string_view notfilter)
{
    ftrace_update_objects();
    return sites_of(kallsyms::instance().match_funcs(filter, notfilter));
}

std::vector<ftrace_site *> ftrace_match_sites_in(std::span<const object_ptr> objs,
                                                 std::string_view filter,
                                                 std::string_view notfilter)
{
    return sites_of(kallsyms::instance().match_funcs_in(objs, filter, notfilter));
}

std::vector<ftrace_site *> ftrace_all_sites()
{
    ftrace_update_objects();
    ftrace_state &st = ftrace_st();
    std::lock_guard<fair_mutex> g(st.lock);
    std::vector<ftrace_site *> out;
    for (auto &[id, list] : st.by_object)
        for (auto &s : list.sites)
            out.push_back(s.get());
    std::sort(out.begin(), out.end(),
              [](const ftrace_site *a, const ftrace_site *b) { return a->ip < b->ip; });
    return out;
}

std::vector<ftrace_func_entry> ftrace_selectable_funcs()
{
    ftrace_update_objects();
    std::vector<sym_hit> hits = kallsyms::instance().match_funcs("*", "");
    ftrace_state &st = ftrace_st();
    std::lock_guard<fair_mutex> g(st.lock);
    std::vector<ftrace_func_entry> out;
    for (auto &[id, list] : st.by_object)
        for (auto &s : list.sites)
            if (!s->gone && s->sym) out.push_back({s->ip, s->sym, s->obj});
    for (const sym_hit &h : hits) {
        const uintptr_t a = h.sym->addr;
        if (st.by_func.count(a) || !jump_site_possible(h.obj, *h.sym)) continue;
        out.push_back({a, h.sym, h.obj});
    }
    std::sort(out.begin(), out.end(),
              [](const ftrace_func_entry &x, const ftrace_func_entry &y) { return x.ip < y.ip; });
    return out;
}

// Before main: find every site of the objects loaded with the program, so that idle
// __fentry__ calls cost a NOP from the start.
__attribute__((constructor)) static void ftrace_init_sites()
{
    ftrace_update_objects();
}

} // namespace dprobe
