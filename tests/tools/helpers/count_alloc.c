/* A preloaded library for the tests of `dprobe record`: counts the calls of malloc, free,
 * calloc, realloc and pthread_mutex_lock made from dprobe's own objects (the caller's
 * address in libdprobe-preload.so, or in one of the libraries named in $COUNT_ALLOC_LIBS,
 * space-separated: those only dprobe brought into the program, libelf, libdw...) and made
 * on dprobe's threads (named dprobe-*), forwards
 * them to the C library's own implementation, and writes the counts to $COUNT_ALLOC_OUT at
 * exit: "EXE direct=N threads=N all=N". Preloaded after the agent, it sees every call of these
 * names that the dynamic linker binds to the first definition: the program's, libc's,
 * libstdc++'s... and the agent's if it called them. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

extern void *__libc_malloc(size_t);
extern void __libc_free(void *);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern int libc_mutex_lock(pthread_mutex_t *);
__asm__(".symver libc_mutex_lock, __pthread_mutex_lock@GLIBC_2.2.5");

static _Atomic unsigned long direct, on_threads, all;
static __thread int busy;

/* Whether PATH is one of dprobe's objects. */
static int dprobe_object(const char *path)
{
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    if (strstr(base, "libdprobe-preload")) return 1;
    const char *libs = getenv("COUNT_ALLOC_LIBS");
    size_t n = strlen(base);
    for (const char *p = libs; p && *p;) {
        const char *end = strchr(p, ' ');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len && len <= n && strncmp(base, p, len) == 0)
            return 1; /* "libdw.so" names libdw.so.1 */
        p = end ? end + 1 : p + len;
    }
    return 0;
}

static void count(void *caller)
{
    if (busy) return;
    busy = 1;
    all++;
    Dl_info info;
    if (dladdr(caller, &info) && info.dli_fname && dprobe_object(info.dli_fname)) direct++;
    char name[17] = {0};
    prctl(PR_GET_NAME, name);
    if (strncmp(name, "dprobe-", 7) == 0) on_threads++;
    busy = 0;
}

void *malloc(size_t n)
{
    count(__builtin_return_address(0));
    return __libc_malloc(n);
}
void free(void *p)
{
    count(__builtin_return_address(0));
    __libc_free(p);
}
void *calloc(size_t n, size_t s)
{
    count(__builtin_return_address(0));
    return __libc_calloc(n, s);
}
void *realloc(void *p, size_t n)
{
    count(__builtin_return_address(0));
    return __libc_realloc(p, n);
}
int pthread_mutex_lock(pthread_mutex_t *m)
{
    count(__builtin_return_address(0));
    return libc_mutex_lock(m);
}

__attribute__((destructor)) static void report(void)
{
    const char *out = getenv("COUNT_ALLOC_OUT");
    if (!out) return;
    char path[4200], line[128];
    snprintf(path, sizeof path, "%s.%d", out, getpid());
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return;
    char exe[256] = "?";
    ssize_t e = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (e > 0) exe[e] = '\0';
    const char *base = strrchr(exe, '/') ? strrchr(exe, '/') + 1 : exe;
    int n = snprintf(line, sizeof line, "%s direct=%lu threads=%lu all=%lu\n", base, direct,
                     on_threads, all);
    write(fd, line, (size_t)n);
    close(fd);
}
