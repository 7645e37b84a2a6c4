// The probed function of bench_jprobe, built once per flavour (JPB_NAME names it).
__attribute__((noinline, used)) unsigned long JPB_NAME(unsigned long x)
{
    return x * 3 + 1;
}
