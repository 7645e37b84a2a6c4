/*
 * Probed functions and callers for the vector-state test (vector_state_test.cpp). The
 * probed functions touch no vector register, so whatever the caller finds changed in them
 * after a call was changed by dprobe or its handlers.
 */
	.text

/* A patchable-entry site, listed in __patchable_function_entries as the compiler does. */
	.globl vs_pfe
	.type vs_pfe, @function
	.p2align 4
vs_pfe:
1:	.byte 0x0f, 0x1f, 0x44, 0x00, 0x00
	lea 1(%rdi), %rax
	ret
	.size vs_pfe, . - vs_pfe
	.section __patchable_function_entries, "awo", @progbits, vs_pfe
	.p2align 3
	.quad 1b
	.text

/* An -mfentry site: a call of __fentry__, which dprobe turns into a NOP when it loads. */
	.globl vs_fentry
	.type vs_fentry, @function
	.p2align 4
vs_fentry:
	call __fentry__@PLT
	lea 1(%rdi), %rax
	ret
	.size vs_fentry, . - vs_fentry

/* No site: reached through a jump site, or a kprobe on an instruction (vs_mid_probe). */
	.globl vs_plain
	.type vs_plain, @function
	.p2align 4
vs_plain:
	mov %rdi, %rax
	add $1, %rax
	.globl vs_mid_probe
vs_mid_probe:
	add $0, %rax
	add $0, %rax
	ret
	.size vs_plain, . - vs_plain

/* uint64_t vs_xinuse(void): XGETBV with ECX=1, the state components in use. */
	.globl vs_xinuse
	.type vs_xinuse, @function
	.p2align 4
vs_xinuse:
	mov $1, %ecx
	xgetbv
	shl $32, %rdx
	or %rdx, %rax
	ret
	.size vs_xinuse, . - vs_xinuse

/* void vs_dirty_ymm(void): leaves the upper halves of ymm8 in use (no vzeroupper), as code
 * built with -mavx and -mno-vzeroupper, or hand-written, may. */
	.globl vs_dirty_ymm
	.type vs_dirty_ymm, @function
	.p2align 4
vs_dirty_ymm:
	vpcmpeqd %ymm8, %ymm8, %ymm8
	ret
	.size vs_dirty_ymm, . - vs_dirty_ymm

/* long vs_call_clean(long (*fn)(long), long arg, uint64_t xinuse[2]): calls FN(ARG) with
 * the upper vector state clean (vzeroupper) and records XINUSE right before and right
 * after the call. */
	.globl vs_call_clean
	.type vs_call_clean, @function
	.p2align 4
vs_call_clean:
	push %rbx
	push %r12
	push %r13
	mov %rdx, %rbx
	mov %rdi, %r12
	mov %rsi, %r13
	vzeroupper
	mov $1, %ecx
	xgetbv
	shl $32, %rdx
	or %rdx, %rax
	mov %rax, (%rbx)
	mov %r13, %rdi
	call *%r12
	mov %rax, %r13
	mov $1, %ecx
	xgetbv
	shl $32, %rdx
	or %rdx, %rax
	mov %rax, 8(%rbx)
	mov %r13, %rax
	pop %r13
	pop %r12
	pop %rbx
	ret
	.size vs_call_clean, . - vs_call_clean

/* long vs_call_live_WIDTH(long (*fn)(long), long arg, const void *in, void *out): loads
 * vector registers 0-15 at full width (32 or 64 bytes each) from IN, calls FN(ARG), stores
 * them to OUT. */
.macro CALL_LIVE width
	.globl vs_call_live_\width
	.type vs_call_live_\width, @function
	.p2align 4
vs_call_live_\width:
	push %rbx
	push %r12
	push %r13
	mov %rcx, %rbx
	mov %rdi, %r12
	mov %rsi, %r13
	.irp n, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15
	.if \width == 32
	vmovdqu \n * 32(%rdx), %ymm\n
	.else
	vmovdqu64 \n * 64(%rdx), %zmm\n
	.endif
	.endr
	mov %r13, %rdi
	call *%r12
	.irp n, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15
	.if \width == 32
	vmovdqu %ymm\n, \n * 32(%rbx)
	.else
	vmovdqu64 %zmm\n, \n * 64(%rbx)
	.endif
	.endr
	vzeroupper
	pop %r13
	pop %r12
	pop %rbx
	ret
	.size vs_call_live_\width, . - vs_call_live_\width
.endm
CALL_LIVE 32
CALL_LIVE 64

/* long vs_call_callee_saved(long (*fn)(long), long arg): calls FN(ARG) with rbx, rbp and
 * r12-r15 holding 0x1b1b..., 0x1d1d..., 0x1c1c..., 0x1e1e..., 0x1f1f..., 0x1a1a... */
	.globl vs_call_callee_saved
	.type vs_call_callee_saved, @function
	.p2align 4
vs_call_callee_saved:
	push %rbx
	push %rbp
	push %r12
	push %r13
	push %r14
	push %r15
	sub $8, %rsp
	mov %rdi, %rax
	mov %rsi, %rdi
	movabs $0x1b1b1b1b1b1b1b1b, %rbx
	movabs $0x1d1d1d1d1d1d1d1d, %rbp
	movabs $0x1c1c1c1c1c1c1c1c, %r12
	movabs $0x1e1e1e1e1e1e1e1e, %r13
	movabs $0x1f1f1f1f1f1f1f1f, %r14
	movabs $0x1a1a1a1a1a1a1a1a, %r15
	call *%rax
	add $8, %rsp
	pop %r15
	pop %r14
	pop %r13
	pop %r12
	pop %rbp
	pop %rbx
	ret
	.size vs_call_callee_saved, . - vs_call_callee_saved

	.section .note.GNU-stack, "", @progbits
