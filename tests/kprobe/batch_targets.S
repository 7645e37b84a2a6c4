/* Functions for the batch-arming tests (batch_test.cpp): BATCH_NFUNCS of each shape, and a
 * table of each.
 *   batch_site_N(x)  = (x + N + 1) * 3: a 5-byte NOP listed in __patchable_function_entries
 *                      (a patch site: a kprobe at the entry rides on it), then ordinary
 *                      instructions (a kprobe at +5 is jump-optimized);
 *   batch_plain_N(x) = (x + N + 1) * 3 + 1: no site, a frame and ordinary instructions (a
 *                      kprobe at the entry or at +1 is optimized, with a post handler it stays
 *                      an int3 probe).
 * The tables batch_site_fns / batch_plain_fns hold their addresses, batch_nfuncs their count. */
#define BATCH_NFUNCS 64

	.altmacro

	.macro site_fn n
	.globl batch_site_\n
	.type batch_site_\n, @function
	.p2align 4
batch_site_\n:
	.byte 0x0f, 0x1f, 0x44, 0x00, 0x00
	leaq \n+1(%rdi), %rax
	imulq $3, %rax, %rax
	ret
	.size batch_site_\n, . - batch_site_\n
	.pushsection __patchable_function_entries, "aw", @progbits
	.quad batch_site_\n
	.popsection
	.endm

	.macro plain_fn n
	.globl batch_plain_\n
	.type batch_plain_\n, @function
	.p2align 4
batch_plain_\n:
	pushq %rbx
	movq %rdi, %rbx
	leaq \n+1(%rbx), %rax
	imulq $3, %rax, %rax
	addq $1, %rax
	popq %rbx
	ret
	.size batch_plain_\n, . - batch_plain_\n
	.endm

	.macro fn_ptr kind, n
	.quad batch_\kind\()_\n
	.endm

	.text
	.set i, 0
	.rept BATCH_NFUNCS
	site_fn %i
	plain_fn %i
	.set i, i + 1
	.endr

	.section .data.rel.ro, "aw", @progbits
	.p2align 3
	.globl batch_site_fns, batch_plain_fns
batch_site_fns:
	.set i, 0
	.rept BATCH_NFUNCS
	fn_ptr site, %i
	.set i, i + 1
	.endr
batch_plain_fns:
	.set i, 0
	.rept BATCH_NFUNCS
	fn_ptr plain, %i
	.set i, i + 1
	.endr

	.section .rodata
	.p2align 2
	.globl batch_nfuncs
batch_nfuncs:
	.long BATCH_NFUNCS

	.section .note.GNU-stack, "", @progbits
