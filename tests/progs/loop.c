/* Runs until interrupted: `dprobe record` forwards Ctrl-C, the agent flushes, and the
 * program dies of the signal as it would have untraced. */
#include <time.h>

#define NOINLINE __attribute__((noinline))

NOINLINE int tick(int i)
{
    __asm__ volatile("" ::: "memory");
    return i + 1;
}

int main(void)
{
    struct timespec ts = {0, 10 * 1000 * 1000};
    for (int i = 0; i < 3000; i++) { /* 30 s at most */
        tick(i);
        nanosleep(&ts, 0);
    }
    return 0;
}
