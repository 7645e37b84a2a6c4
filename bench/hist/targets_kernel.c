/* Targets of the kernel uprobe peers (no patch site: dprobe leaves them alone). Each starts
 * with the 5-byte NOP (0f 1f 44 00 00, spelled out: the assembler drops a zero displacement),
 * labelled NAME_nop, the kernel's cheapest uprobe place (it emulates that NOP instead of
 * stepping it, as bench/peers measures); the arguments are still in %rdi and %rsi there. */
#define KTARGET(name)                                                                              \
    __attribute__((noinline)) unsigned long name(unsigned long x, unsigned long y)                 \
    {                                                                                              \
        __asm__ volatile(".globl " #name "_nop\n" #name                                            \
                         "_nop:\n\t.byte 0x0f, 0x1f, 0x44, 0x00, 0x00"                             \
                         :                                                                         \
                         : "D"(x), "S"(y)                                                          \
                         : "memory");                                                              \
        return x + y + 1;                                                                          \
    }

KTARGET(hist_bench_kup_event)
KTARGET(hist_bench_kup_trigger)
KTARGET(hist_bench_kup_entexit)
KTARGET(hist_bench_kup_recipe)
