/*
 * The loader's debugger hook. ld.so calls _dl_debug_state() (a lone `ret`, the address
 * debuggers find in _r_debug.r_brk) whenever the list of loaded objects is about to change
 * and when it has changed; core/dl_notify.cpp makes its first bytes jump here (through a
 * `jmp *0(%rip)` near ld.so) when something needs to hear about dlopen and dlclose.
 *
 * The caller in ld.so expects the lone `ret`: it may keep values in any register across
 * the call. So everything is preserved: the general registers, rflags (with DF), and the
 * whole x87/SSE/AVX/AVX-512 state (xsave, sized at startup by ext_state.cpp).
 */
#include "arch/x86_64/tramp_macros.inc"

	.section dprobe_noprobe_text, "ax", @progbits
	.globl dprobe_dl_debug_hook
	.hidden dprobe_dl_debug_hook
	.type dprobe_dl_debug_hook, @function
	.p2align 4
dprobe_dl_debug_hook:
	.cfi_startproc
	push %rbp
	.cfi_adjust_cfa_offset 8
	.cfi_rel_offset rbp, 0
	mov %rsp, %rbp
	.cfi_def_cfa_register rbp
	pushfq
	push %rax
	push %rcx
	push %rdx
	push %rsi
	push %rdi
	push %r8
	push %r9
	push %r10
	push %r11
	XSAVE_AREA_ALLOC
	mov $-1, %eax
	mov $-1, %edx
	xsave (%rsp)
	cld
	call dprobe_dl_event
	mov $-1, %eax
	mov $-1, %edx
	xrstor (%rsp)
	lea -80(%rbp), %rsp
	pop %r11
	pop %r10
	pop %r9
	pop %r8
	pop %rdi
	pop %rsi
	pop %rdx
	pop %rcx
	pop %rax
	popfq
	pop %rbp
	.cfi_def_cfa rsp, 8
	ret
	.cfi_endproc
	.size dprobe_dl_debug_hook, . - dprobe_dl_debug_hook

	.section .note.GNU-stack, "", @progbits
