/*
 * jprobe entry and return (the kernel's setjmp_pre_handler and jprobe_return, Linux 4.14):
 * see jprobes_arch.h. The handler runs below a frame of this file, on a copy of the
 * stack-passed arguments, entered as if called by the probed function's caller: at its entry
 * %rsp is 8 modulo 16 and [rsp] is a return address into this file (its unwind information
 * leads unwinders on to the hit that called us).
 *
 * Two ways in: dprobe_jprobe_call() (from C++: a hit of the full ftrace path or of the int3
 * path, the registers saved by them), whose frame the thread's dprobe_jprobe_frame points
 * to, and dprobe_jprobe_direct() (the ftrace direct call of a jprobe alone on a site, the
 * registers still live), whose frame is the entry trampoline's, found from the thread's
 * dispatch section and the kprobe running. jprobe_return() leaves either.
 */
#include "arch/x86_64/ftrace_frame.h"
#include "arch/x86_64/tramp_macros.inc"
#include "arch/x86_64/ftrace_direct.inc"

	.section dprobe_noprobe_text, "ax", @progbits

/* struct jprobe_call */
#define JC_ENTRY 0
#define JC_REGS 8
#define JC_VEC 16
#define JC_VEC_SIZE 24
#define JC_WIDE 32
#define JC_STACK 40
#define JC_STACK_LEN 48
#define JC_FRAME_SLOT 56
#define JC_DESC 64

/* struct jprobe_desc */
#define JD_ENTRY 0
#define JD_KP 8
#define JD_NRETURNED 16
#define JD_STACK_LEN 24
#define JD_DIRECT 32
#define JD_DIRECT_UNKNOWN_LEN 2
#define JD_DIRECT_VECTOR 4
#define JPROBE_STACK_MAX 64
#define JD_NSITES 40
#define JD_SITES 48
#define JD_MAY_JUMP 144
/* dprobe_jprobe_ret_table (jprobes_arch.h): OUT = the byte offset of RET's first entry. */
#define JRT_BITS 10
#define JRT_SIZE (1 << JRT_BITS)
.macro JRT_HASH ret, out
	mov \ret, \out
	shr $JRT_BITS, \out
	xor \ret, \out
	and $JRT_SIZE - 1, \out
	shl $4, \out
.endm
/* struct jprobe_ret_site */
#define JRS_RET 0
#define JRS_SLOT_OFF 8
#define JRS_FROM_RBP 16
#define JRS_SIZE 24

/* struct kprobe (ainsn.kind) and struct jprobe */
#define KP_KIND 96
#define KIND_JPROBE 2
#define JP_NRETURNED 128
#define JP_JH 136

/* The frame, from %rbp: the callee-saved registers, then the frame slot's address, how the
 * handler came back (JF_HOW), where the call of the handler put its return address, the
 * jprobe's description (or 0), and the slot's previous value (where the frame's %rsp
 * points, JF_SIZE below %rbp). MXCSR is not saved, as in the ftrace trampolines
 * (ftrace_tramp.S): a handler keeps its control bits (callee-saved) and may raise sticky
 * exception flags, as any called function may. */
#define JF_SLOT -48
#define JF_HOW -56
#define JF_RETSLOT -64
#define JF_DESC -72
#define JF_PREV -80
#define JF_SIZE 80
/* JF_HOW: the handler returned without calling jprobe_return(); jprobe_return() left it like
 * longjmp (then 2 once the landing realigned the return predictor); jprobe_return() returned
 * into a handler that only returns after it (jprobe_ret_site), or was its tail call. */
#define HOW_RETURNED 0
#define HOW_JUMPED 1
#define HOW_REALIGNED 2
#define HOW_RETURN_CALLED 3

/* The frame: callee-saved registers pushed below %rbp, room for the JF_* words. */
.macro JPROBE_FRAME_ENTER
	push %rbp
	.cfi_adjust_cfa_offset 8
	.cfi_rel_offset rbp, 0
	mov %rsp, %rbp
	.cfi_def_cfa_register rbp
	push %rbx
	.cfi_offset rbx, -24
	push %r12
	.cfi_offset r12, -32
	push %r13
	.cfi_offset r13, -40
	push %r14
	.cfi_offset r14, -48
	push %r15
	.cfi_offset r15, -56
	sub $JF_SIZE - 40, %rsp
	movq $HOW_RETURNED, JF_HOW(%rbp)
.endm

/* Makes this frame the thread's current one: SLOT holds the address of its
 * dprobe_jprobe_frame. Clobbers TMP. */
.macro JPROBE_FRAME_LINK slot, tmp
	mov \slot, JF_SLOT(%rbp)
	mov (\slot), \tmp
	mov \tmp, JF_PREV(%rbp)
	mov %rsp, (\slot)		/* where jprobe_return() comes back to */
.endm

/* The stack arguments' copy: RCX bytes (a multiple of 16) from RSI, 16-byte aligned below the
 * frame, copied 16 at a time with general registers (rep movsb's start-up costs more); the
 * call of the handler pushes its return address under it. Clobbers rax, rcx, rdx. */
.macro JPROBE_COPY_STACK
	sub %rcx, %rsp
1:	sub $16, %rcx
	jb 2f
	mov (%rsi,%rcx), %rax
	mov 8(%rsi,%rcx), %rdx
	mov %rax, (%rsp,%rcx)
	mov %rdx, 8(%rsp,%rcx)
	jmp 1b
2:
	lea -8(%rsp), %rax
	mov %rax, JF_RETSLOT(%rbp)	/* where the call of the handler puts its return address */
.endm

/* The general argument registers from the pt_regs at REGS (which must not be one of them),
 * the variadic count in al, the static chain. */
.macro JPROBE_LOAD_GPRS regs
	mov PTR_DI(\regs), %rdi
	mov PTR_SI(\regs), %rsi
	mov PTR_DX(\regs), %rdx
	mov PTR_CX(\regs), %rcx
	mov PTR_R8(\regs), %r8
	mov PTR_R9(\regs), %r9
	mov PTR_R10(\regs), %r10
	mov PTR_AX(\regs), %rax
.endm

/* Where the call of the handler returns, or jprobe_return() jumps to in its place (HOW_JUMPED):
 * then the predictor still holds the address of this call's return, which a ret to this very
 * place consumes (predicted), so the returns after it are predicted again. Leaves ZF set when
 * the handler returned without calling jprobe_return(). */
.macro JPROBE_LANDING name
\name:
	cmpq $HOW_JUMPED, JF_HOW(%rbp)
	jne 7f
	movq $HOW_REALIGNED, JF_HOW(%rbp)
	lea \name(%rip), %rax
	push %rax
	ret
7:	cmpq $HOW_RETURNED, JF_HOW(%rbp)
.endm

/* Unlinks the frame, restores the callee-saved registers and returns (eax is kept). */
.macro JPROBE_FRAME_LEAVE
	mov JF_SLOT(%rbp), %rcx
	mov JF_PREV(%rbp), %rdx
	mov %rdx, (%rcx)
	mov -8(%rbp), %rbx
	mov -16(%rbp), %r12
	mov -24(%rbp), %r13
	mov -32(%rbp), %r14
	mov -40(%rbp), %r15
	leave
	.cfi_def_cfa rsp, 8
	.cfi_same_value rbp
	.cfi_same_value rbx
	.cfi_same_value r12
	.cfi_same_value r13
	.cfi_same_value r14
	.cfi_same_value r15
	ret
.endm

/* jprobe_return()'s question: may it return rather than jump? To RET when the handler
 * tail-called it (its return address is in the handler's return-address slot, RETSLOT), or
 * when it was called from one of DESC's sites (jprobe_ret.cpp) whose ret will find the
 * handler's return address; else to JUMP. Clobbers r8-r11. */
.macro JPROBE_RET_CHECK desc, retslot, ret, jump
	cmp %rsp, \retslot
	je \ret
	mov JD_NSITES(\desc), %r8
	lea JD_SITES(\desc), %r9
	mov (%rsp), %r10		/* where this call returns */
4:	test %r8, %r8
	jz \jump
	cmp JRS_RET(%r9), %r10
	jne 5f
	lea 8(%rsp), %r11		/* the stack pointer once returned, */
	cmpq $0, JRS_FROM_RBP(%r9)
	cmovne %rbp, %r11		/* or the handler's %rbp */
	add JRS_SLOT_OFF(%r9), %r11
	cmp %r11, \retslot
	je \ret
5:	add $JRS_SIZE, %r9
	dec %r8
	jmp 4b
.endm

/* int dprobe_jprobe_call(const struct jprobe_call *c): 1 when the handler returned without
 * jprobe_return(). */
	.globl dprobe_jprobe_call
	.hidden dprobe_jprobe_call
	.type dprobe_jprobe_call, @function
dprobe_jprobe_call:
	.cfi_startproc
	JPROBE_FRAME_ENTER
	mov %rdi, %rbx
	mov JC_DESC(%rbx), %rax
	mov %rax, JF_DESC(%rbp)
	mov JC_FRAME_SLOT(%rbx), %rax
	JPROBE_FRAME_LINK %rax, %rcx
	mov JC_STACK_LEN(%rbx), %rcx
	mov JC_STACK(%rbx), %rsi
	JPROBE_COPY_STACK

	/* xmm0-7 (or ymm/zmm when their upper halves were live at the entry). */
	mov JC_VEC(%rbx), %rsi
	test %rsi, %rsi
	jz 4f
	mov JC_VEC_SIZE(%rbx), %rdx
	cmpq $0, JC_WIDE(%rbx)
	jne 5f
	.irp r, 0, 1, 2, 3, 4, 5, 6, 7
	movdqu (%rsi), %xmm\r
	add %rdx, %rsi
	.endr
	jmp 4f
5:	cmp $64, %rdx
	je 3f
	.irp r, 0, 1, 2, 3, 4, 5, 6, 7
	vmovdqu (%rsi), %ymm\r
	add $32, %rsi
	.endr
	jmp 4f
3:
	.irp r, 0, 1, 2, 3, 4, 5, 6, 7
	vmovdqu64 (%rsi), %zmm\r
	add $64, %rsi
	.endr
4:
	mov JC_REGS(%rbx), %r11
	JPROBE_LOAD_GPRS %r11
	mov JC_ENTRY(%rbx), %r11
	/* A call, so that returns stay paired with calls for the return-stack predictor. */
	call *%r11
	JPROBE_LANDING .Ljprobe_landing
	sete %al
	movzbl %al, %eax	/* 1: the handler returned */
	lea JF_PREV(%rbp), %rsp
	cmpb $0, dprobe_have_avx(%rip)
	je 6f
	vzeroupper			/* what the handler may have left */
6:
	JPROBE_FRAME_LEAVE
	.cfi_endproc
	.size dprobe_jprobe_call, . - dprobe_jprobe_call

/*
 * dprobe_jprobe_direct: the ftrace_ops::direct_call of a jprobe on a site (DIRECT_CALL,
 * ftrace_direct.inc, whose convention it follows: rdi = the site, r10 = the ops, rax = the
 * task_ctx, rbx = the entry frame with the general registers and flags saved, the vector
 * registers live as the function got them, ecx = the vector registers the trampoline keeps,
 * inside a dispatch section). The jprobe's description is the ops' priv. It runs the handler
 * as a kprobe handler (current_kprobe, the recursion guard of kprobes), and answers 0, done,
 * or 2 without doing anything when the full path must run: a probe being disabled (JD_DIRECT
 * is 0 from then on), a kprobe handler already running on the thread (the full path counts
 * the miss), stack arguments of unknown length across a page boundary.
 *
 * Light (JD_DIRECT without JD_DIRECT_VECTOR): the handler provably leaves the extended state
 * alone, so nothing of it is saved: the handler gets the vector arguments in their registers,
 * whole, and cannot change them; it runs with the extended state unsaved
 * (dprobe_ext_unsaved, as a light fprobe handler). Vector (JD_DIRECT_VECTOR): any other
 * handler; the vector registers the trampoline keeps are saved as its full path saves them
 * (VSAVE: at full width only when their upper halves are in use), loaded for the handler
 * (xmm0-7, or ymm/zmm0-7 whole), and restored after it (VRESTORE), in an area of
 * JD_VAREA bytes at a fixed place below the frame.
 *
 * Stores are what a hit costs here (the store port bounds it), so it keeps no more than it
 * must. Its frame is the entry frame. jprobe_return() ends the hit by clearing
 * current_kprobe (a landing that finds it still set: the handler returned without calling
 * it); where it returns rather than jumps it needs nothing else (see it). When it must jump,
 * it finds the frame from the dispatch section's base (the function's return-address slot,
 * in task_ctx::seq) and the jprobe from the kprobe running, and the handler's return-address
 * slot where it is computed to be (JPROBE_DIRECT_RETSLOT). r12-r15, the probed function's
 * and the only registers not in the frame already, are stored in their pt_regs words only
 * when jprobe_return() may have to jump (JD_MAY_JUMP, jprobe_ret.cpp): when it jumps, to
 * .Ljprobe_direct_jumped (or the vector variant's), they come back from there.
 */
/* The frame words this path uses: the vector registers' shape (DIRECT_CALL's ecx), and
 * whether they were saved at full width (VSAVE's FR_VWIDE, the full path's word). */
#define JDF_VSHAPE PTR_ORIG_AX
#define JD_VAREA (16 * 64)

/* The handler's return-address slot of a direct frame FRAME whose copy of the stack arguments
 * is LEN bytes: this function is called with the stack pointer 8 below FRAME rounded down to
 * 16 (DIRECT_CALL), and keeps the handler's stack aligned with 8 more bytes (light), or puts
 * the vector area below, 64-byte aligned (VECTOR non-zero). */
.macro JPROBE_DIRECT_RETSLOT frame, len, out, vector
	mov \frame, \out
	and $-16, \out
	.if \vector
	sub $8 + JD_VAREA, \out
	and $-64, \out
	sub \len, \out
	sub $8, \out
	.else
	sub \len, \out
	sub $24, \out
	.endif
.endm

/* The copy of RCX bytes of stack arguments (a multiple of 16) from the function's, below the
 * stack pointer; leaves it with the stack pointer at the copy. Clobbers rax, rdx, rsi. */
.macro JD_COPY_STACK back
	mov PTR_SP(%rbx), %rsi
	add $8, %rsi			/* the first stack-passed argument */
	sub %rcx, %rsp
1:	sub $16, %rcx
	jb \back
	mov (%rsi,%rcx), %rax
	mov 8(%rsi,%rcx), %rdx
	mov %rax, (%rsp,%rcx)
	mov %rdx, 8(%rsp,%rcx)
	jmp 1b
.endm

/* Vector variant: the shape SHAPE's registers saved into the area at rsp; to DONE with the
 * handler's xmm0-7 as the function got them: VSAVE leaves their low 128 bits but those of
 * its scratch registers ACC and TMP (xmm6-7 when N is 8), loaded again (VEX.128: the upper
 * state stays clean), or all eight at full width when their upper halves were in use (an
 * __m256/__m512 argument reaches the handler whole). Falls through for another shape. */
.macro JD_VSAVE vsize, n, acc, tmp, done
	cmpl $\vsize | \n << 8, JDF_VSHAPE(%rbx)
	jne 19f
	VSAVE \vsize, \n, \acc, \tmp
	.if \vsize != 16
	cmpl $0, FR_VWIDE(%rbx)
	jne 18f
	.if \n == 8
	vmovdqu \tmp * \vsize(%rsp), %xmm\tmp
	vmovdqu \acc * \vsize(%rsp), %xmm\acc
	.endif
	jmp \done
18:
	.irp r, 0, 1, 2, 3, 4, 5, 6, 7
	.if \vsize == 32
	vmovdqu \r * 32(%rsp), %ymm\r
	.else
	vmovdqu64 \r * 64(%rsp), %zmm\r
	.endif
	.endr
	.endif
	jmp \done
19:
.endm

/* ...and restored after the handler (the area at rsp). */
.macro JD_VRESTORE vsize, n, done
	cmpl $\vsize | \n << 8, JDF_VSHAPE(%rbx)
	jne 19f
	VRESTORE \vsize, \n
	jmp \done
19:
.endm

	.globl dprobe_jprobe_direct
	.hidden dprobe_jprobe_direct
	.type dprobe_jprobe_direct, @function
	.p2align 4
dprobe_jprobe_direct:
	.cfi_startproc
	/* For unwinders: the CFA is the entry frame's address rounded down to 16 (rbx keeps it
	 * throughout, and jprobe_return() sets it again), whatever the copy's length; r12-r15
	 * are the handler's to describe.
	 * DW_CFA_def_cfa_expression: DW_OP_breg3 (rbx) 0, DW_OP_const1s -16, DW_OP_and. */
	.cfi_escape 0x0f, 0x05, 0x73, 0x00, 0x09, 0xf0, 0x1a
	mov OPS_PRIV(%r10), %r8		/* the jprobe's description */
	mov JD_DIRECT(%r8), %r9
	test %r9, %r9
	jz 9f
	cmpq $0, TC_CURRENT_KPROBE(%rax)
	jne 9f
	cmpl $0, TC_KPROBE_BUSY(%rax)
	jne 9f
	test $JD_DIRECT_UNKNOWN_LEN, %r9b
	jnz 5f
6:	mov JD_KP(%r8), %rsi
	mov %rsi, TC_CURRENT_KPROBE(%rax)
	cmpq $0, JD_MAY_JUMP(%r8)
	je 1f
	mov %r12, PTR_R12(%rbx)
	mov %r13, PTR_R13(%rbx)
	mov %r14, PTR_R14(%rbx)
	mov %r15, PTR_R15(%rbx)
1:	test $JD_DIRECT_VECTOR, %r9b
	jnz 10f
	EXT_UNSAVED_INC %rcx
	/* The stack arguments' copy, 8 bytes below this function's return address (the
	 * handler's stack is aligned as after a call). Most functions have none: then the stack
	 * pointer does not wait for the length to be loaded (the branch is predicted). */
	sub $8, %rsp
	mov JD_STACK_LEN(%r8), %rcx
	test %rcx, %rcx
	jnz 7f
2:	mov JD_ENTRY(%r8), %r11
	JPROBE_LOAD_GPRS %rbx
	call *%r11
.Ljprobe_direct_landing:
	.globl dprobe_jprobe_direct_landing
	.hidden dprobe_jprobe_direct_landing
dprobe_jprobe_direct_landing:
	/* Still the kprobe running: the handler returned without calling jprobe_return(). */
	TASK_CTX_LOAD %rax
	mov TC_CURRENT_KPROBE(%rax), %rcx
	test %rcx, %rcx
	jz 4f
	movq $0, TC_CURRENT_KPROBE(%rax)
	lock incq JP_NRETURNED(%rcx)	/* the kprobe is its jprobe's first member */
4:	EXT_UNSAVED_DEC %rcx
.Ljd_done:
	mov %rbx, %rsp
	and $-16, %rsp
	sub $8, %rsp			/* back at this function's return address */
	xor %eax, %eax
	ret
9:	mov $2, %eax			/* not now: the full path */
	ret
5:	/* The length of the stack arguments is not known: the most a handler may see is copied,
	 * when it lies in the page of the return address (mapped, then); else the full path
	 * reads it without faulting. (ecx is still DIRECT_CALL's, for the vector variant.) */
	mov PTR_SP(%rbx), %rsi
	lea 8 + JPROBE_STACK_MAX - 1(%rsi), %rdx
	xor %rsi, %rdx
	shr $12, %rdx
	jnz 9b
	jmp 6b
7:	JD_COPY_STACK 2b

	/* jprobe_return() jumped here (rbx is the frame again, the stack pointer is the
	 * handler's return-address slot + 8): the predictor still holds the return of the
	 * handler's call, which a ret to the landing consumes. */
.Ljprobe_direct_jumped:
	mov PTR_R12(%rbx), %r12
	mov PTR_R13(%rbx), %r13
	mov PTR_R14(%rbx), %r14
	mov PTR_R15(%rbx), %r15
	lea .Ljprobe_direct_landing(%rip), %rax
	push %rax
	ret

10:	/* Vector. Inside a light handler (an fprobe's, whose hit saved no extended state) the
	 * registers this saves are not all the handler could change: the full path runs it
	 * inside a whole xsave (CALL_WITH_VECTORS). */
	mov dprobe_ext_unsaved@gottpoff(%rip), %rdx
	cmpl $0, %fs:(%rdx)
	jne 22f
	/* The area, at a place jprobe_return() can compute (JPROBE_DIRECT_RETSLOT). */
	mov %ecx, JDF_VSHAPE(%rbx)
	sub $JD_VAREA, %rsp
	and $-64, %rsp
	JD_VSAVE 16, 8, 7, 6, .Ljd_vsaved
	JD_VSAVE 32, 8, 7, 6, .Ljd_vsaved
	JD_VSAVE 64, 8, 7, 6, .Ljd_vsaved
	JD_VSAVE 16, 16, 15, 14, .Ljd_vsaved
	JD_VSAVE 32, 16, 15, 14, .Ljd_vsaved
	JD_VSAVE 64, 16, 15, 14, .Ljd_vsaved
	ud2				/* a shape DIRECT_CALL does not pass */
.Ljd_vsaved:
	mov JD_STACK_LEN(%r8), %rcx
	test %rcx, %rcx
	jnz 17f
12:	mov JD_ENTRY(%r8), %r11
	JPROBE_LOAD_GPRS %rbx
	call *%r11
.Ljprobe_direct_vlanding:
	.globl dprobe_jprobe_direct_vlanding
	.hidden dprobe_jprobe_direct_vlanding
dprobe_jprobe_direct_vlanding:
	TASK_CTX_LOAD %rax
	mov TC_CURRENT_KPROBE(%rax), %rcx
	test %rcx, %rcx
	jz 13f
	movq $0, TC_CURRENT_KPROBE(%rax)
	lock incq JP_NRETURNED(%rcx)
13:	mov %rbx, %rsp			/* the area */
	and $-16, %rsp
	sub $8 + JD_VAREA, %rsp
	and $-64, %rsp
	JD_VRESTORE 16, 8, .Ljd_done
	JD_VRESTORE 32, 8, .Ljd_done
	JD_VRESTORE 64, 8, .Ljd_done
	JD_VRESTORE 16, 16, .Ljd_done
	JD_VRESTORE 32, 16, .Ljd_done
	JD_VRESTORE 64, 16, .Ljd_done
	ud2
17:	JD_COPY_STACK 12b
22:	movq $0, TC_CURRENT_KPROBE(%rax)	/* not now: nothing ran */
	jmp 9b

.Ljprobe_direct_vjumped:
	mov PTR_R12(%rbx), %r12
	mov PTR_R13(%rbx), %r13
	mov PTR_R14(%rbx), %r14
	mov PTR_R15(%rbx), %r15
	lea .Ljprobe_direct_vlanding(%rip), %rax
	push %rax
	ret
	.cfi_endproc
	.size dprobe_jprobe_direct, . - dprobe_jprobe_direct

/* void jprobe_return(void) (the kernel's was arch code too): back to the hit from the jprobe
 * handler running on this thread; returns (doing nothing) outside one. Its ret goes to where
 * the handler's call would have returned, like longjmp (one mispredicted return). Where
 * returning is the same (jprobe_ret.cpp), it returns, and the returns stay predicted: a tail
 * call from the handler (its return address is the handler's), and the calls listed as sites
 * whose epilogue's ret takes the handler's return address. Either way it tells the hit that
 * it was called: current_kprobe cleared (a direct frame), or JF_HOW. */
	.globl jprobe_return
	.type jprobe_return, @function
jprobe_return:
	.cfi_startproc
	/* The direct hit's common ends, found with no per-hit state: the handler's return
	 * address leads to the direct landing. A tail call: [rsp] is it. A listed call site
	 * (dprobe_jprobe_ret_table, by return address): the slot its epilogue's ret will pop
	 * holds it, so the handler is at depth 1 and returning ends it. */
	TASK_CTX_LOAD %rsi
	lea dprobe_jprobe_direct_landing(%rip), %rax
	lea dprobe_jprobe_direct_vlanding(%rip), %r11
	mov (%rsp), %rdx
	cmp %rax, %rdx
	je 6f
	cmp %r11, %rdx
	je 6f
	JRT_HASH %rdx, %rcx
	lea dprobe_jprobe_ret_table(%rip), %r8
7:	mov (%r8,%rcx), %r9
	cmp %r9, %rdx
	je 8f
	test %r9, %r9
	jz 9f				/* not listed */
	add $16, %rcx
	and $(JRT_SIZE - 1) << 4, %rcx
	jmp 7b
8:	mov 8(%r8,%rcx), %r9		/* slot offset << 1 | from %rbp */
	lea 8(%rsp), %r10
	test $1, %r9b
	cmovnz %rbp, %r10
	sar $1, %r9
	mov (%r10,%r9), %r9
	cmp %rax, %r9
	je 6f
	cmp %r11, %r9
	jne 9f
6:	movq $0, TC_CURRENT_KPROBE(%rsi)	/* ends the hit */
	ret
9:	mov dprobe_jprobe_frame@gottpoff(%rip), %rcx
	mov %fs:(%rcx), %rdi
	test %rdi, %rdi
	jnz 10f
	/* A direct frame (dprobe_jprobe_direct) when the kprobe running is a jprobe: the entry
	 * frame, ENTRY_FRAME below the section's base; rax = the task_ctx. */
	TASK_CTX_LOAD %rax
	test %rax, %rax
	jz 1f
	mov TC_CURRENT_KPROBE(%rax), %rsi
	test %rsi, %rsi
	jz 1f
	cmpl $KIND_JPROBE, KP_KIND(%rsi)
	jne 1f
	mov TC_SEQ(%rax), %rdi
	shr $16, %rdi
	sub $ENTRY_FRAME, %rdi
	mov JP_JH(%rsi), %rsi		/* its state, whose first member is the description */
	testb $JD_DIRECT_VECTOR, JD_DIRECT(%rsi)
	jnz 14f
	JPROBE_DIRECT_RETSLOT %rdi, JD_STACK_LEN(%rsi), %rdx, 0
	lea .Ljprobe_direct_jumped(%rip), %rcx
	jmp 15f
14:	JPROBE_DIRECT_RETSLOT %rdi, JD_STACK_LEN(%rsi), %rdx, 1
	lea .Ljprobe_direct_vjumped(%rip), %rcx
15:	JPROBE_RET_CHECK %rsi, %rdx, 2f, 3f
3:	cmpq $0, JD_MAY_JUMP(%rsi)
	je 2f				/* cannot happen: see JD_MAY_JUMP */
	movq $0, TC_CURRENT_KPROBE(%rax)
	/* Jump: rbx = the entry frame, to .Ljprobe_direct_jumped (or vjumped, in rcx) through
	 * the handler's return-address slot. */
	mov %rdi, %rbx
	mov %rdx, %r13
	mov %rcx, %r12
	sub $8, %rsp
	.cfi_adjust_cfa_offset 8
	call dprobe_jprobe_no_return	/* ASan: the handler's frames go */
	.cfi_adjust_cfa_offset -8
	mov %r12, (%r13)
	mov %r13, %rsp
	ret
2:	movq $0, TC_CURRENT_KPROBE(%rax)
1:	ret

10:	/* A frame of dprobe_jprobe_call (its %rsp): rax = its %rbp. */
	lea JF_SIZE(%rdi), %rax
	mov JF_RETSLOT(%rax), %rdx
	mov JF_DESC(%rax), %rsi
	test %rsi, %rsi
	jz 13f
	JPROBE_RET_CHECK %rsi, %rdx, 12f, 13f
12:	movq $HOW_RETURN_CALLED, JF_HOW(%rax)
	ret
13:	push %rdi
	.cfi_adjust_cfa_offset 8
	call dprobe_jprobe_no_return	/* ASan: the handler's frames go */
	pop %rdi
	.cfi_adjust_cfa_offset -8
	lea JF_SIZE(%rdi), %rbp
	movq $HOW_JUMPED, JF_HOW(%rbp)
	mov JF_RETSLOT(%rbp), %rsp
	ret
	.cfi_endproc
	.size jprobe_return, . - jprobe_return

	.section .note.GNU-stack, "", @progbits
