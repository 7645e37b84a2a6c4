/* libdl_b.so for dl_reload.c: the same size as libdl_a.so, so both load at one address. */
#define NOINLINE __attribute__((noinline))
NOINLINE int fb_helper(int x)
{
    return x * 3;
}
int fb(int x)
{
    return fb_helper(x) + 1;
}
