/* A program with its own allocator (a bump allocator: malloc, calloc and realloc carve from
 * a static arena, free does nothing) that forks. Its function graph must hold exactly its
 * own calls: dprobe must never call into this allocator (nor run any of its code), in the
 * parent or in the child. */
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

static char arena[1 << 20];
static size_t used;
static int frees;

NOINLINE void *malloc(size_t n)
{
    n = (n + 15) & ~(size_t)15;
    if (used + n > sizeof arena) return NULL;
    void *p = arena + used;
    used += n;
    return p;
}

NOINLINE void free(void *p)
{
    if (p) frees++;
}

NOINLINE void *calloc(size_t n, size_t size)
{
    void *p = malloc(n * size);
    if (p) memset(p, 0, n * size);
    return p;
}

NOINLINE void *realloc(void *old, size_t n)
{
    void *p = malloc(n);
    if (p && old) memcpy(p, old, n); /* the arena is big enough to read past an old block */
    return p;
}

NOINLINE int work(int n)
{
    char *a = malloc(32);
    char *b = calloc(4, 8);
    snprintf(a, 32, "%d", n);
    int r = (int)strlen(a) + b[0];
    free(a);
    free(b);
    return r;
}

int main(void)
{
    int r = work(7);
    pid_t p = fork();
    if (p == 0) {
        r += work(11);
        _exit(r == 3 ? 0 : 1);
    }
    int st = 0;
    waitpid(p, &st, 0);
    /* write(2): stdio would allocate from the arena too, as it may. How much of the arena
     * is in use goes to stderr: the C library, and libraries loaded for dprobe before it
     * can redirect them, take some of it. */
    char line[64];
    int n = snprintf(line, sizeof line, "%d %d\n", r, WEXITSTATUS(st));
    write(1, line, (size_t)n);
    n = snprintf(line, sizeof line, "arena used: %zu bytes\n", used);
    write(2, line, (size_t)n);
    return 0;
}
