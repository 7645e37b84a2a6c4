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

/* The frame, from %rbp: the callee-saved registers, then the frame slot's address, how the
 * handler came back (0: it returned; 1, then 2: through jprobe_return), where the call of the
 * handler put its return address, a pad, and the slot's previous value (where the frame's
 * %rsp points, JF_SIZE below %rbp). MXCSR is not saved, as in the ftrace trampolines
 * (ftrace_tramp.S): a handler keeps its control bits (callee-saved) and may raise sticky
 * exception flags, as any called function may. */
#define JF_SLOT -48
#define JF_HOW -56
#define JF_RETSLOT -64
#define JF_PREV -80
#define JF_SIZE 80

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
	sub $40, %rsp
	movq $0, JF_HOW(%rbp)
	mov JC_FRAME_SLOT(%rdi), %rax
	mov %rax, JF_SLOT(%rbp)
	mov (%rax), %rcx
	mov %rcx, JF_PREV(%rbp)
	mov %rsp, (%rax)		/* where jprobe_return() comes back to */
	mov %rdi, %rbx

	/* The stack arguments' copy (JC_STACK_LEN bytes, a multiple of 16, copied 16 at a time
	 * with general registers: rep movsb's start-up costs more), 16-byte aligned; the call
	 * below pushes our return address under it. */
	mov JC_STACK_LEN(%rbx), %rcx
	mov JC_STACK(%rbx), %rsi
	sub %rcx, %rsp
1:	sub $16, %rcx
	jb 2f
	mov (%rsi,%rcx), %rax
	mov 8(%rsi,%rcx), %rdx
	mov %rax, (%rsp,%rcx)
	mov %rdx, 8(%rsp,%rcx)
	jmp 1b
2:
	lea -8(%rsp), %rax
	mov %rax, JF_RETSLOT(%rbp)	/* where the call below puts its return address */

	/* xmm0-7 (or ymm/zmm when their upper halves were live at the entry). */
	mov JC_VEC(%rbx), %rsi
	test %rsi, %rsi
	jz 4f
	mov JC_VEC_SIZE(%rbx), %rdx
	cmpq $0, JC_WIDE(%rbx)
	jne 5f
	.irp r, 0, 1, 2, 3, 4, 5, 6, 7
	movdqu (%rsi), %xmm\r
	add %rdx, %rsi
	.endr
	jmp 4f
5:	cmp $64, %rdx
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
	/* A call, so that returns stay paired with calls for the return-stack predictor. */
	call *%r11
.Ljprobe_landing:
	/* The handler returned, or jprobe_return() returned here in its place (JF_HOW 1): the
	 * predictor still holds the address of this call's return, which a ret to this very
	 * place consumes (predicted), so the returns below are predicted again. */
	cmpq $1, JF_HOW(%rbp)
	jne 7f
	movq $2, JF_HOW(%rbp)
	lea .Ljprobe_landing(%rip), %rax
	push %rax
	ret
7:	cmpq $0, JF_HOW(%rbp)
	sete %al
	movzbl %al, %eax	/* 1: the handler returned */
	lea JF_PREV(%rbp), %rsp
	cmpb $0, dprobe_have_avx(%rip)
	je 6f
	vzeroupper			/* what the handler may have left */
6:
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

/* void jprobe_return(void) (the kernel's was arch code too): back to the hit from the jprobe
 * handler running on this thread, whose frame dprobe_jprobe_frame holds; returns (doing
 * nothing) outside one. Its ret goes to where the handler's call would have returned. */
	.globl jprobe_return
	.type jprobe_return, @function
jprobe_return:
	.cfi_startproc
	mov dprobe_jprobe_frame@gottpoff(%rip), %rax
	mov %fs:(%rax), %rdi
	test %rdi, %rdi
	jz 1f
	push %rdi
	.cfi_adjust_cfa_offset 8
	call dprobe_jprobe_no_return	/* ASan: the handler's frames go */
	pop %rdi
	.cfi_adjust_cfa_offset -8
	lea JF_SIZE(%rdi), %rbp
	movq $1, JF_HOW(%rbp)
	mov JF_RETSLOT(%rbp), %rsp
	ret
1:	ret
	.cfi_endproc
	.size jprobe_return, . - jprobe_return

	.section .note.GNU-stack, "", @progbits
