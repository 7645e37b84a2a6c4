/* A leaf function that keeps live state everywhere a mid-function probe could disturb it:
 * the red zone, xmm registers, the flags and DF.
 *   unsigned long opt_leaf(unsigned long a, unsigned long b)
 * Every instruction boundary between the labels opt_leaf_first..opt_leaf_last is probed in
 * turn by the test. */
	.text
	.globl opt_leaf, opt_leaf_end
	.type opt_leaf, @function
	.p2align 4
opt_leaf:
	movq %rdi, -8(%rsp)            /* red zone */
	movq %rsi, -16(%rsp)
	movq %rdi, %xmm3               /* vector state live across the body */
	pinsrq $1, %rsi, %xmm3
	leaq 0x12345(%rdi), %rax
	imulq $7, %rax, %rax
	addq -16(%rsp), %rax
	cmpq %rsi, %rdi                /* flags live across the next instructions */
	movq $3, %rcx
	movq %rax, %rdx
	xorl %r8d, %r8d
	nop
	cmovb %rcx, %r8
	addq %r8, %rax
	movq %xmm3, %r9
	pextrq $1, %xmm3, %r10
	addq %r9, %rax
	subq %r10, %rax
	addq -8(%rsp), %rax
	addq -16(%rsp), %rax
	ret
opt_leaf_end:
	.size opt_leaf, . - opt_leaf

	.section .note.GNU-stack, "", @progbits
