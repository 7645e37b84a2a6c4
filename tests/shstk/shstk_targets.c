/* Probed functions of shstk_prog.c, built in each site flavour (SHSTK_FN names them). */
#define CAT2(a, b) a##b
#define CAT(a, b) CAT2(a, b)

__attribute__((noinline)) long CAT(SHSTK_FN, _leaf)(long x)
{
    return x * 3 + 1;
}

/* A hooked function that calls another one, and one that tail-calls it. */
__attribute__((noinline)) long CAT(SHSTK_FN, _mid)(long x)
{
    long r = CAT(SHSTK_FN, _leaf)(x);
    __asm__ volatile("" : "+r"(r));
    return r + 1;
}
__attribute__((noinline)) long CAT(SHSTK_FN, _tail)(long x)
{
    return CAT(SHSTK_FN, _leaf)(x + 1);
}
