/*
 * Registers across a jprobe hit (jprobe_regs_test.cpp): a harness that enters a probed
 * function with every register, the flags and two stack arguments set from jpd_in, probed
 * functions that record everything they find at their entry into jpd_seen, and handlers in
 * assembly that record what they get (jpd_hseen), then clobber every register the ABI lets
 * them clobber, the flags and their copy of the stack arguments, and come back in each of
 * the ways a handler can.
 *
 * struct jpd_regs (jprobe_regs_test.cpp): rax rbx rcx rdx rsi rdi rbp r8-r15 (0-112), flags
 * (120), two stack arguments (128, 136), xmm0-15 (144) and the upper halves of ymm0-15 (400),
 * the return address a handler found (656), XINUSE at a function's entry (664).
 */
#define R_RAX 0
#define R_RBX 8
#define R_RCX 16
#define R_RDX 24
#define R_RSI 32
#define R_RDI 40
#define R_RBP 48
#define R_R8 56
#define R_R9 64
#define R_R10 72
#define R_R11 80
#define R_R12 88
#define R_R13 96
#define R_R14 104
#define R_R15 112
#define R_FLAGS 120
#define R_STACK 128
#define R_XMM 144
#define R_YMMH 400
#define R_RET 656
#define R_XINUSE 664

	.bss
	.p2align 6
	.globl jpd_in, jpd_seen, jpd_hseen, jpd_after
jpd_in:	.zero 704
jpd_seen:	.zero 704
jpd_hseen:	.zero 704
jpd_after:	.zero 704
	.globl jpd_fn, jpd_avx
jpd_fn:	.quad 0
jpd_avx:	.quad 0		/* non-zero: the ymm upper halves are set and checked */
jpd_dummy:	.quad 0
jpd_saved_sp:	.quad 0

	.text

/* Every register, the flags, the stack arguments and the vector registers into BUF; only
 * rip-relative stores (and a balanced push/pop for the flags). */
.macro RECORD buf, vec=1, rax=1
	.if \rax
	mov %rax, \buf + R_RAX(%rip)
	.endif
	mov %rbx, \buf + R_RBX(%rip)
	mov %rcx, \buf + R_RCX(%rip)
	mov %rdx, \buf + R_RDX(%rip)
	mov %rsi, \buf + R_RSI(%rip)
	mov %rdi, \buf + R_RDI(%rip)
	mov %rbp, \buf + R_RBP(%rip)
	mov %r8, \buf + R_R8(%rip)
	mov %r9, \buf + R_R9(%rip)
	mov %r10, \buf + R_R10(%rip)
	mov %r11, \buf + R_R11(%rip)
	mov %r12, \buf + R_R12(%rip)
	mov %r13, \buf + R_R13(%rip)
	mov %r14, \buf + R_R14(%rip)
	mov %r15, \buf + R_R15(%rip)
	pushfq
	popq \buf + R_FLAGS(%rip)
	mov (%rsp), %rax
	mov %rax, \buf + R_RET(%rip)
	mov 8(%rsp), %rax
	mov %rax, \buf + R_STACK(%rip)
	mov 16(%rsp), %rax
	mov %rax, \buf + R_STACK + 8(%rip)
	mov \buf + R_RAX(%rip), %rax
	.if \vec
	.irp r, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15
	movdqu %xmm\r, \buf + R_XMM + 16 * \r(%rip)
	.endr
	cmpq $0, jpd_avx(%rip)
	je 1f
	.irp r, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15
	vextractf128 $1, %ymm\r, \buf + R_YMMH + 16 * \r(%rip)
	.endr
1:
	.endif
.endm

/* What a handler may clobber: the caller-saved general registers and the flags (DF stays
 * clear, as the ABI wants at calls and returns), and its copy of the stack arguments. */
.macro CLOBBER
	mov $0x5a5a5a5a5a5a5a5a, %rax
	mov %rax, %rcx
	mov %rax, %rdx
	mov %rax, %rsi
	mov %rax, %rdi
	mov %rax, %r8
	mov %rax, %r9
	mov %rax, %r10
	mov %rax, %r11
	mov %rax, 8(%rsp)
	mov %rax, 16(%rsp)
	xor %eax, %eax			/* ZF PF set, CF OF SF clear */
.endm

/* long jpd_call(void): enters *jpd_fn with jpd_in's registers, flags and stack arguments, and
 * records the callee-saved registers it finds after the return into jpd_after. */
	.globl jpd_call
	.type jpd_call, @function
	.p2align 4
jpd_call:
	push %rbx
	push %rbp
	push %r12
	push %r13
	push %r14
	push %r15
	/* The stack arguments in the middle of a page, whatever the stack's randomization: a
	 * direct call that does not know their length (these functions have no DWARF) copies
	 * the 64 bytes a handler may see only when they lie in the page of the return address,
	 * and takes the full path else (dprobe_jprobe_direct), which keeps fewer registers. */
	mov %rsp, jpd_saved_sp(%rip)
	and $-4096, %rsp
	sub $2048, %rsp
	pushq jpd_in + R_STACK + 8(%rip)
	pushq jpd_in + R_STACK(%rip)
	.irp r, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15
	movdqu jpd_in + R_XMM + 16 * \r(%rip), %xmm\r
	.endr
	cmpq $0, jpd_avx(%rip)
	je 1f
	.irp r, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15
	vinsertf128 $1, jpd_in + R_YMMH + 16 * \r(%rip), %ymm\r, %ymm\r
	.endr
	jmp 2f
1:	cmpq $0, jpd_have_vzeroupper(%rip)
	je 2f
	vzeroupper
2:	mov jpd_in + R_RAX(%rip), %rax
	mov jpd_in + R_RBX(%rip), %rbx
	mov jpd_in + R_RCX(%rip), %rcx
	mov jpd_in + R_RDX(%rip), %rdx
	mov jpd_in + R_RSI(%rip), %rsi
	mov jpd_in + R_RDI(%rip), %rdi
	mov jpd_in + R_RBP(%rip), %rbp
	mov jpd_in + R_R8(%rip), %r8
	mov jpd_in + R_R9(%rip), %r9
	mov jpd_in + R_R10(%rip), %r10
	mov jpd_in + R_R11(%rip), %r11
	mov jpd_in + R_R12(%rip), %r12
	mov jpd_in + R_R13(%rip), %r13
	mov jpd_in + R_R14(%rip), %r14
	mov jpd_in + R_R15(%rip), %r15
	pushq jpd_in + R_FLAGS(%rip)
	popfq
	call *jpd_fn(%rip)
	mov %rbx, jpd_after + R_RBX(%rip)
	mov %rbp, jpd_after + R_RBP(%rip)
	mov %r12, jpd_after + R_R12(%rip)
	mov %r13, jpd_after + R_R13(%rip)
	mov %r14, jpd_after + R_R14(%rip)
	mov %r15, jpd_after + R_R15(%rip)
	mov (%rsp), %rcx		/* the stack arguments are the caller's */
	mov %rcx, jpd_after + R_STACK(%rip)
	mov 8(%rsp), %rcx
	mov %rcx, jpd_after + R_STACK + 8(%rip)
	mov jpd_saved_sp(%rip), %rsp
	pop %r15
	pop %r14
	pop %r13
	pop %r12
	pop %rbp
	pop %rbx
	ret
	.size jpd_call, . - jpd_call

/* The probed functions: each records what it finds and returns its first argument + 1. Each
 * stores rax itself first (its first instruction: a jump site's region covers it, and the
 * relocated copy runs it), then the rest is recorded here. */
jpd_record:
	RECORD jpd_seen, 1, 0
	cmpq $0, jpd_have_xinuse(%rip)
	je 1f
	mov $1, %ecx
	xgetbv
	shl $32, %rdx
	or %rdx, %rax
	mov %rax, jpd_seen + R_XINUSE(%rip)
1:	lea 1(%rdi), %rax
	ret

/* A patchable-entry site, listed in __patchable_function_entries as the compiler does. */
	.globl jpd_pfe
	.type jpd_pfe, @function
	.p2align 4
jpd_pfe:
1:	.byte 0x0f, 0x1f, 0x44, 0x00, 0x00
	mov %rax, jpd_seen + R_RAX(%rip)
	jmp jpd_record
	.size jpd_pfe, . - jpd_pfe
	.section __patchable_function_entries, "awo", @progbits, jpd_pfe
	.p2align 3
	.quad 1b
	.text

/* An -mfentry site. */
	.globl jpd_fentry
	.type jpd_fentry, @function
	.p2align 4
jpd_fentry:
	call __fentry__@PLT
	mov %rax, jpd_seen + R_RAX(%rip)
	jmp jpd_record
	.size jpd_fentry, . - jpd_fentry

/* No site: a jump site while optimization is on; the other one for an int3 entry. */
	.globl jpd_plain
	.type jpd_plain, @function
	.p2align 4
jpd_plain:
	mov %rax, jpd_seen + R_RAX(%rip)
	jmp jpd_record
	.size jpd_plain, . - jpd_plain

	.globl jpd_plain_int3
	.type jpd_plain_int3, @function
	.p2align 4
jpd_plain_int3:
	mov %rax, jpd_seen + R_RAX(%rip)
	jmp jpd_record
	.size jpd_plain_int3, . - jpd_plain_int3

/* Handlers. Integer code only (but jpd_h_vector): a jprobe on a site runs them without
 * saving any vector register. */

/* Ends with a tail call of jprobe_return(). */
	.globl jpd_h_tail
	.type jpd_h_tail, @function
	.p2align 4
jpd_h_tail:
	RECORD jpd_hseen, 0
	CLOBBER
	jmp jprobe_return
	.size jpd_h_tail, . - jpd_h_tail

/* `jprobe_return(); return;` with a callee-saved register changed and popped back: the
 * epilogue after the call only returns (a site of jprobe_ret.cpp). */
	.globl jpd_h_site
	.type jpd_h_site, @function
	.p2align 4
jpd_h_site:
	RECORD jpd_hseen, 0
	CLOBBER
	push %rbx
	push %r12
	mov $-1, %rbx
	mov $-1, %r12
	call jprobe_return
	pop %r12
	pop %rbx
	ret
	.size jpd_h_site, . - jpd_h_site

/* Changes every callee-saved register, and after its call of jprobe_return() stores
 * something: jprobe_return() must jump, and the registers come back from dprobe. */
	.globl jpd_h_jump
	.type jpd_h_jump, @function
	.p2align 4
jpd_h_jump:
	RECORD jpd_hseen, 0
	CLOBBER
	push %rbx
	push %rbp
	push %r12
	push %r13
	push %r14
	push %r15
	sub $8, %rsp
	mov $-1, %rbx
	mov $-1, %rbp
	mov $-1, %r12
	mov $-1, %r13
	mov $-1, %r14
	mov $-1, %r15
	call jprobe_return
	mov %rax, jpd_dummy(%rip)	/* not reached */
	add $8, %rsp
	pop %r15
	pop %r14
	pop %r13
	pop %r12
	pop %rbp
	pop %rbx
	ret
	.size jpd_h_jump, . - jpd_h_jump

/* Returns without calling jprobe_return(). */
	.globl jpd_h_returns
	.type jpd_h_returns, @function
	.p2align 4
jpd_h_returns:
	RECORD jpd_hseen, 0
	CLOBBER
	push %rbx
	mov $-1, %rbx
	pop %rbx
	ret
	.size jpd_h_returns, . - jpd_h_returns

/* Clobbers the vector registers 0-15 (and their upper halves with AVX): not a light handler,
 * the direct call's vector variant (or the full path) saves them. */
	.globl jpd_h_vector
	.type jpd_h_vector, @function
	.p2align 4
jpd_h_vector:
	RECORD jpd_hseen
	CLOBBER
	.irp r, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15
	pcmpeqd %xmm\r, %xmm\r
	.endr
	cmpq $0, jpd_avx(%rip)
	je 1f
	.irp r, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15
	vpcmpeqd %ymm\r, %ymm\r, %ymm\r
	.endr
1:	sub $8, %rsp
	call jprobe_return
	add $8, %rsp
	ret
	.size jpd_h_vector, . - jpd_h_vector

/* Both: the vector registers and every callee-saved register clobbered, then a
 * jprobe_return() that must jump. */
	.globl jpd_h_vector_jump
	.type jpd_h_vector_jump, @function
	.p2align 4
jpd_h_vector_jump:
	RECORD jpd_hseen
	CLOBBER
	.irp r, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15
	pcmpeqd %xmm\r, %xmm\r
	.endr
	cmpq $0, jpd_avx(%rip)
	je 1f
	.irp r, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15
	vpcmpeqd %ymm\r, %ymm\r, %ymm\r
	.endr
1:	push %rbx
	push %rbp
	push %r12
	push %r13
	push %r14
	push %r15
	sub $8, %rsp
	mov $-1, %rbx
	mov $-1, %rbp
	mov $-1, %r12
	mov $-1, %r13
	mov $-1, %r14
	mov $-1, %r15
	call jprobe_return
	mov %rax, jpd_dummy(%rip)	/* not reached */
	add $8, %rsp
	pop %r15
	pop %r14
	pop %r13
	pop %r12
	pop %rbp
	pop %rbx
	ret
	.size jpd_h_vector_jump, . - jpd_h_vector_jump

/* uint64_t jpd_xinuse(void): XGETBV with ECX=1. */
	.globl jpd_xinuse
	.type jpd_xinuse, @function
	.p2align 4
jpd_xinuse:
	mov $1, %ecx
	xgetbv
	shl $32, %rdx
	or %rdx, %rax
	ret
	.size jpd_xinuse, . - jpd_xinuse

	.data
	.globl jpd_have_vzeroupper, jpd_have_xinuse
jpd_have_vzeroupper:	.quad 0
jpd_have_xinuse:	.quad 0

	.section .note.GNU-stack, "", @progbits
