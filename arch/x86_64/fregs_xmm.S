/*
 * void *ftrace_regs_get_xmm(struct ftrace_regs *fregs, unsigned int n)
 * (include/dprobe/ptrace.h): the vector register N as a probed function had it, 16 bytes.
 *
 * Out of line, and holding vector instructions, on purpose: a handler that calls it is
 * never scanned clean of the extended state (arch/x86_64/ext_state.h), so its hits take
 * the full path, where the trampoline saved the registers (fregs->vec). fregs->vec is NULL
 * only in a light hit (ftrace_tramp.S), whose dispatch and handlers leave the registers
 * alone: they still hold the probed function's values then, and are copied (low 128 bits,
 * with VEX stores where the CPU has AVX, which leave the upper state as it is) into a
 * per-thread buffer.
 */
#include "arch/x86_64/ftrace_frame.h"

	.section dprobe_noprobe_text, "ax", @progbits

	.globl ftrace_regs_get_xmm
	.type ftrace_regs_get_xmm, @function
	.p2align 4
ftrace_regs_get_xmm:
	.cfi_startproc
	mov %esi, %esi
	mov FREGS_VEC(%rdi), %rax
	test %rax, %rax
	jz 1f
	imul FREGS_VEC_SIZE(%rdi), %rsi
	add %rsi, %rax
	ret
1:	movq dprobe_live_xmm@gottpoff(%rip), %rax
	add %fs:0, %rax
	cmpb $0, dprobe_have_avx(%rip)
	je 2f
	.irp n, 0, 1, 2, 3, 4, 5, 6, 7
	vmovdqu %xmm\n, \n * 16(%rax)
	.endr
	jmp 3f
2:
	.irp n, 0, 1, 2, 3, 4, 5, 6, 7
	movdqu %xmm\n, \n * 16(%rax)
	.endr
3:	and $7, %esi
	shl $4, %esi
	add %rsi, %rax
	ret
	.cfi_endproc
	.size ftrace_regs_get_xmm, . - ftrace_regs_get_xmm

	.section .tbss, "awT", @nobits
	.p2align 4
	.type dprobe_live_xmm, @object
dprobe_live_xmm:
	.zero 128
	.size dprobe_live_xmm, . - dprobe_live_xmm

	.section .note.GNU-stack, "", @progbits
