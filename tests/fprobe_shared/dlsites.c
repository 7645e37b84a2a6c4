/* A library with patch sites, loaded with dlopen by the test. */
__attribute__((noinline)) unsigned long dl_square(unsigned long x)
{
    return x * x;
}
__attribute__((noinline)) unsigned long dl_cube(unsigned long x)
{
    return dl_square(x) * x;
}
__attribute__((noinline)) unsigned long dl_other(unsigned long x)
{
    return x + 7;
}

/* Runs when the library is loaded: its probed call is seen only if the probe was armed
 * before the library's constructors ran. */
unsigned long dl_ctor_result;
__attribute__((constructor)) static void on_load(void)
{
    dl_ctor_result = dl_square(4);
}
