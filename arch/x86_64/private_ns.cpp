// Loading and binding the preload's private namespace (see private_ns.h).
#include "arch/x86_64/private_ns.h"

#include <dlfcn.h>
#include <link.h>
#include <limits.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>

extern "C" {
extern void *dprobe_private_ns_slots[];
void dprobe_private_ns_lazy();
void *dprobe_private_ns_resolve(unsigned index);
}

namespace dprobe::arch
{

namespace
{

// ---- the namespace's malloc family (libdprobe-nsalloc.so jumps here) ----

const private_ns_allocator *g_alloc = nullptr;
const char *g_alloc_object = nullptr; // set by a test; else next to this code's object

// The namespace's C library, for what it allocated itself, and its errno (not the one of the
// program's C library that this code sees). Set while the namespace loads, before any of its
// code can run on another thread; cleared after it is unloaded.
std::atomic<void (*)(void *)> g_libc_free{nullptr};
std::atomic<void *(*)(void *, size_t)> g_libc_realloc{nullptr};
std::atomic<size_t (*)(void *)> g_libc_usable{nullptr};
std::atomic<int *(*)()> g_libc_errno{nullptr};

void ns_errno(int e) noexcept
{
    if (int *(*loc)() = g_libc_errno.load(std::memory_order_relaxed)) *loc() = e;
}

void *ns_malloc(size_t size) noexcept
{
    void *p = g_alloc->alloc(size);
    if (!p) ns_errno(ENOMEM);
    return p;
}

void ns_free(void *p) noexcept
{
    if (!p) return;
    if (g_alloc->owns(p))
        g_alloc->free(p);
    else if (auto f = g_libc_free.load(std::memory_order_relaxed))
        f(p);
}

void *ns_calloc(size_t n, size_t size) noexcept
{
    size_t total;
    if (__builtin_mul_overflow(n, size, &total)) {
        ns_errno(ENOMEM);
        return nullptr;
    }
    void *p = ns_malloc(total);
    if (p) std::memset(p, 0, total);
    return p;
}

void *ns_realloc(void *p, size_t size) noexcept
{
    if (!p) return ns_malloc(size);
    if (!g_alloc->owns(p)) {
        auto r = g_libc_realloc.load(std::memory_order_relaxed);
        return r ? r(p, size) : nullptr;
    }
    void *n = g_alloc->realloc(p, size);
    if (!n && size) ns_errno(ENOMEM);
    return n;
}

void *ns_reallocarray(void *p, size_t n, size_t size) noexcept
{
    size_t total;
    if (__builtin_mul_overflow(n, size, &total)) {
        ns_errno(ENOMEM);
        return nullptr;
    }
    return ns_realloc(p, total);
}

void *ns_aligned(size_t align, size_t size) noexcept
{
    void *p = g_alloc->alloc_aligned(align, size);
    if (!p) ns_errno(ENOMEM);
    return p;
}

int ns_posix_memalign(void **out, size_t align, size_t size) noexcept
{
    if (align % sizeof(void *) || (align & (align - 1)) || !align) return EINVAL;
    void *p = g_alloc->alloc_aligned(align, size);
    if (!p) return ENOMEM;
    *out = p;
    return 0;
}

void *ns_aligned_alloc(size_t align, size_t size) noexcept
{
    if (!align || (align & (align - 1))) {
        ns_errno(EINVAL);
        return nullptr;
    }
    return ns_aligned(align, size);
}

// glibc's memalign takes any alignment, rounded up to a power of two.
void *ns_memalign(size_t align, size_t size) noexcept
{
    size_t a = 16;
    while (a < align && a < (size_t{1} << 62))
        a <<= 1;
    if (a < align) {
        ns_errno(EINVAL);
        return nullptr;
    }
    return ns_aligned(a, size);
}

void *ns_valloc(size_t size) noexcept
{
    return ns_aligned(4096, size);
}

void *ns_pvalloc(size_t size) noexcept
{
    if (size > SIZE_MAX - 4095) {
        ns_errno(ENOMEM);
        return nullptr;
    }
    return ns_aligned(4096, (size + 4095) & ~size_t{4095});
}

size_t ns_malloc_usable_size(void *p) noexcept
{
    if (!p) return 0;
    if (g_alloc->owns(p)) return g_alloc->usable(p);
    auto u = g_libc_usable.load(std::memory_order_relaxed);
    return u ? u(p) : 0;
}

// In the slots' order (private_ns_alloc.S includes the same list).
void *const k_alloc_fns[] = {
#define PRIVATE_NS_ALLOC(name) reinterpret_cast<void *>(&ns_##name),
#include "arch/x86_64/private_ns_alloc_fns.h"
#undef PRIVATE_NS_ALLOC
};
constexpr size_t k_nalloc_fns = sizeof k_alloc_fns / sizeof k_alloc_fns[0];

// Where libdprobe-nsalloc.so is: beside the object this code is in. Its name as the loader
// has it (an absolute path: `dprobe` hands the agent's real path to LD_PRELOAD and dlopen);
// else the loader's own idea of its directory, worked out when it was loaded (so not relative
// to a current directory the program has changed since).
std::string alloc_object_path()
{
    if (g_alloc_object && *g_alloc_object) return g_alloc_object;
    Dl_info info;
    link_map *self = nullptr;
    if (!dladdr1(reinterpret_cast<void *>(&alloc_object_path), &info,
                 reinterpret_cast<void **>(&self), RTLD_DL_LINKMAP))
        return DPROBE_NSALLOC_FILE; // the loader's search path, then
    if (info.dli_fname && info.dli_fname[0] == '/') {
        std::string dir(info.dli_fname);
        return dir.substr(0, dir.rfind('/') + 1) + DPROBE_NSALLOC_FILE;
    }
    char origin[PATH_MAX];
    if (!self || dlinfo(self, RTLD_DI_ORIGIN, origin) != 0) return DPROBE_NSALLOC_FILE;
    return std::string(origin) + "/" + DPROBE_NSALLOC_FILE;
}

enum lib_id : unsigned {
#define PRIVATE_NS_LIB(id, soname) lib_##id,
#define PRIVATE_NS_SYM(lib, name)
#include "arch/x86_64/private_ns_syms.h"
#undef PRIVATE_NS_LIB
#undef PRIVATE_NS_SYM
    k_nlibs
};

// In dlmopen order, into the namespace the allocator object made.
constexpr const char *k_libs[] = {
#define PRIVATE_NS_LIB(id, soname) soname,
#define PRIVATE_NS_SYM(lib, name)
#include "arch/x86_64/private_ns_syms.h"
#undef PRIVATE_NS_LIB
#undef PRIVATE_NS_SYM
};

struct private_sym {
    lib_id lib;
    const char *name;
};
// In the stubs' order (private_ns_stubs.S includes the same list).
constexpr private_sym k_syms[] = {
#define PRIVATE_NS_LIB(id, soname)
#define PRIVATE_NS_SYM(lib, name) {lib_##lib, #name},
#include "arch/x86_64/private_ns_syms.h"
#undef PRIVATE_NS_LIB
#undef PRIVATE_NS_SYM
};
constexpr size_t k_nsyms = sizeof k_syms / sizeof k_syms[0];

std::mutex ns_lock;
std::atomic<bool> ns_bound{false};
void *ns_handles[k_nlibs];

void *ns_alloc_handle = nullptr;

void forget_libc()
{
    g_libc_free.store(nullptr, std::memory_order_relaxed);
    g_libc_realloc.store(nullptr, std::memory_order_relaxed);
    g_libc_usable.store(nullptr, std::memory_order_relaxed);
    g_libc_errno.store(nullptr, std::memory_order_relaxed);
}

// The libraries, then the allocator object: it is the last one left in the namespace, so the
// libraries' destructors (and the C library's) still free through it.
void close_handles(void *(&h)[k_nlibs], void *&alloc)
{
    for (size_t i = k_nlibs; i-- > 0;)
        if (h[i]) {
            dlclose(h[i]);
            h[i] = nullptr;
        }
    if (alloc) {
        dlclose(alloc);
        alloc = nullptr;
    }
    forget_libc();
}

// The allocator object, alone in a new namespace, its slots pointing here. NS: the namespace.
void *load_allocator(Lmid_t &ns, std::string *why)
{
    if (!g_alloc) {
        if (why) *why = "no allocator registered for dprobe's namespace";
        return nullptr;
    }
    const std::string path = alloc_object_path();
    void *h = dlmopen(LM_ID_NEWLM, path.c_str(), RTLD_NOW | RTLD_LOCAL);
    void **slots = h ? static_cast<void **>(dlsym(h, "dprobe_nsalloc_slots")) : nullptr;
    if (!slots || dlinfo(h, RTLD_DI_LMID, &ns) != 0) {
        const char *e = dlerror();
        if (why)
            *why = "cannot load " + path + " into dprobe's namespace: " + (e ? e : "unknown error");
        if (h) dlclose(h);
        return nullptr;
    }
    for (size_t i = 0; i < k_nalloc_fns; i++)
        __atomic_store_n(&slots[i], k_alloc_fns[i], __ATOMIC_RELAXED);
    return h;
}

// The namespace's C library's own functions, found from a library that needs it (a lookup
// by handle searches that object's dependencies, not the namespace's first object).
bool find_libc(void *h, void *alloc, std::string *why)
{
    auto f = reinterpret_cast<void (*)(void *)>(dlsym(h, "free"));
    auto r = reinterpret_cast<void *(*)(void *, size_t)>(dlsym(h, "realloc"));
    auto u = reinterpret_cast<size_t (*)(void *)>(dlsym(h, "malloc_usable_size"));
    auto e = reinterpret_cast<int *(*)()>(dlsym(h, "__errno_location"));
    if (!f || !r || !u || !e || reinterpret_cast<void *>(f) == dlsym(alloc, "free")) {
        if (why) *why = "the C library in dprobe's namespace has no free, realloc or errno";
        return false;
    }
    g_libc_free.store(f, std::memory_order_relaxed);
    g_libc_realloc.store(r, std::memory_order_relaxed);
    g_libc_usable.store(u, std::memory_order_relaxed);
    g_libc_errno.store(e, std::memory_order_relaxed);
    return true;
}

bool bind_locked(std::string *why)
{
    void *h[k_nlibs] = {};
    Lmid_t ns = LM_ID_NEWLM;
    void *alloc = load_allocator(ns, why);
    if (!alloc) return false;
    for (unsigned i = 0; i < k_nlibs; i++) {
        h[i] = dlmopen(ns, k_libs[i], RTLD_NOW | RTLD_LOCAL);
        if (!h[i] || (i == 0 && !find_libc(h[0], alloc, why))) {
            const char *e = h[i] ? nullptr : dlerror();
            if (why && !h[i])
                *why = std::string("cannot load ") + k_libs[i] +
                       " into dprobe's namespace: " + (e ? e : "unknown error");
            close_handles(h, alloc);
            return false;
        }
    }
    void *fn[k_nsyms];
    for (size_t i = 0; i < k_nsyms; i++) {
        fn[i] = dlsym(h[k_syms[i].lib], k_syms[i].name);
        if (!fn[i]) {
            if (why)
                *why = std::string(k_libs[k_syms[i].lib]) + " has no function " + k_syms[i].name;
            close_handles(h, alloc);
            return false;
        }
    }
    for (size_t i = 0; i < k_nsyms; i++)
        __atomic_store_n(&dprobe_private_ns_slots[i], fn[i], __ATOMIC_RELAXED);
    std::memcpy(ns_handles, h, sizeof h);
    ns_alloc_handle = alloc;
    ns_bound.store(true, std::memory_order_release);
    return true;
}

} // namespace

bool private_ns_bind(std::string *why)
{
    if (ns_bound.load(std::memory_order_acquire)) return true;
    std::lock_guard<std::mutex> g(ns_lock);
    return ns_bound.load(std::memory_order_relaxed) || bind_locked(why);
}

void private_ns_unbind()
{
    std::lock_guard<std::mutex> g(ns_lock);
    if (!ns_bound.load(std::memory_order_relaxed)) return;
    for (size_t i = 0; i < k_nsyms; i++)
        __atomic_store_n(&dprobe_private_ns_slots[i],
                         reinterpret_cast<void *>(&dprobe_private_ns_lazy), __ATOMIC_RELAXED);
    ns_bound.store(false, std::memory_order_release);
    close_handles(ns_handles, ns_alloc_handle);
}

void private_ns_set_allocator(const private_ns_allocator *a)
{
    std::lock_guard<std::mutex> g(ns_lock);
    g_alloc = a;
}

void private_ns_set_allocator_object(const char *path)
{
    std::lock_guard<std::mutex> g(ns_lock);
    g_alloc_object = path;
}

bool private_ns_bound()
{
    return ns_bound.load(std::memory_order_acquire);
}

} // namespace dprobe::arch

// The lazy entry's work: bind, or say why not and stop (the caller of a libdw, libelf or
// Zydis function has no way to hear of it).
extern "C" void *dprobe_private_ns_resolve(unsigned index)
{
    std::string why;
    if (!dprobe::arch::private_ns_bind(&why)) {
        why = "dprobe: " + why + "\n";
        if (write(STDERR_FILENO, why.data(), why.size()) < 0) {
        }
        std::abort();
    }
    return __atomic_load_n(&dprobe_private_ns_slots[index], __ATOMIC_RELAXED);
}
