/*
 * Loads libdlzip.so (next to the program), which needs libz.so.1, after it started, and
 * runs its compress/uncompress round trip: libz is in the process before (dprobe's libdw
 * needs it), and becomes the program's only with that load.
 */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(void)
{
    char path[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", path, sizeof path - 32);
    if (n <= 0) return 1;
    path[n] = 0;
    strcpy(strrchr(path, '/') + 1, "libdlzip.so");
    void *h = dlopen(path, RTLD_NOW);
    if (!h) {
        fprintf(stderr, "%s\n", dlerror());
        return 1;
    }
    int (*roundtrip)(void) = (int (*)(void))dlsym(h, "dlzip_roundtrip");
    int r = roundtrip ? roundtrip() : 9;
    printf("roundtrip %d\n", r);
    return r;
}
