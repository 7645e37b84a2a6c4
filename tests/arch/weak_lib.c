/* A library linked with -z now that calls a weak function nobody defines, after testing it:
 * its GOT slot holds 0 for good. ext_state_test scans it: that call is a path no thread runs,
 * not an address to read. */
extern void dprobe_test_never_defined(void) __attribute__((weak));

long weak_guarded(long x)
{
    if (dprobe_test_never_defined) dprobe_test_never_defined();
    return x + 1;
}
