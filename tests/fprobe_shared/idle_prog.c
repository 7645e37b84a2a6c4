/*
 * A program built with patch sites and linked with libdprobe that registers nothing: it
 * must run as before. Checked from inside: the __fentry__ calls are NOPs (turned so at load,
 * like the kernel at boot), no signal handler was installed, no thread was started, and
 * every function still computes what it should.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <dirent.h>

__attribute__((noinline)) unsigned long idle_fib(unsigned long n)
{
    return n < 2 ? n : idle_fib(n - 1) + idle_fib(n - 2);
}

static int count_threads(void)
{
    DIR *d = opendir("/proc/self/task");
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (e->d_name[0] != '.') n++;
    if (d) closedir(d);
    return n;
}

int main(void)
{
    int failures = 0;
    if (idle_fib(20) != 6765) {
        fprintf(stderr, "idle_fib(20) is wrong\n");
        failures++;
    }
    const unsigned char *p = (const unsigned char *)idle_fib;
    if (p[0] == 0xf3 && p[1] == 0x0f && p[2] == 0x1e && p[3] == 0xfa) p += 4; /* endbr64 */
    /* -mfentry in PIE: call *__fentry__@GOTPCREL(%rip) (ff 15); must now be a 6-byte NOP. */
    static const unsigned char nop6[] = {0x66, 0x0f, 0x1f, 0x44, 0x00, 0x00};
    static const unsigned char nop5[] = {0x0f, 0x1f, 0x44, 0x00, 0x00};
    if (memcmp(p, nop6, 6) != 0 && memcmp(p, nop5, 5) != 0) {
        fprintf(stderr, "the site of idle_fib is not a NOP: %02x %02x %02x\n", p[0], p[1], p[2]);
        failures++;
    }
    int sigs[] = {SIGTRAP, SIGSEGV, SIGBUS, SIGILL};
    for (unsigned i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction sa;
        sigaction(sigs[i], NULL, &sa);
        if (sa.sa_handler != SIG_DFL) {
            fprintf(stderr, "a handler was installed for signal %d\n", sigs[i]);
            failures++;
        }
    }
    if (count_threads() != 1) {
        fprintf(stderr, "%d threads instead of 1\n", count_threads());
        failures++;
    }
    printf("%s\n", failures ? "FAILED" : "runs as before");
    return failures != 0;
}
