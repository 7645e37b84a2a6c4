/*
 * Loads libdlplugin.so (next to the program) after it started, calls it, unloads it, and
 * loads it again, at another address this time (the range it had is kept busy meanwhile):
 * what `dprobe record --follow-loads -F 'libdlplugin.so:plugin_*'` must follow. With an
 * argument "wait" it first prints "ready PID" and waits for a line on stdin (for attach).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

struct extent {
    uintptr_t lo, hi;
};

static int find_plugin(struct dl_phdr_info *info, size_t size, void *arg)
{
    struct extent *e = arg;
    (void)size;
    if (!strstr(info->dlpi_name, "libdlplugin.so")) return 0;
    for (int i = 0; i < info->dlpi_phnum; ++i) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD) continue;
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
        if (!e->hi || lo < e->lo) e->lo = lo;
        if (hi > e->hi) e->hi = hi;
    }
    return 1;
}

int main(int argc, char **argv)
{
    char path[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", path, sizeof path - 32);
    if (n <= 0) return 1;
    path[n] = 0;
    strcpy(strrchr(path, '/') + 1, "libdlplugin.so");
    if (argc > 1 && strcmp(argv[1], "wait") == 0) {
        char line[64];
        printf("ready %d\n", (int)getpid());
        fflush(stdout);
        if (!fgets(line, sizeof line, stdin)) return 1;
    }
    int total = 0;
    for (int round = 1; round <= 2; ++round) {
        void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            fprintf(stderr, "%s\n", dlerror());
            return 1;
        }
        int (*run)(int) = (int (*)(int))dlsym(h, "plugin_run");
        total += run(round);
        struct extent e = {0, 0};
        dl_iterate_phdr(find_plugin, &e);
        dlclose(h);
        if (round == 1 && e.hi) {
            long page = sysconf(_SC_PAGESIZE);
            e.lo &= ~(uintptr_t)(page - 1);
            mmap((void *)e.lo, e.hi - e.lo, PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
        }
    }
    printf("%d\n", total);
    return 0;
}
