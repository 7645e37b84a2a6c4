/*
 * The stubs through which libdprobe-preload.so calls the libraries of its private link-map
 * namespace (private_ns.h): for each function of private_ns_syms.h, a hidden symbol of the
 * function's name that jumps through its slot in dprobe_private_ns_slots, with the
 * function's index in %r11 (scratch at any call in the psABI: the lazy entry reads it).
 * A tail jump keeps every register and the stack as the caller left them, so one stub
 * serves any prototype, variadic ones included. Kernel counterpart: none; the role is a
 * PLT's, with the slots filled by dprobe instead of the dynamic linker.
 *
 * dprobe_private_ns_lazy, where every slot points until the libraries are bound: keeps the
 * argument registers (the general ones, %al's vector count and xmm0-7), has
 * dprobe_private_ns_resolve() bind them (or abort, saying why), and jumps to the function.
 */

#define PRIVATE_NS_LIB(id, soname)

/* The slots, one 8-byte word each, in the list's order. */
	.section .data.rel.local.dprobe_private_ns, "aw", @progbits
	.p2align 3
	.globl dprobe_private_ns_slots
	.hidden dprobe_private_ns_slots
	.type dprobe_private_ns_slots, @object
dprobe_private_ns_slots:
#define PRIVATE_NS_SYM(lib, name) .quad dprobe_private_ns_lazy;
#include "arch/x86_64/private_ns_syms.h"
#undef PRIVATE_NS_SYM
	.size dprobe_private_ns_slots, . - dprobe_private_ns_slots

	.section dprobe_noprobe_text, "ax", @progbits

.macro PRIVATE_NS_STUB name, index
	.globl \name
	.hidden \name
	.type \name, @function
	.p2align 4
\name:
	.cfi_startproc
	endbr64
	mov $\index, %r11d
	jmp *dprobe_private_ns_slots + 8 * \index (%rip)
	.cfi_endproc
	.size \name, . - \name
.endm

/* __COUNTER__ (not used above) numbers them from 0, in the list's order. */
#define PRIVATE_NS_SYM(lib, name) PRIVATE_NS_STUB name, __COUNTER__;
#include "arch/x86_64/private_ns_syms.h"
#undef PRIVATE_NS_SYM

	.globl dprobe_private_ns_lazy
	.hidden dprobe_private_ns_lazy
	.type dprobe_private_ns_lazy, @function
	.p2align 4
dprobe_private_ns_lazy:
	.cfi_startproc
	endbr64
	push %rbp
	.cfi_adjust_cfa_offset 8
	.cfi_rel_offset rbp, 0
	mov %rsp, %rbp
	.cfi_def_cfa_register rbp
	push %rdi
	push %rsi
	push %rdx
	push %rcx
	push %r8
	push %r9
	push %rax
	push %r11
	/* Entered by a jump from a called stub: %rsp was 8 mod 16, now 0 mod 16 again. */
	sub $128, %rsp
	movdqu %xmm0, 0(%rsp)
	movdqu %xmm1, 16(%rsp)
	movdqu %xmm2, 32(%rsp)
	movdqu %xmm3, 48(%rsp)
	movdqu %xmm4, 64(%rsp)
	movdqu %xmm5, 80(%rsp)
	movdqu %xmm6, 96(%rsp)
	movdqu %xmm7, 112(%rsp)
	mov %r11d, %edi
	call dprobe_private_ns_resolve
	mov %rax, 128(%rsp) /* the function, popped into %r11 below */
	movdqu 0(%rsp), %xmm0
	movdqu 16(%rsp), %xmm1
	movdqu 32(%rsp), %xmm2
	movdqu 48(%rsp), %xmm3
	movdqu 64(%rsp), %xmm4
	movdqu 80(%rsp), %xmm5
	movdqu 96(%rsp), %xmm6
	movdqu 112(%rsp), %xmm7
	add $128, %rsp
	pop %r11
	pop %rax
	pop %r9
	pop %r8
	pop %rcx
	pop %rdx
	pop %rsi
	pop %rdi
	pop %rbp
	.cfi_def_cfa rsp, 8
	jmp *%r11
	.cfi_endproc
	.size dprobe_private_ns_lazy, . - dprobe_private_ns_lazy

	.section .note.GNU-stack, "", @progbits
