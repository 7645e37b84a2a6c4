/* DWARF probes test program: every line marked "probe:TAG" prints TAG and key=value pairs
 * that a probe on that line, fetching the variables by name, must see too (dwarf_e2e.py).
 * Built with -g at -O0 and at -O2; the functions are noinline so each has one copy. A probed
 * printf stays on one line, however long, so that its line is where every value is ready. */
/* The layout is part of the test (lines found by their marks, counted from declarations). */
/* clang-format off */
#include <stdio.h>

#define NOINLINE __attribute__((noinline))

struct point {
    int x;
    int y;
};

struct item {
    long id;
    struct point pos;
    unsigned flags : 3;
    unsigned level : 5;
    const char *name;
    int hist[4];
    struct item *next;
};

long counter = 100; /* a global; the library has a static namesake */
static int calls;   /* a file-scope static */
struct point origin = {7, -7};

int lib_step(int k); /* libdwlib.so */

/* Inlined into both callers at -O2: its line is then in two places. */
static inline int twice(int v)
{
    return v * 2; /* line:twice */
}

NOINLINE long score(struct item *it, int scale)
{
    long s = it->id * scale;
    s += it->pos.x - it->pos.y;
    calls++;
    printf("score s=%ld x=%d y=%d flags=%u level=%u name=%s h2=%d scale=%d id=%ld\n", s, it->pos.x, it->pos.y, it->flags, it->level, it->name, it->hist[2], scale, it->id); /* probe:score */
    return s + twice(scale);
}

/* A second name of score, which only the symbol table knows. */
long score_alias(struct item *it, int scale) __attribute__((alias("score")));

NOINLINE int sum_array(const int *a, int n)
{
    int total = 0;
    for (int i = 0; i < n; i++) {
        total += a[i];
        printf("sum i=%d total=%d a1=%d\n", i, total, a[1]); /* probe:sum */
    }
    return total + twice(n);
}

NOINLINE void consume(struct point *p, int *arr, char *word)
{
    __asm__ volatile("" : : "r"(p), "r"(arr), "r"(word) : "memory");
}

NOINLINE void locals(int seed)
{
    struct point pt = {seed, seed * 2};
    int arr[3] = {seed + 1, seed + 2, seed + 3};
    char word[8];

    /* A line without code. */
    snprintf(word, sizeof word, "w%d", seed);
    consume(&pt, arr, word);
    printf("locals seed=%d ptx=%d pty=%d arr={%d,%d,%d} word=%s counter=%ld calls=%d oy=%d\n", seed, pt.x, pt.y, arr[0], arr[1], arr[2], word, counter, calls, origin.y); /* probe:locals */
}

NOINLINE double half(double d, int n)
{
    return d / 2 + n; /* line:half */
}

int main(void)
{
    int data[5] = {3, 1, 4, 1, 5};
    struct item b = {2, {5, 6}, 1, 9, "beta", {10, 11, 12, 13}, NULL};
    struct item a = {1, {3, 4}, 5, 17, "alpha", {20, 21, 22, 23}, &b};

    for (int k = 0; k < 2; k++) {
        counter += score(k ? &b : &a, k + 2);
        locals(k * 10);
        counter += lib_step(k);
    }
    counter += sum_array(data, 5);
    printf("end counter=%ld half=%g\n", counter, half(3.0, 1));
    return 0;
}
