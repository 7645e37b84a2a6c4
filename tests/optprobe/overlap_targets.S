/* unsigned long overlap_fn(unsigned long x): x + 1, through instructions that let a probe at
 * overlap_a (its region: add + mov, 6 bytes) and one at overlap_b (mov + shr, 7 bytes) be
 * optimized in turn: A's detour jumps back to overlap_c, inside B's region.
 * overlap_run(copy, x): runs from COPY (a detour's copy of overlap_a's instruction) with
 * rax = x and rdi = 1, as a thread that was inside A's detour would.
 * overlap_resume(at, v): continues at AT with rax = rcx = V, as a thread that has run the
 * instruction at overlap_b out of line would. */
	.text
	.globl overlap_fn, overlap_a, overlap_b, overlap_c, overlap_run, overlap_resume
	.type overlap_fn, @function
	.p2align 4
overlap_fn:
	endbr64
	mov %rdi, %rax
	mov $1, %edi
	nopl 0x0(%rax,%rax,1)
overlap_a:
	add %rdi, %rax
overlap_b:
	mov %rax, %rcx
overlap_c:
	shr $3, %rcx
	add %rcx, %rax
	sub %rcx, %rax
	ret
	.size overlap_fn, . - overlap_fn

	.type overlap_run, @function
	.p2align 4
overlap_run:
	mov %rsi, %rax
	mov %rdi, %r11
	mov $1, %edi
	jmp *%r11
	.size overlap_run, . - overlap_run

	.type overlap_resume, @function
	.p2align 4
overlap_resume:
	mov %rsi, %rax
	mov %rsi, %rcx
	jmp *%rdi
	.size overlap_resume, . - overlap_resume

	.section .note.GNU-stack, "", @progbits
