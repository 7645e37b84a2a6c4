/*
 * Functions covering each instruction class a kprobe must handle out of line or by
 * emulation. Each is `long fn(long a, long b)`, deterministic, and starts with endbr64.
 * The kprobe test probes every instruction of each, one at a time, and compares results and
 * hit counts with an unprobed, single-stepped reference run.
 */
	.text

.macro FUNC name
	.globl \name
	.type \name, @function
	.p2align 4
\name:
	endbr64
.endm

.macro ENDF name
	.size \name, . - \name
.endm

/* RIP-relative loads, stores, read-modify-writes, lea, SSE loads. */
FUNC insn_riprel
	mov rip_var(%rip), %rax
	add %rdi, %rax
	mov %rax, rip_var(%rip)
	mov rip_var(%rip), %rdx
	lea rip_table(%rip), %rcx
	movzbl 3(%rcx), %ecx
	add %rcx, %rdx
	addq $7, rip_var(%rip)
	mov %rsi, %r8
	lock xadd %r8, rip_var(%rip)
	movl $0, rip_var+4(%rip)
	cmpq $0, rip_var(%rip)
	cmove %rsi, %rdx
	movsd rip_double(%rip), %xmm0
	cvttsd2si %xmm0, %rax
	add %rdx, %rax
	movq $0, rip_var(%rip)
	incl rip_count(%rip)
	ret
ENDF insn_riprel

/* push/pop, pushf/popf, local calls (rel32, through a register, through memory), ret imm,
 * enter-style frames with leave. */
FUNC insn_stack
	push %rbp
	mov %rsp, %rbp
	push %rbx
	push %rdi
	push $5
	pop %rax
	pop %rbx
	add %rbx, %rax
	pushfq
	popfq
	call 1f
	push %rsi
	call 2f
	add %rdx, %rax
	lea 1f(%rip), %rcx
	call *%rcx
	call *stack_fnptr(%rip)
	mov stack_fnptr(%rip), %rdx
	push %rdx
	call *(%rsp)
	pop %rdx
	xchg %rax, %rdx
	xchg %rdx, %rax
	pop %rbx
	leave
	ret
1:	lea 1(%rax), %rax
	ret
2:	mov 8(%rsp), %rdx
	ret $8
ENDF insn_stack

/* Conditional and unconditional branches of both sizes, loop/jrcxz, a jump table,
 * setcc/cmov. */
FUNC insn_branches
	xor %eax, %eax
	mov $4, %ecx
1:	add %rdi, %rax
	loop 1b
	test %rsi, %rsi
	jz 2f
	add $3, %rax
2:	cmp $10, %rdi
	jg 3f
	add $100, %rax
3:	xor %ecx, %ecx
	jrcxz 4f
	add $1000, %rax
4:	cmp %rdi, %rsi
	setl %cl
	add %rcx, %rax
	cmovg %rsi, %r8
	jmp 5f
	.rept 16
	.byte 0x66, 0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00
	.endr
5:	test %rax, %rax
	js 7f			/* never taken: a rel32 jcc across the sled below */
	mov %rdi, %rcx
	and $3, %rcx
	lea jump_table(%rip), %rdx
	jmp *(%rdx,%rcx,8)
.Lcase0:
	add $10, %rax
	jmp 6f
.Lcase1:
	add $20, %rax
	jmp 6f
.Lcase2:
	lea 6f(%rip), %r9
	add $30, %rax
	jmp *%r9
.Lcase3:
	add $40, %rax
6:	cmp $1, %rsi
	jne 8f
	.rept 16
	.byte 0x66, 0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00
	.endr
7:	neg %rax
8:	ret
ENDF insn_branches

/* String instructions: rep movsb, rep stosb, lodsq, repe cmpsb, repne scasb, std/cld. */
FUNC insn_string
	push %rbx
	sub $128, %rsp
	mov %rdi, (%rsp)
	mov %rsi, 8(%rsp)
	mov %rdi, 16(%rsp)
	mov %rsi, 24(%rsp)
	mov %rsi, %r8
	lea (%rsp), %rsi
	lea 64(%rsp), %rdi
	mov $32, %ecx
	rep movsb
	lea 96(%rsp), %rdi
	mov %r8d, %eax
	mov $16, %ecx
	rep stosb
	lea 64(%rsp), %rsi
	lodsq
	mov %rax, %rbx
	lea (%rsp), %rsi
	lea 64(%rsp), %rdi
	mov $32, %ecx
	repe cmpsb
	add %rcx, %rbx
	lea 96(%rsp), %rdi
	mov $16, %ecx
	mov %r8d, %eax
	not %al
	repne scasb
	add %rcx, %rbx
	std
	lea 31(%rsp), %rsi
	lodsb
	cld
	movzbl %al, %eax
	add %rbx, %rax
	add $128, %rsp
	pop %rbx
	ret
ENDF insn_string

/* SSE: integer and floating point, RIP-relative aligned loads. */
FUNC insn_sse
	movq %rdi, %xmm0
	movq %rsi, %xmm1
	paddq %xmm1, %xmm0
	movdqa sse_const(%rip), %xmm2
	pxor %xmm2, %xmm0
	pshufd $0x4e, %xmm0, %xmm3
	paddq %xmm3, %xmm0
	cvtsi2sd %rdi, %xmm4
	mulsd rip_double(%rip), %xmm4
	addsd %xmm4, %xmm4
	cvttsd2si %xmm4, %rdx
	movq %xmm0, %rax
	add %rdx, %rax
	ret
ENDF insn_sse

/* AVX/AVX2 (run only where the CPU has AVX2). */
FUNC insn_avx
	vmovq %rdi, %xmm0
	vpbroadcastq %xmm0, %ymm0
	vmovdqu avx_const(%rip), %ymm1
	vpaddq %ymm1, %ymm0, %ymm2
	vpxor avx_const(%rip), %ymm2, %ymm3
	vextracti128 $1, %ymm3, %xmm4
	vpaddq %xmm4, %xmm3, %xmm5
	vpextrq $1, %xmm5, %rdx
	vmovq %xmm5, %rax
	add %rdx, %rax
	vcvtsi2sd %rsi, %xmm6, %xmm6
	vaddsd rip_double(%rip), %xmm6, %xmm6
	vcvttsd2si %xmm6, %rcx
	add %rcx, %rax
	vzeroupper
	ret
ENDF insn_avx

/* A load that faults when A is not a valid pointer; the test's SIGSEGV handler resumes at
 * insn_fault_resume with rax = 41. */
FUNC insn_fault
	mov $1, %eax
	.globl insn_fault_load
insn_fault_load:
	mov (%rdi), %rax
	.globl insn_fault_resume
insn_fault_resume:
	add $1, %rax
	add %rsi, %rax
	ret
ENDF insn_fault

/* An indirect call through memory that faults when A does not point to a function pointer;
 * the SIGSEGV handler resumes at insn_badcall_resume with rax = 41. */
FUNC insn_badcall
	mov $1, %eax
	.globl insn_badcall_call
insn_badcall_call:
	call *(%rdi)
	.globl insn_badcall_resume
insn_badcall_resume:
	add %rsi, %rax
	ret
ENDF insn_badcall

/* Arithmetic odds and ends, and a system call (getpid). */
FUNC insn_misc
	mov %rdi, %rax
	imul %rsi, %rax
	cqo
	mov $7, %ecx
	idiv %rcx
	bswap %rdx
	shl %cl, %rdx
	bt $3, %rdi
	setc %cl
	movsbq %cl, %rcx
	lea (%rax,%rcx,4), %rax
	nop
	xchg %ax, %ax
	mov %rax, %r10
	mov $39, %eax
	syscall
	sub %rax, %r10
	add %rax, %r10
	mov %r10, %rax
	ret
ENDF insn_misc

/* The hot-loop target of the stress test: one probed instruction in a counted loop. */
FUNC insn_hot
	lea (%rdi,%rsi,2), %rax
	add $1, %rax
	ret
ENDF insn_hot

/* Runs FN(A, B) with the trap flag set, so every instruction raises SIGTRAP/TRAP_TRACE. */
FUNC traced_call
	mov %rdi, %rax
	mov %rsi, %rdi
	mov %rdx, %rsi
	pushfq
	orq $0x100, (%rsp)
	popfq
	call *%rax
	pushfq
	andq $~0x100, (%rsp)
	popfq
	ret
ENDF traced_call

	.data
	.p2align 4
rip_var:	.quad 0
rip_count:	.long 0
	.p2align 4
rip_table:	.byte 1, 2, 3, 4, 5, 6, 7, 8
rip_double:	.double 2.5
	.p2align 4
sse_const:	.quad 0x0123456789abcdef, 0x0fedcba987654321
	.p2align 5
avx_const:	.quad 1, 2, 3, 4

	.section .data.rel.ro, "aw"
	.p2align 3
stack_fnptr:	.quad insn_stack_helper
jump_table:	.quad .Lcase0, .Lcase1, .Lcase2, .Lcase3

	.text
/* Target of `call *stack_fnptr(%rip)` and of the call through the stack. */
FUNC insn_stack_helper
	lea 2(%rax), %rax
	ret
ENDF insn_stack_helper

	.section .note.GNU-stack, "", @progbits
