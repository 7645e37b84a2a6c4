/*
 * The optimized-kprobe trampoline (the kernel's optprobe_template_func), for a probe in the
 * middle of a function, where every register may be live.
 *
 * The detour of a probe is:
 *     lea -128(%rsp), %rsp        step over the red zone the probed code may be using
 *     mov %r11, -8(%rsp)          park r11
 *     movabs $optprobe, %r11
 *     call *dprobe_optprobe_caller(%rip)
 *     lea 128(%rsp), %rsp
 *     <the relocated instructions the jmp replaced>
 *     jmp <after them>
 * Here the full state is saved: a struct pt_regs (with the complete rflags), then the whole
 * x87/SSE/AVX/AVX-512 state with xsavec (or xsave), since a handler may clobber any of it.
 * DF may be set mid-function; C code needs it clear (cld), popfq puts it back.
 */
#include "arch/x86_64/ftrace_frame.h"
#include "arch/x86_64/tramp_macros.inc"

#define OPT_FRAME 176 /* pt_regs (168) + the r11 parking slot at the top */

	.section dprobe_noprobe_text, "ax", @progbits
	.globl dprobe_optprobe_caller
	.hidden dprobe_optprobe_caller
	.type dprobe_optprobe_caller, @function
	.p2align 5
dprobe_optprobe_caller:
	.cfi_startproc
	lea -OPT_FRAME(%rsp), %rsp
	.cfi_adjust_cfa_offset OPT_FRAME
	pushfq
	popq PTR_FLAGS(%rsp)
	mov %rax, PTR_AX(%rsp)
	mov OPT_FRAME - 8(%rsp), %rax
	mov %rax, PTR_R11(%rsp)
	SAVE_SCRATCH_GPRS
	STORE_CALLEE_SAVED
	movq $-1, PTR_ORIG_AX(%rsp)
	movq $0, PTR_IP(%rsp)
	movq $0x33, PTR_CS(%rsp)
	movq $0x2b, PTR_SS(%rsp)
	/* The probed code's stack pointer: above the return address and the red zone. */
	lea OPT_FRAME + 8 + 128(%rsp), %rax
	mov %rax, PTR_SP(%rsp)
	mov %rsp, %rbx
	.cfi_def_cfa_register rbx
	/* XSAVE area: dprobe_xsave_size bytes, 64-byte aligned, below the frame. */
	sub dprobe_xsave_size(%rip), %rsp
	and $-64, %rsp
	/* Neither xsave nor xsavec writes the header's reserved bytes, and xrstor faults
	 * unless they are zero: clear the 64-byte header first. */
	movq $0, 512(%rsp)
	movq $0, 520(%rsp)
	movq $0, 528(%rsp)
	movq $0, 536(%rsp)
	movq $0, 544(%rsp)
	movq $0, 552(%rsp)
	movq $0, 560(%rsp)
	movq $0, 568(%rsp)
	mov $-1, %eax
	mov $-1, %edx
	cmpb $0, dprobe_have_xsavec(%rip)
	je 1f
	xsavec (%rsp)
	jmp 2f
1:	xsave (%rsp)
2:
	cld
	mov %r11, %rdi
	mov %rbx, %rsi
	call dprobe_optprobe_dispatch
	mov $-1, %eax
	mov $-1, %edx
	xrstor (%rsp)
	mov %rbx, %rsp
	.cfi_def_cfa_register rsp
	/* A handler may change any register in pt_regs: all are written back. */
	RESTORE_SCRATCH_GPRS
	mov PTR_R11(%rsp), %r11
	mov PTR_R12(%rsp), %r12
	mov PTR_R13(%rsp), %r13
	mov PTR_R14(%rsp), %r14
	mov PTR_R15(%rsp), %r15
	mov PTR_AX(%rsp), %rax
	pushq PTR_FLAGS(%rsp)
	popfq
	lea OPT_FRAME(%rsp), %rsp
	.cfi_adjust_cfa_offset -OPT_FRAME
	ret
	.cfi_endproc
	.size dprobe_optprobe_caller, . - dprobe_optprobe_caller

	.section .note.GNU-stack, "", @progbits
