/* The library pending_probe_test loads, unloads and loads again. Its constructor calls
 * pend_work: a probe armed at the load sees that call. pend_first and pend_second are next
 * to each other, for probes at pend_first+<distance> (the kernel resolves an offset past a
 * symbol's end to the function it lands in). */
#define NOINLINE __attribute__((noinline, used))

NOINLINE int pend_work(int x)
{
    __asm__ volatile("" : "+r"(x));
    return x * 2 + 1;
}

NOINLINE long pend_first(long a)
{
    __asm__ volatile("" : "+r"(a));
    return a + 100;
}

NOINLINE long pend_second(long a)
{
    __asm__ volatile("" : "+r"(a));
    return a + 200;
}

int pend_ctor_result;

__attribute__((constructor)) static void pend_init(void)
{
    pend_ctor_result = pend_work(20);
}

/* Two functions of known instructions, one right after the other: pend_asm_b's first
 * instruction is a 10-byte movabs, so pend_asm_a+<distance>+1 lands inside it (not an
 * instruction boundary) and pend_asm_a+<distance>+10 on its ret. */
__asm__(".text\n"
        ".globl pend_asm_a\n"
        ".type pend_asm_a, @function\n"
        "pend_asm_a:\n"
        "\tmovq %rdi, %rax\n"
        "\tret\n"
        ".size pend_asm_a, .-pend_asm_a\n"
        ".globl pend_asm_b\n"
        ".type pend_asm_b, @function\n"
        "pend_asm_b:\n"
        "\tmovabsq $0x1122334455667788, %rax\n"
        "\tret\n"
        ".size pend_asm_b, .-pend_asm_b\n");
