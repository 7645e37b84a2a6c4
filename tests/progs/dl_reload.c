/* Loads libdl_a.so, calls fa, unloads it, then loads libdl_b.so, which the loader maps at
 * the same address (same size), and calls fb. The function graph must name each call by
 * the library loaded at that time: fa(); then fb(); - not fa(); fa();. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

static int call(const char *lib, const char *fn, void **where)
{
    char path[4096];
    snprintf(path, sizeof path, "%s", lib);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) return -1;
    int (*f)(int) = (int (*)(int))dlsym(h, fn);
    int r = f ? f(3) : -1;
    Dl_info info;
    *where = f && dladdr((void *)f, &info) ? info.dli_fbase : NULL;
    dlclose(h);
    return r;
}

int main(int argc, char **argv)
{
    (void)argc;
    char dir[4096], a[4200], b[4200];
    snprintf(dir, sizeof dir, "%s", argv[0]);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0';
    else
        strcpy(dir, ".");
    snprintf(a, sizeof a, "%s/libdl_a.so", dir);
    snprintf(b, sizeof b, "%s/libdl_b.so", dir);
    void *fa = NULL, *fb = NULL;
    int ra = call(a, "fa", &fa), rb = call(b, "fb", &fb);
    printf("%d %d %s\n", ra, rb, fa == fb ? "same address" : "elsewhere");
    return 0;
}
