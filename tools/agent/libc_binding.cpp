// What libdprobe-preload.so calls when it allocates or locks: never the program's code.
//
// A program may define malloc, free, pthread_mutex_lock... (its own allocator, a lock
// profiler): the dynamic linker binds every object's calls to the program's definitions,
// dprobe's too. So the preload defines them itself, hidden (the calls of everything linked
// into it bind here at link time and nothing else sees them):
//   - the allocator family: the agent's allocator, on pages it maps (private_alloc.h);
//   - the mutex and rwlock calls (std::mutex, std::shared_mutex): the C library's own
//     implementation, by its internal names (__pthread_mutex_lock@GLIBC_2.2.5 ...), which
//     no program interposes.
// "Linked into it" covers the libraries the preload links in from their archives (libstdc++,
// libfuse3: their operator new, their buffers). libdw, libelf and Zydis run in the
// preload's own namespace (arch/x86_64/private_ns.h), on that namespace's C library, whose
// malloc family binds to libdprobe-nsalloc.so: registered below, the agent's allocator too.
#include "tools/agent/private_alloc.h"

#include "arch/x86_64/private_ns.h"

#include <pthread.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

using namespace dprobe::agent;

// Hidden: out of the dynamic symbol table. The C library's headers declare them with
// default visibility, which -fvisibility=hidden does not override: the version script
// (exports.map) names them local.
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

// The namespace's allocator: the same, registered before any other constructor of the preload
// runs (one could call into libdw, which binds the namespace on its first call).
namespace
{
const dprobe::arch::private_ns_allocator k_ns_allocator = {palloc, palloc_aligned, prealloc,
                                                           pfree,  pusable,        pown};
__attribute__((constructor(101))) void register_ns_allocator()
{
    dprobe::arch::private_ns_set_allocator(&k_ns_allocator);
}
} // namespace

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
