/*
 * jprobe entry and return (the kernel's setjmp_pre_handler and jprobe_return, Linux 4.14):
 * see jprobes_arch.h. The handler runs below dprobe_jprobe_call's frame, on a copy of the
 * stack-passed arguments, entered as if called by the probed function's caller: at its entry
 * %rsp is 8 modulo 16 and [rsp] is a return address into this file (its unwind information
 * leads unwinders on to the hit that called us).
 */
#include "arch/x86_64/ftrace_frame.h"

	.section dprobe_noprobe_text, "ax", @progbits

/* struct jprobe_call */
#define JC_ENTRY 0
#define JC_REGS 8
#define JC_VEC 16
#define JC_VEC_SIZE 24
#define JC_WIDE 32
#define JC_STACK 40
#define JC_STACK_LEN 48
#define JC_FRAME_SLOT 56

/* The frame, from %rbp: the callee-saved registers, then the frame slot's address, the
 * MXCSR at the call, and the slot's previous value (where the frame's %rsp points). */
#define JF_SLOT -48
#define JF_MXCSR -56
#define JF_PREV -64

/* int dprobe_jprobe_call(const struct jprobe_call *c) */
	.globl dprobe_jprobe_call
	.hidden dprobe_jprobe_call
	.type dprobe_jprobe_call, @function
dprobe_jprobe_call:
	.cfi_startproc
	push %rbp
	.cfi_def_cfa_offset 16
	.cfi_offset rbp, -16
	mov %rsp, %rbp
	.cfi_def_cfa_register rbp
	push %rbx
	.cfi_offset rbx, -24
	push %r12
	.cfi_offset r12, -32
	push %r13
	.cfi_offset r13, -40
	push %r14
	.cfi_offset r14, -48
	push %r15
	.cfi_offset r15, -56
	sub $24, %rsp
	stmxcsr JF_MXCSR(%rbp)
	mov JC_FRAME_SLOT(%rdi), %rax
	mov %rax, JF_SLOT(%rbp)
	mov (%rax), %rcx
	mov %rcx, JF_PREV(%rbp)
	mov %rsp, (%rax)		/* where jprobe_return() comes back to */
	mov %rdi, %rbx

	/* The stack arguments' copy, 16-byte aligned, then our return address. */
	mov JC_STACK_LEN(%rbx), %rcx
	add $15, %rcx
	and $-16, %rcx
	sub %rcx, %rsp
	mov %rsp, %rdi
	mov JC_STACK(%rbx), %rsi
	cld
	rep movsb
	lea .Ljprobe_returned(%rip), %rax
	push %rax

	/* xmm0-7 (or ymm/zmm when their upper halves were live at the entry). */
	mov JC_VEC(%rbx), %rsi
	test %rsi, %rsi
	jz 4f
	mov JC_VEC_SIZE(%rbx), %rdx
	cmpq $0, JC_WIDE(%rbx)
	jne 2f
	.irp r, 0, 1, 2, 3, 4, 5, 6, 7
	movdqu (%rsi), %xmm\r
	add %rdx, %rsi
	.endr
	jmp 4f
2:	cmp $64, %rdx
	je 3f
	.irp r, 0, 1, 2, 3, 4, 5, 6, 7
	vmovdqu (%rsi), %ymm\r
	add $32, %rsi
	.endr
	jmp 4f
3:
	.irp r, 0, 1, 2, 3, 4, 5, 6, 7
	vmovdqu64 (%rsi), %zmm\r
	add $64, %rsi
	.endr
4:
	/* The general argument registers, the variadic count in al, the static chain. */
	mov JC_REGS(%rbx), %r11
	mov PTR_DI(%r11), %rdi
	mov PTR_SI(%r11), %rsi
	mov PTR_DX(%r11), %rdx
	mov PTR_CX(%r11), %rcx
	mov PTR_R8(%r11), %r8
	mov PTR_R9(%r11), %r9
	mov PTR_R10(%r11), %r10
	mov PTR_AX(%r11), %rax
	mov JC_ENTRY(%rbx), %r11
	jmp *%r11

	/* The handler returned instead of calling jprobe_return(): the same way back. */
.Ljprobe_returned:
	mov $1, %eax
.Ljprobe_resume:
	lea JF_PREV(%rbp), %rsp
	cmpb $0, dprobe_have_avx(%rip)
	je 5f
	vzeroupper			/* what the handler may have left */
5:	ldmxcsr JF_MXCSR(%rbp)
	mov JF_SLOT(%rbp), %rcx
	mov JF_PREV(%rbp), %rdx
	mov %rdx, (%rcx)
	mov -8(%rbp), %rbx
	mov -16(%rbp), %r12
	mov -24(%rbp), %r13
	mov -32(%rbp), %r14
	mov -40(%rbp), %r15
	leave
	.cfi_def_cfa rsp, 8
	ret
	.cfi_endproc
	.size dprobe_jprobe_call, . - dprobe_jprobe_call

/* void dprobe_jprobe_longjmp(void *frame): FRAME is %rsp of dprobe_jprobe_call's frame. */
	.globl dprobe_jprobe_longjmp
	.hidden dprobe_jprobe_longjmp
	.type dprobe_jprobe_longjmp, @function
dprobe_jprobe_longjmp:
	.cfi_startproc
	mov %rdi, %rsp
	lea 64(%rsp), %rbp	/* -JF_PREV */
	xor %eax, %eax
	jmp .Ljprobe_resume
	.cfi_endproc
	.size dprobe_jprobe_longjmp, . - dprobe_jprobe_longjmp

	.section .note.GNU-stack, "", @progbits
