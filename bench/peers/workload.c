/* The common workload of bench/peers: a non-inlined leaf function and a caller that calls
 * it N times, one call feeding the next. Every tool traces this same source, built in the
 * flavour it needs (no patch site, -fpatchable-function-entry=5, clang -fxray-instrument).
 *
 * PEERS_FLAVOUR names the copy (leaf_<flavour>, caller_<flavour>) so several flavours link
 * into one program. The leaf's body is fixed instructions, the same in every flavour, with
 * two probe points in its middle marked by symbols:
 *   leaf_<flavour>_nop   a 5-byte NOP (nopl 0x0(%rax,%rax,1))
 *   leaf_<flavour>_insn  ordinary instructions (lea; imul) that must run out of line
 *
 * PEERS_CALL_SITE (the floor flavour): the caller calls leaf_<flavour>_site, a hooked entry
 * defined elsewhere (floor_hook.S), instead of the leaf itself. */
#ifndef PEERS_FLAVOUR
#error "define PEERS_FLAVOUR"
#endif
#define PEERS_CAT2(a, b) a##_##b
#define PEERS_CAT(a, b) PEERS_CAT2(a, b)
#define PEERS_STR2(a) #a
#define PEERS_STR(a) PEERS_STR2(a)
#define LEAF PEERS_CAT(leaf, PEERS_FLAVOUR)
#define CALLER PEERS_CAT(caller, PEERS_FLAVOUR)
#define LEAF_LABEL(what) "leaf_" PEERS_STR(PEERS_FLAVOUR) "_" what

#if defined(__clang__)
#define PEERS_NOINLINE __attribute__((noinline))
#else
#define PEERS_NOINLINE __attribute__((noinline, noclone))
#endif

/* clang-format off */
PEERS_NOINLINE unsigned long LEAF(unsigned long x)
{
    __asm__ volatile("add $1, %0\n"
                     ".globl " LEAF_LABEL("nop") "\n"
                     ".type " LEAF_LABEL("nop") ", @notype\n"
                     LEAF_LABEL("nop") ":\n"
                     ".byte 0x0f, 0x1f, 0x44, 0x00, 0x00\n"
                     ".globl " LEAF_LABEL("insn") "\n"
                     ".type " LEAF_LABEL("insn") ", @notype\n"
                     LEAF_LABEL("insn") ":\n"
                     "lea 3(%0), %0\n"
                     "imul $5, %0, %0\n"
                     : "+r"(x));
    return x - 19;
}
/* clang-format on */

#ifdef PEERS_CALL_SITE
#define CALLEE PEERS_CAT(LEAF, site)
unsigned long CALLEE(unsigned long);
#else
#define CALLEE LEAF
#endif

PEERS_NOINLINE unsigned long CALLER(unsigned long n)
{
    unsigned long x = 0;
    for (unsigned long i = 0; i < n; i++)
        x = CALLEE(x);
    return x;
}
