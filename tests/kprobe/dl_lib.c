/* A library the kprobe tests dlopen, probe and dlclose. */
__attribute__((noinline)) unsigned long dl_target(unsigned long x)
{
    __asm__ volatile("" : "+r"(x));
    return x * 3;
}
