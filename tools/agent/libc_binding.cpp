// What libdprobe-preload.so calls when it allocates or locks: never the program's code.
//
// A program may define malloc, free, pthread_mutex_lock... (its own allocator, a lock
// profiler): the dynamic linker binds every object's calls to the program's definitions,
// dprobe's too. So the preload defines them itself, hidden (its own objects' calls bind
// here at link time and nothing else sees them):
//   - the allocator family: the agent's allocator, on pages it maps (private_alloc.h);
//   - the mutex and rwlock calls (std::mutex, std::shared_mutex): the C library's own
//     implementation, by its internal names (__pthread_mutex_lock@GLIBC_2.2.5 ...), which
//     no program interposes.
// And the libraries only the preload brought into the process (libstdc++ in a C program,
// libelf, libdw, Zydis, libfuse3 and the libraries they need: libz, liblzma...) get the same
// allocator: their GOT entries for the allocator family are pointed at it at start
// (isolate_libraries), before any thread or allocation of theirs after their own
// initialisers. A library the program uses too (needed by the program or by any library
// that is not only dprobe's) is left alone: its allocations and frees must stay on the same
// heap as the program's (libstdc++ in a C++ program: dprobe's C++ containers then allocate
// through it; libz in a program that uses zlib: libelf's inflate calls then do too).
#include "tools/agent/agent.h"

#include "arch/x86_64/plt_bind.h"
#include "core/sym_producer.h"
#include "tools/agent/private_alloc.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <sys/mman.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string_view>

extern char **environ;

using namespace dprobe::agent;

// Hidden: -fvisibility=hidden (the agent objects' flag) and the version script keep them
// out of the dynamic symbol table.
#define HIDDEN extern "C"

// ---- the allocator family ----

HIDDEN void *malloc(size_t size) noexcept
{
    return palloc(size);
}
HIDDEN void free(void *p) noexcept
{
    pfree(p);
}
HIDDEN void *calloc(size_t n, size_t size) noexcept
{
    size_t total;
    if (__builtin_mul_overflow(n, size, &total)) return nullptr;
    void *p = palloc(total);
    if (p) std::memset(p, 0, total);
    return p;
}
HIDDEN void *realloc(void *p, size_t size) noexcept
{
    return prealloc(p, size);
}
HIDDEN void *reallocarray(void *p, size_t n, size_t size) noexcept
{
    size_t total;
    if (__builtin_mul_overflow(n, size, &total)) return nullptr;
    return prealloc(p, total);
}
HIDDEN void *aligned_alloc(size_t align, size_t size) noexcept
{
    return palloc_aligned(align, size);
}
HIDDEN void *memalign(size_t align, size_t size) noexcept
{
    return palloc_aligned(align, size);
}
HIDDEN int posix_memalign(void **out, size_t align, size_t size) noexcept
{
    if (align < sizeof(void *) || (align & (align - 1))) return EINVAL;
    void *p = palloc_aligned(align, size);
    if (!p) return ENOMEM;
    *out = p;
    return 0;
}
HIDDEN void *valloc(size_t size) noexcept
{
    return palloc_aligned(4096, size);
}
HIDDEN void *pvalloc(size_t size) noexcept
{
    return palloc_aligned(4096, (size + 4095) & ~size_t{4095});
}
HIDDEN size_t malloc_usable_size(void *p) noexcept
{
    return pusable(p);
}
// Copies the C library makes with malloc, for the libraries that free them with free().
HIDDEN char *strndup(const char *s, size_t n) noexcept
{
    const size_t len = strnlen(s, n);
    char *p = static_cast<char *>(palloc(len + 1));
    if (p) {
        std::memcpy(p, s, len);
        p[len] = '\0';
    }
    return p;
}
HIDDEN char *strdup(const char *s) noexcept
{
    return strndup(s, SIZE_MAX);
}

// ---- locks: the C library's own ----

extern "C" int dprobe_libc_mutex_lock(pthread_mutex_t *);
extern "C" int dprobe_libc_mutex_trylock(pthread_mutex_t *);
extern "C" int dprobe_libc_mutex_unlock(pthread_mutex_t *);
extern "C" int dprobe_libc_rwlock_rdlock(pthread_rwlock_t *);
extern "C" int dprobe_libc_rwlock_wrlock(pthread_rwlock_t *);
extern "C" int dprobe_libc_rwlock_tryrdlock(pthread_rwlock_t *);
extern "C" int dprobe_libc_rwlock_trywrlock(pthread_rwlock_t *);
extern "C" int dprobe_libc_rwlock_unlock(pthread_rwlock_t *);
__asm__(".symver dprobe_libc_mutex_lock, __pthread_mutex_lock@GLIBC_2.2.5\n"
        ".symver dprobe_libc_mutex_trylock, __pthread_mutex_trylock@GLIBC_2.2.5\n"
        ".symver dprobe_libc_mutex_unlock, __pthread_mutex_unlock@GLIBC_2.2.5\n"
        ".symver dprobe_libc_rwlock_rdlock, __pthread_rwlock_rdlock@GLIBC_2.2.5\n"
        ".symver dprobe_libc_rwlock_wrlock, __pthread_rwlock_wrlock@GLIBC_2.2.5\n"
        ".symver dprobe_libc_rwlock_tryrdlock, __pthread_rwlock_tryrdlock@GLIBC_2.2.5\n"
        ".symver dprobe_libc_rwlock_trywrlock, __pthread_rwlock_trywrlock@GLIBC_2.2.5\n"
        ".symver dprobe_libc_rwlock_unlock, __pthread_rwlock_unlock@GLIBC_2.2.5\n");

HIDDEN int pthread_mutex_lock(pthread_mutex_t *m) noexcept
{
    return dprobe_libc_mutex_lock(m);
}
HIDDEN int pthread_mutex_trylock(pthread_mutex_t *m) noexcept
{
    return dprobe_libc_mutex_trylock(m);
}
HIDDEN int pthread_mutex_unlock(pthread_mutex_t *m) noexcept
{
    return dprobe_libc_mutex_unlock(m);
}
HIDDEN int pthread_rwlock_rdlock(pthread_rwlock_t *l) noexcept
{
    return dprobe_libc_rwlock_rdlock(l);
}
HIDDEN int pthread_rwlock_wrlock(pthread_rwlock_t *l) noexcept
{
    return dprobe_libc_rwlock_wrlock(l);
}
HIDDEN int pthread_rwlock_tryrdlock(pthread_rwlock_t *l) noexcept
{
    return dprobe_libc_rwlock_tryrdlock(l);
}
HIDDEN int pthread_rwlock_trywrlock(pthread_rwlock_t *l) noexcept
{
    return dprobe_libc_rwlock_trywrlock(l);
}
HIDDEN int pthread_rwlock_unlock(pthread_rwlock_t *l) noexcept
{
    return dprobe_libc_rwlock_unlock(l);
}

// ---- the libraries only the preload needs ----

namespace dprobe::agent
{

namespace
{

struct binding {
    const char *name;
    void *fn;
};
const binding k_bindings[] = {
    {"malloc", reinterpret_cast<void *>(&malloc)},
    {"free", reinterpret_cast<void *>(&free)},
    {"calloc", reinterpret_cast<void *>(&calloc)},
    {"realloc", reinterpret_cast<void *>(&realloc)},
    {"reallocarray", reinterpret_cast<void *>(&reallocarray)},
    {"aligned_alloc", reinterpret_cast<void *>(&aligned_alloc)},
    {"memalign", reinterpret_cast<void *>(&memalign)},
    {"posix_memalign", reinterpret_cast<void *>(&posix_memalign)},
    {"valloc", reinterpret_cast<void *>(&valloc)},
    {"pvalloc", reinterpret_cast<void *>(&pvalloc)},
    {"malloc_usable_size", reinterpret_cast<void *>(&malloc_usable_size)},
    {"strdup", reinterpret_cast<void *>(&strdup)},
    {"strndup", reinterpret_cast<void *>(&strndup)},
    {"pthread_mutex_lock", reinterpret_cast<void *>(&pthread_mutex_lock)},
    {"pthread_mutex_trylock", reinterpret_cast<void *>(&pthread_mutex_trylock)},
    {"pthread_mutex_unlock", reinterpret_cast<void *>(&pthread_mutex_unlock)},
};

// The C library's own objects, and the unwinder it loads for thread cancellation: never
// rebound, whatever needs them (their allocations are the program's own).
constexpr std::string_view k_never_rebound[] = {
    "libc.so.6",  "ld-linux-x86-64.so.2", "libm.so.6",    "libpthread.so.0",
    "libdl.so.2", "librt.so.1",           "libgcc_s.so.1"};

struct object {
    std::string_view path, soname;
    ElfW(Addr) base;
    const ElfW(Dyn) * dyn;
    ElfW(Addr) relro_lo = 0, relro_hi = 0;
};

std::string_view basename_of(std::string_view p)
{
    size_t s = p.rfind('/');
    return s == std::string_view::npos ? p : p.substr(s + 1);
}

template <class F> void for_each_needed(const object &o, F &&fn)
{
    const char *strtab = nullptr;
    for (const ElfW(Dyn) *d = o.dyn; d && d->d_tag != DT_NULL; d++)
        if (d->d_tag == DT_STRTAB)
            strtab = reinterpret_cast<const char *>(arch::dynamic_addr(o.base, d->d_un.d_ptr));
    if (!strtab) return;
    for (const ElfW(Dyn) *d = o.dyn; d->d_tag != DT_NULL; d++)
        if (d->d_tag == DT_NEEDED) fn(std::string_view(strtab + d->d_un.d_val));
}

// Points OBJ's GOT entries for the bound functions at the preload's.
int rebind(const object &o)
{
    int n = 0;
    arch::for_each_got_binding(o.dyn, o.base, true, [&](const char *name, uintptr_t slot) {
        for (const binding &b : k_bindings) {
            if (std::strcmp(name, b.name) != 0) continue;
            const bool relro = slot >= o.relro_lo && slot < o.relro_hi;
            void *page = reinterpret_cast<void *>(slot & ~uintptr_t{4095});
            if (relro && mprotect(page, 4096, PROT_READ | PROT_WRITE)) break;
            *reinterpret_cast<void **>(slot) = b.fn;
            if (relro) mprotect(page, 4096, PROT_READ);
            n++;
            break;
        }
    });
    return n;
}

} // namespace

int isolate_libraries()
{
    // No allocation here: this runs before the allocators are sorted out.
    struct object_list {
        object v[512];
        size_t n = 0;
    };
    static object_list objs;
    objs.n = 0;
    dl_iterate_phdr(
        [](struct dl_phdr_info *info, size_t, void *arg) {
            auto *l = static_cast<object_list *>(arg);
            if (l->n == sizeof l->v / sizeof l->v[0]) return 1;
            object o{};
            o.path = info->dlpi_name ? info->dlpi_name : "";
            o.base = info->dlpi_addr;
            for (int i = 0; i < info->dlpi_phnum; i++) {
                const ElfW(Phdr) &ph = info->dlpi_phdr[i];
                if (ph.p_type == PT_DYNAMIC)
                    o.dyn = reinterpret_cast<const ElfW(Dyn) *>(info->dlpi_addr + ph.p_vaddr);
                if (ph.p_type == PT_GNU_RELRO) {
                    o.relro_lo = info->dlpi_addr + ph.p_vaddr;
                    o.relro_hi = o.relro_lo + ph.p_memsz;
                }
            }
            o.soname = basename_of(o.path);
            if (o.dyn) l->v[l->n++] = o;
            return 0;
        },
        &objs);
    // This object's own path (to tell its needs from the program's).
    Dl_info self{};
    dladdr(reinterpret_cast<void *>(&isolate_libraries), &self);
    const std::string_view self_name = basename_of(self.dli_fname ? self.dli_fname : "");
    auto find = [&](std::string_view soname) -> size_t {
        for (size_t i = 0; i < objs.n; i++)
            if (objs.v[i].soname == soname) return i;
        return objs.n;
    };
    // dprobe's objects: the preload and what it needs, transitively (the C library's own
    // objects excepted). The set core/self_objects.h finds (objects_only_for), computed here
    // without allocating and before the symbol tables exist.
    static bool own[sizeof objs.v / sizeof objs.v[0]];
    for (size_t i = 0; i < objs.n; i++)
        own[i] = objs.v[i].soname == self_name;
    for (bool grew = true; grew;) {
        grew = false;
        for (size_t i = 0; i < objs.n; i++) {
            if (!own[i]) continue;
            for_each_needed(objs.v[i], [&](std::string_view n) {
                for (const std::string_view never : k_never_rebound)
                    if (n == never) return;
                const size_t k = find(n);
                if (k < objs.n && !own[k]) own[k] = grew = true;
            });
        }
    }
    // Less those any other object needs (the program, its libraries): until nothing changes,
    // as a library left to the program takes what it needs with it.
    for (bool shrank = true; shrank;) {
        shrank = false;
        for (size_t i = 0; i < objs.n; i++) {
            if (own[i]) continue;
            for_each_needed(objs.v[i], [&](std::string_view n) {
                const size_t k = find(n);
                if (k < objs.n && own[k] && objs.v[k].soname != self_name)
                    own[k] = false, shrank = true;
            });
        }
    }
    int rebound = 0;
    for (size_t i = 0; i < objs.n; i++)
        if (own[i] && objs.v[i].soname != self_name) rebound += rebind(objs.v[i]);
    return rebound;
}

namespace
{

// Before the runtime's own static objects are built (constructors of priority 101 run before
// the others of this object): from their first allocation on, the libraries only dprobe
// needs allocate from dprobe's pages. Only for `dprobe record` (DPROBE_OUTPUT set): the
// preload does nothing else in a process that did not ask for it.
__attribute__((constructor(101))) void isolate_at_load()
{
    for (char **e = environ; e && *e; e++)
        if (std::strncmp(*e, "DPROBE_OUTPUT=", 14) == 0 && (*e)[14]) {
            isolate_libraries();
            dprobe::set_producer_lookup(false); // see sym_producer.h
            return;
        }
}

} // namespace

} // namespace dprobe::agent
