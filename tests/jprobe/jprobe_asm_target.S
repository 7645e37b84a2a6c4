/* A function without DWARF for its parameters (the assembler describes none): a jprobe on it
 * copies JPROBE_MAX_STACK_SIZE bytes of stack, whatever is there, read without faulting. */
	.text
	.globl jp_asm_target
	.type jp_asm_target, @function
jp_asm_target:
	.cfi_startproc
	mov %rdi, %rax
	add $1, %rax
	ret
	.cfi_endproc
	.size jp_asm_target, . - jp_asm_target

	.section .note.GNU-stack, "", @progbits
