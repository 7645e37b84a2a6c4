/* unsigned long stress_asm(unsigned long tag): the value of targets.c, in assembly so the
 * stress test knows where its instructions are:
 *  - the entry (after endbr64) takes a jump site (fprobe, kretprobe): its region is the
 *    movabs; nothing up to stress_asm_int3 lies within the 24 bytes a jump site may cover;
 *  - stress_asm_int3 holds kprobes with a post handler (int3, single-stepped or boosted)
 *    and without (optimized when alone: its region then covers stress_asm_opt);
 *  - stress_asm_opt holds kprobes that are jump-optimized unless a post handler joins.
 * %rdi keeps the tag throughout, so every probe can check the call it sees. */
	.text
	.globl stress_asm, stress_asm_int3, stress_asm_opt
	.type stress_asm, @function
	.p2align 4
stress_asm:
	endbr64
	movabsq $0x9e3779b97f4a7c15, %rax
	imulq %rdi, %rax
	movq %rax, %rdx
	shrq $29, %rdx
	xorq %rdx, %rax
	nopl 0x0(%rax,%rax,1)
stress_asm_int3:
	addq %rdi, %rax
stress_asm_opt:
	movq %rax, %rcx
	shrq $3, %rcx
	addq %rcx, %rax
	subq %rcx, %rax
	ret
	.size stress_asm, . - stress_asm

	.section .note.GNU-stack, "", @progbits
