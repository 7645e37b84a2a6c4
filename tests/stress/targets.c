/* The function the stress test calls, built once per site flavour (see CMakeLists.txt):
 * STRESS_FN is stress_fentry (-pg -mfentry), stress_pfe (-fpatchable-function-entry=5) or
 * stress_plain (no site: reached through a jump site). stress_asm (targets_asm.S) computes
 * the same value. Each call's tag comes back mixed, so a probe that disturbs a register or
 * the return value shows up as a wrong result. */
#define STRESS_K 0x9e3779b97f4a7c15UL

__attribute__((noinline)) unsigned long STRESS_FN(unsigned long tag)
{
    unsigned long x = tag * STRESS_K;
    x ^= x >> 29;
    return x + tag;
}
