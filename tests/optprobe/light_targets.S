/*
 * Targets of the light-detour test (light_test.cpp): a function that loads every register
 * a mid-function probe could disturb from a struct light_state, runs through a 5-byte NOP
 * (light_probe_<w>, where the test puts an optimized kprobe) and stores them all back to a
 * second struct. <w> is the vector width kept: 16 (xmm0-15), 32 (ymm0-15), 64 (zmm0-31 and
 * the mask registers k0-7). Also: x87 stack (three values), MXCSR, the arithmetic flags
 * (set without popf, so the function may get a light detour), 14 red-zone slots and the
 * general registers. light_state_df_<w> does the same with DF set across the probe.
 *
 *   void light_state_<w>(const struct light_state *in, struct light_state *out);
 */
#define G(i) (8 * (i))      /* rax rbx rcx rdx rsi rdi rbp r8 .. r15 */
#define FLAGS 128
#define MXCSR 136
#define KREG 144            /* 8 x 8 */
#define X87 208             /* 3 x 16 */
#define RZ 256              /* 14 x 8 */
#define VEC 384             /* 32 x 64, 64-byte aligned */

	.text

.macro LOADV w
	.if \w == 16
	.irp i, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15
	movdqu VEC + \i * 64(%rdi), %xmm\i
	.endr
	.elseif \w == 32
	.irp i, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15
	vmovdqu VEC + \i * 64(%rdi), %ymm\i
	.endr
	.else
	.irp i, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31
	vmovdqu64 VEC + \i * 64(%rdi), %zmm\i
	.endr
	.irp i, 0,1,2,3,4,5,6,7
	kmovq KREG + \i * 8(%rdi), %k\i
	.endr
	.endif
.endm

.macro STOREV w
	.if \w == 16
	.irp i, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15
	movdqu %xmm\i, VEC + \i * 64(%rdi)
	.endr
	.elseif \w == 32
	.irp i, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15
	vmovdqu %ymm\i, VEC + \i * 64(%rdi)
	.endr
	vzeroupper
	.else
	.irp i, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31
	vmovdqu64 %zmm\i, VEC + \i * 64(%rdi)
	.endr
	.irp i, 0,1,2,3,4,5,6,7
	kmovq %k\i, KREG + \i * 8(%rdi)
	.endr
	vzeroupper
	.endif
.endm

.macro STATE_FUNC name, w, df
	.globl \name, light_probe_\name
	.type \name, @function
	.p2align 4
\name:
	push %rbp
	push %rbx
	push %r12
	push %r13
	push %r14
	push %r15
	push %rsi
	LOADV \w
	fldt X87 + 32(%rdi)
	fldt X87 + 16(%rdi)
	fldt X87(%rdi)
	ldmxcsr MXCSR(%rdi)
	.irp i, 0,1,2,3,4,5,6,7,8,9,10,11,12,13
	mov RZ + \i * 8(%rdi), %rax
	mov %rax, -128 + \i * 8(%rsp)
	.endr
	/* OF from an addition that overflows or not, then the rest with sahf. */
	mov FLAGS(%rdi), %rax
	mov %eax, %ecx
	shr $11, %ecx
	and $1, %ecx
	mov $0x7fffffff, %edx
	add %ecx, %edx
	mov %al, %ah
	sahf
	.if \df
	std
	.endif
	mov G(0)(%rdi), %rax
	mov G(1)(%rdi), %rbx
	mov G(2)(%rdi), %rcx
	mov G(3)(%rdi), %rdx
	mov G(4)(%rdi), %rsi
	mov G(6)(%rdi), %rbp
	mov G(7)(%rdi), %r8
	mov G(8)(%rdi), %r9
	mov G(9)(%rdi), %r10
	mov G(10)(%rdi), %r11
	mov G(11)(%rdi), %r12
	mov G(12)(%rdi), %r13
	mov G(13)(%rdi), %r14
	mov G(14)(%rdi), %r15
	mov G(5)(%rdi), %rdi
light_probe_\name:
	.byte 0x0f, 0x1f, 0x44, 0x00, 0x00
	xchg %rdi, (%rsp)               /* rdi = out; the slot keeps rdi's value */
	mov %rax, G(0)(%rdi)
	mov %rbx, G(1)(%rdi)
	mov %rcx, G(2)(%rdi)
	mov %rdx, G(3)(%rdi)
	mov %rsi, G(4)(%rdi)
	mov %rbp, G(6)(%rdi)
	mov %r8, G(7)(%rdi)
	mov %r9, G(8)(%rdi)
	mov %r10, G(9)(%rdi)
	mov %r11, G(10)(%rdi)
	mov %r12, G(11)(%rdi)
	mov %r13, G(12)(%rdi)
	mov %r14, G(13)(%rdi)
	mov %r15, G(14)(%rdi)
	mov (%rsp), %rax
	mov %rax, G(5)(%rdi)
	.irp i, 0,1,2,3,4,5,6,7,8,9,10,11,12,13
	mov -128 + \i * 8(%rsp), %rax
	mov %rax, RZ + \i * 8(%rdi)
	.endr
	pushfq
	popq FLAGS(%rdi)
	.if \df
	cld
	.endif
	STOREV \w
	fstpt X87(%rdi)
	fstpt X87 + 16(%rdi)
	fstpt X87 + 32(%rdi)
	stmxcsr MXCSR(%rdi)
	movl $0x1f80, -4(%rsp)
	ldmxcsr -4(%rsp)
	pop %rsi
	pop %r15
	pop %r14
	pop %r13
	pop %r12
	pop %rbx
	pop %rbp
	ret
	.size \name, . - \name
.endm

STATE_FUNC light_state_16, 16, 0
STATE_FUNC light_state_32, 32, 0
STATE_FUNC light_state_64, 64, 0
STATE_FUNC light_state_df_16, 16, 1

/*
 * Handler helpers that wreck the whole extended state the way library code may: every
 * vector register of the width, the mask registers, the x87 stack (fninit) and MXCSR's
 * sticky flags (control bits left as the ABI wants them), plus the arithmetic flags.
 */
.macro DIRTY_FUNC w
	.globl light_dirty_\w
	.type light_dirty_\w, @function
	.p2align 4
light_dirty_\w:
	.if \w == 16
	.irp i, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15
	pcmpeqd %xmm\i, %xmm\i
	.endr
	.elseif \w == 32
	.irp i, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15
	vpcmpeqd %ymm\i, %ymm\i, %ymm\i
	.endr
	vzeroupper
	.else
	.irp i, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31
	vpternlogd $0xff, %zmm\i, %zmm\i, %zmm\i
	.endr
	.irp i, 0,1,2,3,4,5,6,7
	kxnorw %k\i, %k\i, %k\i
	.endr
	vzeroupper
	.endif
	fninit
	fld1
	fstp %st(0)
	movl $0x1fbf, -4(%rsp)
	ldmxcsr -4(%rsp)
	xor %eax, %eax
	cmp $1, %eax
	ret
	.size light_dirty_\w, . - light_dirty_\w
.endm

DIRTY_FUNC 16
DIRTY_FUNC 32
DIRTY_FUNC 64

/*
 * Handler helpers that wreck what the vector optprobe caller keeps, and nothing more: the
 * vector registers 0-15 at the width (leaving the upper state in use), MXCSR's sticky flags,
 * the arithmetic flags.
 */
.macro VEC_DIRTY_FUNC w
	.globl light_vec_dirty_\w
	.type light_vec_dirty_\w, @function
	.p2align 4
light_vec_dirty_\w:
	.irp i, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15
	.if \w == 16
	pcmpeqd %xmm\i, %xmm\i
	.elseif \w == 32
	vpcmpeqd %ymm\i, %ymm\i, %ymm\i
	.else
	vpternlogd $0xff, %zmm\i, %zmm\i, %zmm\i
	.endif
	.endr
	movl $0x1fbf, -4(%rsp)
	ldmxcsr -4(%rsp)
	xor %eax, %eax
	cmp $1, %eax
	ret
	.size light_vec_dirty_\w, . - light_vec_dirty_\w
.endm

VEC_DIRTY_FUNC 16
VEC_DIRTY_FUNC 32
VEC_DIRTY_FUNC 64

/* A function with a patch site (a 5-byte NOP listed in __patchable_function_entries, as
 * clang's -fpatchable-function-entry=5 makes it) that a clean handler calls directly. */
	.globl light_nested
	.type light_nested, @function
	.p2align 4
light_nested:
	.byte 0x0f, 0x1f, 0x44, 0x00, 0x00
	ret
	.size light_nested, . - light_nested
	.section __patchable_function_entries, "aw", @progbits
	.p2align 3
	.quad light_nested

	.section .note.GNU-stack, "", @progbits
