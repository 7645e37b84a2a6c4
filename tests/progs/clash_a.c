/* Defines clash_value(), as libclash_b.so does (tests/progs/symclash.c). */
int clash_value(int x)
{
    return x + 1;
}
