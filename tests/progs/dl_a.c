/* libdl_a.so for dl_reload.c: the same size as libdl_b.so, so both load at one address. */
#define NOINLINE __attribute__((noinline))
NOINLINE int fa_helper(int x)
{
    return x * 2;
}
int fa(int x)
{
    return fa_helper(x) + 1;
}
