// kallsyms: the list of loaded objects (the kernel's module list) and address <-> symbol
// lookups over it. Writers (refresh) serialise on a mutex and publish an immutable snapshot;
// readers load the snapshot atomically and never block on a refresh.
#include "core/symbols.h"

#include "arch/x86_64/cpu.h"
#include "core/glob.h"
#include "core/sym_elf.h"

#include <elf.h>
#include <link.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <climits>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace dprobe
{

// ---- loaded_object ----------------------------------------------------------------------

bool loaded_object::contains(uintptr_t addr) const
{
    for (const segment &s : segments)
        if (addr >= s.start && addr < s.end) return true;
    return false;
}

bool loaded_object::is_text(uintptr_t addr) const
{
    for (const segment &s : segments)
        if ((s.prot & PROT_EXEC) && addr >= s.start && addr < s.end) return true;
    return false;
}

namespace
{

bool sym_contains(const ksym &k, uintptr_t addr) noexcept
{
    return addr == k.addr || (addr > k.addr && addr - k.addr < k.size);
}

// The innermost symbol containing addr (greatest start), and among aliases at that start the
// first in sort order (global before weak before local). reach[] bounds the walk back.
const ksym *containing(const std::vector<ksym> &v, const std::vector<uintptr_t> &reach,
                       uintptr_t addr) noexcept
{
    auto it = std::upper_bound(v.begin(), v.end(), addr,
                               [](uintptr_t a, const ksym &k) { return a < k.addr; });
    size_t i = static_cast<size_t>(it - v.begin());
    const ksym *best = nullptr;
    while (i-- > 0 && reach[i] > addr) {
        if (best && v[i].addr != best->addr) break;
        if (sym_contains(v[i], addr)) best = &v[i];
    }
    return best;
}

// [first, last) of the name index entries equal to name.
template <class F>
void for_each_named(const std::vector<ksym> &v, const std::vector<uint32_t> &names,
                    std::string_view name, F &&f)
{
    auto lo =
        std::lower_bound(names.begin(), names.end(), name, [&](uint32_t i, std::string_view n) {
            // compare(): clang 14 cannot rewrite < into libstdc++ 12's <=>.
            return v[i].name.compare(n) < 0;
        });
    for (; lo != names.end() && v[*lo].name == name; ++lo)
        f(v[*lo]);
}

} // namespace

const ksym *loaded_object::func_at(uintptr_t addr) const
{
    return containing(funcs, func_reach, addr);
}

const ksym *loaded_object::data_at(uintptr_t addr) const
{
    return containing(data, data_reach, addr);
}

std::vector<const ksym *> loaded_object::funcs_named(std::string_view name) const
{
    std::vector<const ksym *> out;
    for_each_named(funcs, func_names, name, [&](const ksym &k) { out.push_back(&k); });
    std::sort(out.begin(), out.end(),
              [](const ksym *a, const ksym *b) { return a->addr < b->addr; });
    return out;
}

const ksym *loaded_object::data_named(std::string_view name) const
{
    const ksym *best = nullptr;
    for_each_named(data, data_names, name, [&](const ksym &k) {
        if (!best || (best->bind != STB_GLOBAL && k.bind == STB_GLOBAL)) best = &k;
    });
    return best;
}

// ---- snapshot and state -----------------------------------------------------------------

struct kallsyms::snapshot {
    std::vector<object_ptr> objects;
    struct range {
        uintptr_t start, end;
        const object_ptr *obj; // into objects
    };
    std::vector<range> ranges; // every segment of every object, sorted by start

    const object_ptr *object_of(uintptr_t addr) const noexcept
    {
        auto it = std::upper_bound(ranges.begin(), ranges.end(), addr,
                                   [](uintptr_t a, const range &r) { return a < r.start; });
        if (it == ranges.begin()) return nullptr;
        --it;
        return addr < it->end ? it->obj : nullptr;
    }
};

namespace
{

// The published snapshot: a shared_ptr behind a tiny spinlock held only to copy or swap the
// pointer (no allocation, no syscall). std::atomic<std::shared_ptr> does the same, but
// libstdc++ 12 releases its lock after a load with relaxed order: a formal data race that
// ThreadSanitizer reports.
class snapshot_slot
{
  public:
    std::shared_ptr<const kallsyms::snapshot> load() const noexcept
    {
        lock();
        auto r = p_;
        busy_.clear(std::memory_order_release);
        return r;
    }
    void store(std::shared_ptr<const kallsyms::snapshot> n) noexcept
    {
        lock();
        p_.swap(n);
        busy_.clear(std::memory_order_release);
        // the old snapshot (now in n) is released here, outside the lock
    }

  private:
    void lock() const noexcept
    {
        while (busy_.test_and_set(std::memory_order_acquire))
            while (busy_.test(std::memory_order_relaxed))
                arch::cpu_relax();
    }
    mutable std::atomic_flag busy_;
    std::shared_ptr<const kallsyms::snapshot> p_;
};

} // namespace

struct kallsyms::state {
    std::mutex mu; // serialises refresh()
    snapshot_slot snap;
    bool walked = false;
    unsigned long long adds = 0, subs = 0;
    struct known {
        std::string dl_name; // dlpi_name as the loader reports it
        uintptr_t dl_addr;
        object_ptr obj;
    };
    std::vector<known> objects; // dl_iterate_phdr order
};

namespace
{

// sprint_symbol must not construct kallsyms (that allocates), so it finds it here.
std::atomic<const kallsyms *> the_kallsyms{nullptr};

struct dl_entry {
    std::string name;
    uintptr_t addr;
    const ElfW(Phdr) * phdr;
    std::vector<loaded_object::segment> segs;
};

struct dl_walk {
    bool check_counters = false;
    unsigned long long old_adds = 0, old_subs = 0;
    bool unchanged = false;
    bool have_counters = false;
    unsigned long long adds = 0, subs = 0;
    std::vector<dl_entry> entries;
};

int prot_of(uint32_t p_flags)
{
    return ((p_flags & PF_R) ? PROT_READ : 0) | ((p_flags & PF_W) ? PROT_WRITE : 0) |
           ((p_flags & PF_X) ? PROT_EXEC : 0);
}

int dl_callback(struct dl_phdr_info *info, size_t size, void *arg)
{
    auto *w = static_cast<dl_walk *>(arg);
    if (w->entries.empty() &&
        size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof(info->dlpi_subs)) {
        w->have_counters = true;
        w->adds = info->dlpi_adds;
        w->subs = info->dlpi_subs;
        if (w->check_counters && w->adds == w->old_adds && w->subs == w->old_subs) {
            w->unchanged = true;
            return 1;
        }
    }
    // Only copy here: the loader lock is held, so the slow reading happens after the walk.
    dl_entry e{info->dlpi_name ? info->dlpi_name : "", info->dlpi_addr, info->dlpi_phdr, {}};
    uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    for (int i = 0; i < info->dlpi_phnum; ++i) {
        const ElfW(Phdr) &ph = info->dlpi_phdr[i];
        if (ph.p_type != PT_LOAD) continue;
        uintptr_t start = (info->dlpi_addr + ph.p_vaddr) & ~(page - 1);
        uintptr_t end = (info->dlpi_addr + ph.p_vaddr + ph.p_memsz + page - 1) & ~(page - 1);
        e.segs.push_back({start, end, prot_of(ph.p_flags)});
    }
    w->entries.push_back(std::move(e));
    return 0;
}

std::string basename_of(const std::string &path)
{
    size_t slash = path.rfind('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string real_path(const char *p)
{
    char buf[PATH_MAX];
    return ::realpath(p, buf) ? std::string(buf) : std::string(p);
}

// The vdso is mapped whole (headers, sections and all); its extent is the furthest of the
// section header table and the loadable contents.
size_t vdso_image_size(const ElfW(Ehdr) * eh)
{
    size_t size = eh->e_shoff + size_t(eh->e_shnum) * eh->e_shentsize;
    auto *ph =
        reinterpret_cast<const ElfW(Phdr) *>(reinterpret_cast<const char *>(eh) + eh->e_phoff);
    for (int i = 0; i < eh->e_phnum; ++i)
        size = std::max<size_t>(size, ph[i].p_offset + ph[i].p_filesz);
    return size;
}

std::shared_ptr<loaded_object> read_entry(const dl_entry &e, bool first, uintptr_t vdso_base)
{
    std::shared_ptr<loaded_object> obj;
    std::string path;
    bool is_vdso = false, is_main = false;
    if (first && e.name.empty()) {
        is_main = true;
        path = real_path("/proc/self/exe");
        // (/proc/self/exe works even if the file was replaced.) A stripped program takes its
        // symbols from its debug file: how its functions can be traced at all.
        obj = read_object_file("/proc/self/exe", e.addr, nullptr, true);
    } else if (vdso_base &&
               reinterpret_cast<uintptr_t>(e.phdr) ==
                   vdso_base + reinterpret_cast<const ElfW(Ehdr) *>(vdso_base)->e_phoff) {
        // glibc names it "linux-vdso.so.1", which is no file: read it from memory.
        is_vdso = true;
        auto *eh = reinterpret_cast<const ElfW(Ehdr) *>(vdso_base);
        obj = read_object_image(eh, vdso_image_size(eh), e.addr);
    } else if (!e.name.empty()) {
        // Keep the loader's absolute name (libz.so.1, not libz.so.1.2.13): it is what users
        // write; resolve a relative one so path is always absolute.
        path = e.name.front() == '/' ? e.name : real_path(e.name.c_str());
        obj = read_object_file(e.name, e.addr);
    }
    if (!obj) {
        // Unreadable (deleted file, odd loader entry): still an object, without symbols.
        obj = std::make_shared<loaded_object>();
        obj->id = new_object_id();
        obj->load_bias = e.addr;
    }
    obj->path = is_vdso ? std::string() : path;
    obj->name = is_vdso ? std::string("[vdso]") : basename_of(path);
    obj->is_main = is_main;
    obj->is_vdso = is_vdso;
    obj->segments = e.segs; // the loader's view is authoritative
    return obj;
}

// "lib:name" -> {lib, name}. A "::" (a demangled C++ scope) is not a separator.
std::pair<std::string_view, std::string_view> split_spec(std::string_view spec)
{
    for (size_t i = 0; i < spec.size(); ++i) {
        if (spec[i] != ':') continue;
        if (i + 1 < spec.size() && spec[i + 1] == ':') {
            ++i;
            continue;
        }
        return {spec.substr(0, i), spec.substr(i + 1)};
    }
    return {{}, spec};
}

bool object_matches(const loaded_object &o, std::string_view lib)
{
    if (lib.empty()) return true;
    if (o.is_vdso && lib == "vdso") return true;
    return object_spec_matches(lib, o.name, o.path);
}

} // namespace

bool object_spec_matches(std::string_view lib, std::string_view name, std::string_view path)
{
    if (name == lib ||
        (name.size() > lib.size() && name.starts_with(lib) && name[lib.size()] == '.'))
        return true;
    if (!path.empty() && path == lib) return true;
    if (!glob_is_pattern(lib)) return false;
    return glob_match(lib, lib.find('/') != std::string_view::npos ? path : name);
}

bool loaded_object::matches(std::string_view lib) const
{
    return object_matches(*this, lib);
}

// ---- kallsyms ---------------------------------------------------------------------------

kallsyms::kallsyms() : st_(std::make_unique<state>())
{
    st_->snap.store(std::make_shared<const snapshot>());
}

kallsyms &kallsyms::instance()
{
    // Never destroyed: probes and the agent may still look symbols up during exit.
    static kallsyms *k = [] {
        auto *p = new kallsyms();
        p->refresh();
        the_kallsyms.store(p, std::memory_order_release);
        return p;
    }();
    return *k;
}

std::shared_ptr<const kallsyms::snapshot> kallsyms::load() const
{
    return st_->snap.load();
}

kallsyms::update kallsyms::refresh()
{
    std::lock_guard<std::mutex> lock(st_->mu);
    dl_walk w;
    w.check_counters = st_->walked;
    w.old_adds = st_->adds;
    w.old_subs = st_->subs;
    dl_iterate_phdr(dl_callback, &w);
    if (w.unchanged) return {};

    uintptr_t vdso_base = static_cast<uintptr_t>(getauxval(AT_SYSINFO_EHDR));
    std::vector<state::known> next;
    std::vector<bool> kept(st_->objects.size(), false);
    update up;
    for (size_t i = 0; i < w.entries.size(); ++i) {
        const dl_entry &e = w.entries[i];
        object_ptr obj;
        for (size_t j = 0; j < st_->objects.size(); ++j) {
            const state::known &k = st_->objects[j];
            if (!kept[j] && k.dl_addr == e.addr && k.dl_name == e.name) {
                kept[j] = true;
                obj = k.obj;
                break;
            }
        }
        if (!obj) {
            obj = read_entry(e, i == 0, vdso_base);
            up.added.push_back(obj);
        }
        next.push_back({e.name, e.addr, obj});
    }
    for (size_t j = 0; j < st_->objects.size(); ++j)
        if (!kept[j]) up.removed.push_back(st_->objects[j].obj);

    auto snap = std::make_shared<snapshot>();
    snap->objects.reserve(next.size());
    for (const state::known &k : next)
        snap->objects.push_back(k.obj);
    for (const object_ptr &o : snap->objects)
        for (const loaded_object::segment &s : o->segments)
            snap->ranges.push_back({s.start, s.end, &o});
    std::sort(snap->ranges.begin(), snap->ranges.end(),
              [](const snapshot::range &a, const snapshot::range &b) { return a.start < b.start; });

    st_->objects = std::move(next);
    st_->walked = w.have_counters;
    st_->adds = w.adds;
    st_->subs = w.subs;
    st_->snap.store(std::move(snap));
    return up;
}

bool kallsyms::refresh_lock_free() const
{
    if (!st_->mu.try_lock()) return false;
    st_->mu.unlock();
    return true;
}

std::shared_ptr<const std::vector<object_ptr>> kallsyms::objects() const
{
    auto snap = load();
    return {snap, &snap->objects};
}

object_ptr kallsyms::object_of(uintptr_t addr) const
{
    auto snap = load();
    const object_ptr *o = snap->object_of(addr);
    return o ? *o : nullptr;
}

std::vector<sym_hit> kallsyms::lookup_func(std::string_view spec) const
{
    auto [lib, name] = split_spec(spec);
    std::vector<sym_hit> out;
    auto snap = load();
    for (const object_ptr &o : snap->objects) {
        if (!object_matches(*o, lib)) continue;
        for (const ksym *k : o->funcs_named(name))
            out.push_back({o, k});
    }
    return out;
}

std::vector<sym_hit> bindable_funcs(std::vector<sym_hit> hits)
{
    // An address counts as a compatibility version when every name of the spec there is one.
    auto compat_only = [&](uintptr_t addr) {
        return std::all_of(hits.begin(), hits.end(),
                           [&](const sym_hit &h) { return h.sym->addr != addr || h.sym->compat; });
    };
    const bool other = std::any_of(hits.begin(), hits.end(),
                                   [&](const sym_hit &h) { return !compat_only(h.sym->addr); });
    if (other) std::erase_if(hits, [&](const sym_hit &h) { return compat_only(h.sym->addr); });
    return hits;
}

std::string qualified_func_spec(const sym_hit &hit)
{
    auto objs = kallsyms::instance().objects();
    const size_t same = std::count_if(
        objs->begin(), objs->end(), [&](const object_ptr &o) { return o->name == hit.obj->name; });
    return (same > 1 ? hit.obj->path : hit.obj->name) + ":" + hit.sym->name;
}

std::vector<sym_hit> kallsyms::lookup_data(std::string_view spec) const
{
    auto [lib, name] = split_spec(spec);
    std::vector<sym_hit> out;
    auto snap = load();
    for (const object_ptr &o : snap->objects)
        if (object_matches(*o, lib))
            if (const ksym *k = o->data_named(name)) out.push_back({o, k});
    return out;
}

std::optional<sym_hit> kallsyms::lookup_addr(uintptr_t addr) const
{
    auto snap = load();
    const object_ptr *o = snap->object_of(addr);
    if (!o) return std::nullopt;
    if (const ksym *k = (*o)->func_at(addr)) return sym_hit{*o, k};
    if (const ksym *k = (*o)->data_at(addr)) return sym_hit{*o, k};
    return std::nullopt;
}

namespace
{

// The white-space separated globs of a filter, each split into its "lib:" part and pattern.
std::vector<std::pair<std::string_view, std::string_view>> split_globs(std::string_view list)
{
    std::vector<std::pair<std::string_view, std::string_view>> out;
    size_t i = 0;
    while (i < list.size()) {
        while (i < list.size() && std::isspace(static_cast<unsigned char>(list[i])))
            ++i;
        size_t j = i;
        while (j < list.size() && !std::isspace(static_cast<unsigned char>(list[j])))
            ++j;
        if (j > i) out.push_back(split_spec(list.substr(i, j - i)));
        i = j;
    }
    return out;
}

// Whether one of GLOBS selects the function of O that has the alias NAME. One address, one
// name (the kernel's: ftrace_match_record() matches the one name kallsyms_lookup() gives an
// ip): a pattern is matched against the function's preferred name only (CANONICAL: NAME is
// that name), so "*lock*" never selects fileno through its alias fileno_unlocked, and every
// file lists what a glob selected under the name the glob saw. A plain name (no
// metacharacter) also selects the function it is an alias of, as kallsyms_lookup_name()
// does for a kprobe's symbol: it names one function without doubt.
bool any_glob_matches(const std::vector<std::pair<std::string_view, std::string_view>> &globs,
                      const loaded_object &o, std::string_view name, bool canonical)
{
    for (const auto &[lib, pattern] : globs) {
        if (pattern.empty() || !object_matches(o, lib)) continue;
        if (glob_is_pattern(pattern) ? canonical && glob_match(pattern, name) : pattern == name)
            return true;
    }
    return false;
}

void match_in(std::span<const object_ptr> objs, std::string_view filter, std::string_view notfilter,
              std::vector<sym_hit> &out)
{
    auto want = split_globs(filter), skip = split_globs(notfilter);
    for (const object_ptr &o : objs) {
        auto in_object = [&](const auto &g) {
            return !g.second.empty() && object_matches(*o, g.first);
        };
        if (std::none_of(want.begin(), want.end(), in_object)) continue;
        const std::vector<ksym> &f = o->funcs;
        // One address at a time: its aliases are adjacent, the preferred name first.
        for (size_t i = 0, j; i < f.size(); i = j) {
            j = i + 1;
            while (j < f.size() && f[j].addr == f[i].addr)
                ++j;
            auto selected = [&](const auto &globs) {
                for (size_t k = i; k < j; ++k)
                    if (any_glob_matches(globs, *o, f[k].name, k == i)) return true;
                return false;
            };
            // The hit carries the preferred name whichever alias matched: a site made from it
            // is named so in every file.
            if (selected(want) && !selected(skip)) out.push_back({o, &f[i]});
        }
    }
}

} // namespace

std::vector<sym_hit> kallsyms::match_funcs(std::string_view filter,
                                           std::string_view notfilter) const
{
    std::vector<sym_hit> out;
    auto snap = load();
    match_in(snap->objects, filter, notfilter, out);
    return out;
}

std::vector<sym_hit> kallsyms::match_funcs_in(std::span<const object_ptr> objs,
                                              std::string_view filter,
                                              std::string_view notfilter) const
{
    std::vector<sym_hit> out;
    match_in(objs, filter, notfilter, out);
    return out;
}

// ---- %pS --------------------------------------------------------------------------------

namespace
{

// Appends with truncation; always leaves buf NUL-terminated when len > 0.
struct bounded_writer {
    char *buf;
    size_t len, pos = 0;

    void put(char c) noexcept
    {
        if (pos + 1 < len) buf[pos++] = c;
    }
    void put(std::string_view s) noexcept
    {
        for (char c : s)
            put(c);
    }
    void hex(uint64_t v) noexcept
    {
        char tmp[16];
        int n = 0;
        do {
            tmp[n++] = "0123456789abcdef"[v & 0xf];
            v >>= 4;
        } while (v);
        put("0x");
        while (n)
            put(tmp[--n]);
    }
    size_t finish() noexcept
    {
        if (len) buf[pos] = '\0';
        return pos;
    }
};

} // namespace

size_t sprint_symbol(char *buf, size_t len, uintptr_t addr, bool with_object) noexcept
{
    bounded_writer w{buf, len};
    const kallsyms *k = the_kallsyms.load(std::memory_order_acquire);
    std::shared_ptr<const kallsyms::snapshot> snap;
    if (k) snap = k->load();
    const object_ptr *o = snap ? snap->object_of(addr) : nullptr;
    const ksym *sym = nullptr;
    if (o) {
        sym = (*o)->func_at(addr);
        if (!sym) sym = (*o)->data_at(addr);
    }
    if (!sym) {
        w.hex(addr);
        return w.finish();
    }
    w.put(sym->name);
    w.put('+');
    w.hex(addr - sym->addr);
    w.put('/');
    w.hex(sym->size);
    if (with_object && !(*o)->is_main) {
        // " [libc.so.6]" like a module; the vdso's name is already bracketed.
        bool bracketed = !(*o)->name.empty() && (*o)->name.front() == '[';
        w.put(' ');
        if (!bracketed) w.put('[');
        w.put((*o)->name);
        if (!bracketed) w.put(']');
    }
    return w.finish();
}

} // namespace dprobe
