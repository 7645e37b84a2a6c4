/* flags_probe_target: a function with a patchable-entry NOP (listed in
 * __patchable_function_entries like the compiler does) that returns the rflags it was
 * entered with. call_with_flags loads chosen arithmetic flags right before the call and
 * reports the flags seen at entry and after the return. */
	.text
	.globl flags_probe_target
	.type flags_probe_target, @function
	.p2align 4
flags_probe_target:
1:	.byte 0x0f, 0x1f, 0x44, 0x00, 0x00
	pushfq
	popq %rax
	ret
	.size flags_probe_target, . - flags_probe_target

	.section __patchable_function_entries, "awo", @progbits, flags_probe_target
	.p2align 3
	.quad 1b

	.text
	.globl call_with_flags
	.type call_with_flags, @function
	.p2align 4
/* unsigned long call_with_flags(unsigned long flags_in, unsigned long *at_entry) */
call_with_flags:
	pushq %rbx
	movq %rsi, %rbx
	pushq %rdi
	popfq
	call flags_probe_target
	pushfq
	movq %rax, (%rbx)
	popq %rax
	popq %rbx
	ret
	.size call_with_flags, . - call_with_flags

	.section .note.GNU-stack, "", @progbits
