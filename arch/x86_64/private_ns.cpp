// Loading and binding the preload's private namespace (see private_ns.h).
#include "arch/x86_64/private_ns.h"

#include <dlfcn.h>
#include <link.h>
#include <unistd.h>

#include <atomic>
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

enum lib_id : unsigned {
#define PRIVATE_NS_LIB(id, soname) lib_##id,
#define PRIVATE_NS_SYM(lib, name)
#include "arch/x86_64/private_ns_syms.h"
#undef PRIVATE_NS_LIB
#undef PRIVATE_NS_SYM
    k_nlibs
};

// In dlmopen order: the first one creates the namespace.
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

void close_handles(void *(&h)[k_nlibs])
{
    for (size_t i = k_nlibs; i-- > 0;)
        if (h[i]) {
            dlclose(h[i]);
            h[i] = nullptr;
        }
}

bool bind_locked(std::string *why)
{
    void *h[k_nlibs] = {};
    Lmid_t ns = LM_ID_NEWLM;
    for (unsigned i = 0; i < k_nlibs; i++) {
        h[i] = dlmopen(ns, k_libs[i], RTLD_NOW | RTLD_LOCAL);
        if (!h[i] || (i == 0 && dlinfo(h[0], RTLD_DI_LMID, &ns) != 0)) {
            const char *e = dlerror();
            if (why)
                *why = std::string("cannot load ") + k_libs[i] +
                       " into dprobe's namespace: " + (e ? e : "unknown error");
            close_handles(h);
            return false;
        }
    }
    void *fn[k_nsyms];
    for (size_t i = 0; i < k_nsyms; i++) {
        fn[i] = dlsym(h[k_syms[i].lib], k_syms[i].name);
        if (!fn[i]) {
            if (why)
                *why = std::string(k_libs[k_syms[i].lib]) + " has no function " + k_syms[i].name;
            close_handles(h);
            return false;
        }
    }
    for (size_t i = 0; i < k_nsyms; i++)
        __atomic_store_n(&dprobe_private_ns_slots[i], fn[i], __ATOMIC_RELAXED);
    std::memcpy(ns_handles, h, sizeof h);
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
    close_handles(ns_handles);
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
