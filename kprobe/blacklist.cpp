// The kprobe blacklist (the kernel's kprobe_blacklist / within_kprobe_blacklist()): code a
// probe would break or recurse in.
//  - dprobe's hot path: the dprobe_noprobe_text section (DPROBE_NOPROBE functions and the
//    trampolines), found through the linker's __start_/__stop_ symbols;
//  - the rest of dprobe: the whole libdprobe*.so object when dprobe is a shared library, else
//    (linked statically into the program) every function of namespace dprobe and every
//    dprobe_* / kprobe API symbol of the object that holds it;
//  - what runs between a trap and dprobe's recursion check: the signal return trampoline
//    (__restore_rt) and __errno_location;
//  - NOKPROBE_SYMBOL(): addresses listed in each object's _kprobe_blacklist section.
#include "core/self_objects.h"
#include "core/symbols.h"
#include "kprobe/kprobe_internal.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <string_view>
#include <sys/syscall.h>
#include <unistd.h>
#include <vector>

extern "C" {
extern char __start_dprobe_noprobe_text[] __attribute__((weak));
extern char __stop_dprobe_noprobe_text[] __attribute__((weak));
}

namespace dprobe::kp
{

namespace
{

struct bl_range {
    uintptr_t start, end;
    std::string name;
};

struct bl_state {
    std::shared_ptr<const std::vector<object_ptr>> objs; // the object set it was built for
    std::vector<bl_range> ranges;                        // sorted by start
    bool restorer_found = false;
};

// The signal return trampoline (glibc's __restore_rt, a local symbol a stripped libc does not
// name): the sa_restorer of any handler installed through glibc, read from the kernel.
uintptr_t signal_restorer()
{
    struct {
        void *handler;
        unsigned long flags;
        void *restorer;
        unsigned long mask;
    } kact;
    constexpr unsigned long sa_restorer_flag = 0x04000000;
    for (int sig = 1; sig < 65; ++sig) {
        kact = {};
        if (syscall(SYS_rt_sigaction, sig, nullptr, &kact, sizeof kact.mask) == 0 &&
            (kact.flags & sa_restorer_flag) && kact.restorer)
            return reinterpret_cast<uintptr_t>(kact.restorer);
    }
    return 0;
}

bl_state &state()
{
    static bl_state *s = new bl_state;
    return *s;
}

constexpr std::string_view api_names[] = {
    "register_kprobe",
    "unregister_kprobe",
    "register_kprobes",
    "unregister_kprobes",
    "register_kretprobe",
    "unregister_kretprobe",
    "register_kretprobes",
    "unregister_kretprobes",
    "enable_kprobe",
    "disable_kprobe",
    "enable_kprobes",
    "disable_kprobes",
    "get_kprobe",
    "kprobe_running",
    "kprobe_busy_begin",
    "kprobe_busy_end",
    "get_kretprobe",
    "get_kretprobe_retaddr",
    "kprobe_on_func_entry",
    "within_kprobe_blacklist",
    "dump_kprobe",
    "kprobes_set_enabled",
    "kprobes_enabled",
    "copy_from_user_nofault",
    "strncpy_from_user_nofault",
    "strnlen_user_nofault",
    "__fentry__",
};

bool dprobe_symbol(std::string_view n)
{
    if (n.starts_with("_ZN6dprobe") || n.starts_with("_ZNK6dprobe") || n.starts_with("dprobe_"))
        return true;
    return std::find(std::begin(api_names), std::end(api_names), n) != std::end(api_names);
}

// NOKPROBE_SYMBOL entries: the section's runtime contents (relocated pointers).
void read_nokprobe_section(const loaded_object &obj, std::vector<uintptr_t> &out)
{
    if (obj.path.empty() || obj.is_vdso) return;
    int fd = open(obj.path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    elf_version(EV_CURRENT);
    Elf *e = elf_begin(fd, ELF_C_READ_MMAP, nullptr);
    if (e) {
        GElf_Ehdr eh;
        size_t shstrndx = 0;
        if (gelf_getehdr(e, &eh) && elf_getshdrstrndx(e, &shstrndx) == 0) {
            const uintptr_t bias = eh.e_type == ET_DYN ? obj.load_bias : 0;
            for (Elf_Scn *scn = elf_nextscn(e, nullptr); scn; scn = elf_nextscn(e, scn)) {
                GElf_Shdr sh;
                if (!gelf_getshdr(scn, &sh)) continue;
                const char *name = elf_strptr(e, shstrndx, sh.sh_name);
                if (!name || std::strcmp(name, "_kprobe_blacklist") != 0 || !sh.sh_addr) continue;
                const uintptr_t at = bias + sh.sh_addr;
                if (!obj.contains(at)) continue;
                const auto *p = reinterpret_cast<const uintptr_t *>(at);
                for (size_t i = 0; i < sh.sh_size / sizeof(uintptr_t); ++i)
                    out.push_back(p[i]);
            }
        }
        elf_end(e);
    }
    close(fd);
}

void add_sym(std::vector<bl_range> &v, const ksym &s)
{
    v.push_back({s.addr, s.addr + (s.size ? s.size : 1), s.name});
}

void rebuild(bl_state &st)
{
    auto &ks = kallsyms::instance();
    st.objs = ks.objects();
    st.ranges.clear();
    if (__start_dprobe_noprobe_text && __stop_dprobe_noprobe_text)
        st.ranges.push_back({reinterpret_cast<uintptr_t>(__start_dprobe_noprobe_text),
                             reinterpret_cast<uintptr_t>(__stop_dprobe_noprobe_text),
                             "dprobe_noprobe_text"});
    if (uintptr_t r = signal_restorer()) {
        // mov $15, %rax ; syscall (and padding)
        st.ranges.push_back({r, r + 16, "__restore_rt"});
        st.restorer_found = true;
    }
    object_ptr self = ks.object_of(reinterpret_cast<uintptr_t>(&rebuild));
    // The libraries only dprobe's own object needs run only inside dprobe, as dprobe does.
    for (const object_ptr &o : objects_only_for(self, *st.objs))
        for (auto &seg : o->segments)
            if (seg.prot & 4 /* PROT_EXEC */) st.ranges.push_back({seg.start, seg.end, o->name});
    for (const object_ptr &o : *st.objs) {
        if (o == self && !o->is_main && o->name.starts_with("libdprobe")) {
            for (auto &seg : o->segments)
                if (seg.prot & 4 /* PROT_EXEC */)
                    st.ranges.push_back({seg.start, seg.end, o->name});
        } else if (o == self) {
            for (const ksym &s : o->funcs)
                if (dprobe_symbol(s.name)) add_sym(st.ranges, s);
        }
        for (const ksym &s : o->funcs)
            if (s.name == "__restore_rt" || s.name == "__errno_location") add_sym(st.ranges, s);
        std::vector<uintptr_t> marked;
        read_nokprobe_section(*o, marked);
        for (uintptr_t a : marked) {
            const ksym *s = o->func_at(a);
            if (s && s->addr == a)
                add_sym(st.ranges, *s);
            else
                st.ranges.push_back({a, a + 1, "?"});
        }
    }
    std::sort(st.ranges.begin(), st.ranges.end(),
              [](const bl_range &a, const bl_range &b) { return a.start < b.start; });
}

} // namespace

void blacklist_refresh()
{
    bl_state &st = state();
    auto objs = kallsyms::instance().objects();
    if (st.objs != objs || (!st.restorer_found && signal_restorer())) rebuild(st);
}

bool in_blacklist(uintptr_t addr)
{
    blacklist_refresh();
    for (const bl_range &r : state().ranges) {
        if (r.start > addr) break;
        if (addr < r.end) return true;
    }
    return false;
}

} // namespace dprobe::kp

namespace dprobe
{

std::string kprobes_blacklist_text()
{
    std::lock_guard<std::mutex> g(kp::kprobe_mutex());
    ftrace_update_objects();
    kp::blacklist_refresh();
    std::string out;
    char line[600];
    for (const auto &r : kp::state().ranges) {
        int n = std::snprintf(line, sizeof line, "0x%016" PRIxPTR "-0x%016" PRIxPTR "\t%s\n",
                              r.start, r.end, r.name.c_str());
        out.append(line, static_cast<size_t>(std::min<int>(n, sizeof line - 1)));
    }
    return out;
}

} // namespace dprobe
