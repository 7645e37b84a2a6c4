/* The step of own_symbols' work that isolation_test.py's fprobe names, with its arguments
 * by name from the DWARF: a C function (the DWARF argument lookup of `f:` events finds the
 * parameters of C functions). */
__attribute__((noinline)) long work_step(int round, long total)
{
    return total + round;
}
