/*
 * The direct dispatch: the light dispatch (core/ftrace_dispatch.cpp) for its commonest case,
 * a site whose one user is an fprobe with light handlers (the kernel's direct calls and
 * per-ops trampolines: the fprobe's handlers called with no loop over users, no ops
 * callbacks in between). Measured on AMD EPYC, the compiled light dispatch spent most of a
 * hit on generality this case never needs (callee-saved spills, the user loop, the checks
 * for every kind of ops); these two functions do the same work for this case in about a
 * third of the instructions.
 *
 *   int dprobe_fgraph_entry_direct(ftrace_site *site, ftrace_regs *fregs, unsigned seen)
 *   uintptr_t dprobe_ftrace_return_direct(ftrace_regs *fregs)
 *
 * They are called as, and answer like, dprobe_fgraph_entry_light and
 * dprobe_ftrace_return_light (from the light trampolines, ftrace_tramp.S; the entry answers 3
 * instead of 1 for a frame it built, whose body the trampoline then calls from
 * dprobe_fgraph_call_direct_*, so that its return comes here), and they keep the same
 * records the same way: the recursion guard and quiescence marker (task_ctx::seq), the
 * shadow frame (one user: ops, generation and entry data), entry_pending and entry_ops for a
 * section a signal handler leaves with a jump, dprobe_ext_unsaved around the handlers. For
 * anything else - no thread context yet, recursion, a kprobe's state to keep, a list that is
 * not one direct fprobe, a disabled fprobe, a tail call, a gone frame, a full shadow stack,
 * a retired frame's ops - they undo nothing because they did nothing: they tail-call the
 * compiled light dispatch with the same arguments, which handles it (or answers "not now").
 * Only general registers are used: the light path saved no vector register.
 *
 * The offsets of core's records are in ftrace_frame.h, checked in core/ftrace_dispatch.cpp.
 */
#include "arch/x86_64/ftrace_frame.h"

	.section dprobe_noprobe_text, "ax", @progbits

/* %rax = this thread's task_ctx; jumps to FAIL when there is none, when the thread is inside
 * dispatch code (an odd count), or when the kprobe state dispatch_enter() keeps for a
 * section left by a jump differs from the current one. Then %rcx = the count. */
.macro TASK_CTX_ENTER fail
	mov _ZN6dprobe12tls_task_ctxE@gottpoff(%rip), %rax
	mov %fs:(%rax), %rax
	test %rax, %rax
	jz \fail
	mov TC_SEQ(%rax), %rcx
	test $1, %cl
	jnz \fail
	mov TC_CURRENT_KPROBE(%rax), %r8
	cmp %r8, TC_DISPATCH_KP(%rax)
	jne \fail
	mov TC_FPROBE_KPROBE_BUSY(%rax), %r8d
	cmp %r8d, TC_DISPATCH_FPROBE_BUSY(%rax)
	jne \fail
.endm

/* dispatch_enter_clean(): the odd count and BASE (a stack address) in one store, which
 * stays in %rdx. Clobbers %rcx. */
.macro SEQ_PUBLISH base
	mov \base, %rdx
	shl $16, %rdx
	inc %ecx
	movzwl %cx, %ecx
	or %rcx, %rdx
	mov %rdx, TC_SEQ(%rax)
.endm

/* dispatch_exit() from the value published, in REG (its 16-bit name REG16): nothing else
 * writes the count while the section is open (a signal handler's hit finds it odd), and
 * not reading it back keeps each hit's updates off the chain of store-to-load forwards the
 * previous hit's left. */
.macro SEQ_EXIT_FROM t, reg, reg16
	inc \reg16
	mov \reg, TC_SEQ(\t)
.endm

/* Jumps to FAIL unless VAL is none of the three return hooks (arch::is_return_hook). */
.macro NOT_RETURN_HOOK val, fail
	cmp _ZN6dprobe4arch18fgraph_return_addrE(%rip), \val
	je \fail
	cmp _ZN6dprobe4arch24fgraph_return_light_addrE(%rip), \val
	je \fail
	cmp _ZN6dprobe4arch25fgraph_return_direct_addrE(%rip), \val
	je \fail
	cmp _ZN6dprobe4arch22return_to_handler_addrE(%rip), \val
	je \fail
.endm

/* dprobe_ext_unsaved + 1 while the handlers run (the extended state is unsaved), its value
 * before kept in SAVE and written back after them rather than decremented, for the same
 * reason. */
.macro EXT_UNSAVED_RAISE save, save32, tmp, val32
	mov dprobe_ext_unsaved@gottpoff(%rip), \tmp
	mov %fs:(\tmp), \save32
	lea 1(\save), \val32
	mov \val32, %fs:(\tmp)
.endm
.macro EXT_UNSAVED_RESTORE save32, tmp
	mov dprobe_ext_unsaved@gottpoff(%rip), \tmp
	mov \save32, %fs:(\tmp)
.endm

/* Saves the callee-saved registers the direct dispatch keeps its state in across a handler
 * call (five: the stack is then 16-byte aligned for the call), and restores them. */
.macro PUSH_STATE
	.irp r, rbx, rbp, r12, r13, r14
	push %\r
	.cfi_adjust_cfa_offset 8
	.cfi_rel_offset \r, 0
	.endr
.endm
.macro POP_STATE
	.irp r, r14, r13, r12, rbp, rbx
	pop %\r
	.cfi_adjust_cfa_offset -8
	.cfi_restore \r
	.endr
.endm

	.globl dprobe_fgraph_entry_direct
	.hidden dprobe_fgraph_entry_direct
	.type dprobe_fgraph_entry_direct, @function
	.p2align 5
dprobe_fgraph_entry_direct:
	.cfi_startproc
	/* rdi = site, rsi = fregs, edx = seen (SITE_LIGHT_DIRECT, hence no SITE_LIGHT_PT_REGS:
	 * SITE_LIGHT_ON is all the fallback needs to be told). */
	TASK_CTX_ENTER .Lentry_light
	mov PTR_SP(%rsi), %r9		/* the return-address slot */
	SEQ_PUBLISH %r9
	/* The list, read inside the section (the quiescence waiter's guarantee). */
	mov SITE_USERS(%rdi), %r10
	test %r10, %r10
	jz .Lentry_bail
	cmpl $1, SU_N(%r10)
	jne .Lentry_bail
	cmpw $1, SU_LIGHT(%r10)		/* light, and no user wants a pt_regs */
	jne .Lentry_bail
	mov SU_OPS(%r10), %r10		/* the ops */
	mov OPS_DIRECT(%r10), %r11	/* its fprobe */
	test %r11, %r11
	jz .Lentry_bail
	testl $FP_FL_DISABLED, FP_FLAGS(%r11)
	jnz .Lentry_bail
	cmpq $0, OPS_EXIT(%r10)
	je .Lentry_only
	/* A hooked function tail-called this one: the compiled dispatch finds the caller. */
	mov (%r9), %r8
	NOT_RETURN_HOOK %r8, .Lentry_bail
	/* Frames at or below this slot are gone (or of another stack): reaped by the full
	 * path. */
	mov TC_SHADOW_TOP(%rax), %ecx
	test %ecx, %ecx
	jz 1f
	mov %ecx, %r8d
	sub TC_SHADOW - 8(%rax,%rcx,8), %r8d
	cmp %r9, TC_SHADOW + SF_RETP * 8(%rax,%r8,8)
	jbe .Lentry_bail
1:	/* The frame: SF_USERS words, the ops and its generation, the data, the size word. */
	mov OPS_DATA_WORDS(%r10), %r8d
	lea SF_USERS + 3(%rcx,%r8), %r8d	/* the top once it is published */
	cmp $TC_SHADOW_WORDS, %r8d
	ja .Lentry_bail
	/* The hit is ours from here. */
	PUSH_STATE
	mov %rax, %rbx			/* task_ctx */
	lea TC_SHADOW(%rax,%rcx,8), %rbp	/* the frame */
	mov %r8d, %r12d			/* the new top */
	mov %rdx, %r13			/* the count published */
	mov %r8d, %eax
	sub %ecx, %eax
	mov %rax, TC_SHADOW - 8(%rbx,%r12,8)	/* the frame's size, in its last word */
	movq $0, SF_NUSERS * 8(%rbp)
	inc %ecx
	mov %ecx, TC_ENTRY_PENDING(%rbx)	/* its first word + 1 */
	mov %r10, SF_USERS * 8(%rbp)
	mov OPS_DATA_WORDS(%r10), %edx
	mov OPS_GEN(%r10), %rax
	shl $16, %rax
	or %rdx, %rax
	mov %rax, (SF_USERS + 1) * 8(%rbp)
	xor %r8d, %r8d			/* no data, or the words after the generation, zeroed */
	test %edx, %edx
	jz 2f
	lea (SF_USERS + 2) * 8(%rbp), %r8
	movq $0, (%r8)
2:	mov (%r9), %rdx			/* parent_ip */
	mov %rdx, SF_RET * 8(%rbp)
	mov %r9, SF_RETP * 8(%rbp)
	mov _ZN6dprobe4arch25fgraph_return_direct_addrE(%rip), %rax
	mov %rax, SF_HOOK * 8(%rbp)
	mov SITE_IP(%rdi), %rax
	mov %rax, SF_IP * 8(%rbp)
	mov %r10, TC_ENTRY_OPS(%rbx)
	mov FP_ENTRY_HANDLER(%r11), %r10
	xor %eax, %eax
	test %r10, %r10
	jz 3f
	EXT_UNSAVED_RAISE %r14, %r14d, %r9, %ecx
	mov %rsi, %rcx			/* fregs */
	mov SITE_IP(%rdi), %rsi		/* ip */
	mov %r11, %rdi			/* fp */
	call *%r10
	EXT_UNSAVED_RESTORE %r14d, %r9
3:	test %eax, %eax
	mov $0, %eax
	jnz 4f				/* declined: no exit */
	movq $1, SF_NUSERS * 8(%rbp)	/* accepted, before entry_ops is cleared */
	movq $0, TC_ENTRY_OPS(%rbx)
	mov %r12d, TC_SHADOW_TOP(%rbx)
	mov $3, %eax			/* the exit is hooked, in a direct frame */
4:	movq $0, TC_ENTRY_OPS(%rbx)
	movl $0, TC_ENTRY_PENDING(%rbx)
	SEQ_EXIT_FROM %rbx, %r13, %r13w
	POP_STATE
	ret

.Lentry_only:
	/* No exit handler: the entry handler, no frame. */
	mov FP_ENTRY_HANDLER(%r11), %r10
	test %r10, %r10
	jz 6f
	PUSH_STATE
	mov %rax, %rbx			/* task_ctx */
	mov %rdx, %r13			/* the count published */
	EXT_UNSAVED_RAISE %r14, %r14d, %r8, %ecx
	mov %rsi, %rcx			/* fregs */
	mov (%r9), %rdx			/* parent_ip */
	mov SITE_IP(%rdi), %rsi		/* ip */
	mov %r11, %rdi			/* fp */
	xor %r8d, %r8d			/* no data */
	call *%r10
	EXT_UNSAVED_RESTORE %r14d, %r8
	mov %rbx, %rax
	mov %r13, %rdx
	POP_STATE
6:	SEQ_EXIT_FROM %rax, %rdx, %dx
	xor %eax, %eax
	ret

.Lentry_bail:
	SEQ_EXIT_FROM %rax, %rdx, %dx
.Lentry_light:
	mov $SITE_LIGHT_ON, %edx
	jmp dprobe_fgraph_entry_light
	.cfi_endproc
	.size dprobe_fgraph_entry_direct, . - dprobe_fgraph_entry_direct

	.globl dprobe_ftrace_return_direct
	.hidden dprobe_ftrace_return_direct
	.type dprobe_ftrace_return_direct, @function
	.p2align 5
dprobe_ftrace_return_direct:
	.cfi_startproc
	/* rdi = fregs, kept for the fallback until the return is ours. */
	TASK_CTX_ENTER .Lreturn_light
	mov PTR_SP(%rdi), %r9
	sub $8, %r9			/* the slot returned from */
	/* The top frame must be this return's, with one direct user; anything else goes to
	 * the light dispatch at once. Read before the section is entered: only this thread
	 * changes its shadow stack (its signal handlers run whole sections in between), and
	 * ops records are never freed; the generation check below, inside the section, tells
	 * whether the ops is still the one that built the frame. */
	mov TC_SHADOW_TOP(%rax), %r8d
	test %r8d, %r8d
	jz .Lreturn_light
	mov %r8d, %r10d
	sub TC_SHADOW - 8(%rax,%r8,8), %r10d	/* its first word */
	lea TC_SHADOW(%rax,%r10,8), %r10	/* the frame */
	cmp %r9, SF_RETP * 8(%r10)
	jne .Lreturn_light
	cmpq $1, SF_NUSERS * 8(%r10)
	jne .Lreturn_light
	mov SF_USERS * 8(%r10), %r11		/* the ops */
	cmpb $0, OPS_LIGHT(%r11)
	je .Lreturn_light
	cmpq $0, OPS_DIRECT(%r11)
	je .Lreturn_light
	SEQ_PUBLISH %r9
	mov SF_RET * 8(%r10), %rsi		/* where to return */
	NOT_RETURN_HOOK %rsi, .Lreturn_bail
	/* An ops retired since the entry (unregistered, or reused) gets no exit call: its
	 * generation then differs from the one in the frame (both compared modulo 2^48). */
	mov OPS_GEN(%r11), %r8
	shl $16, %r8
	mov (SF_USERS + 1) * 8(%r10), %rcx
	xor %cx, %cx
	cmp %rcx, %r8
	jne .Lreturn_retired
	mov OPS_DIRECT(%r11), %r11		/* its fprobe (the same ops: as checked above) */
	/* The return is ours from here. Unwinders walking out of a handler read the return
	 * address from the slot. */
	mov %rsi, (%r9)
	mov %rsi, PTR_IP(%rdi)
	testl $FP_FL_DISABLED, FP_FLAGS(%r11)
	jnz 2f
	mov FP_EXIT_HANDLER(%r11), %r8
	test %r8, %r8
	jz 2f
	PUSH_STATE
	mov %rax, %rbx			/* task_ctx */
	mov %r10, %rbp			/* the frame */
	mov %rsi, %r12			/* where to return */
	mov %rdx, %r13			/* the count published */
	EXT_UNSAVED_RAISE %r14, %r14d, %r9, %ecx
	mov %rdi, %rcx			/* fregs */
	mov %rsi, %rdx			/* ret_ip */
	mov SF_IP * 8(%rbp), %rsi	/* ip */
	mov %r11, %rdi			/* fp */
	mov %r8, %rax
	xor %r8d, %r8d			/* no data, or the words after the generation */
	testw $0xffff, (SF_USERS + 1) * 8(%rbp)
	jz 1f
	lea (SF_USERS + 2) * 8(%rbp), %r8
1:	call *%rax
	EXT_UNSAVED_RESTORE %r14d, %r9
	/* Done: a frame dropped later (a signal handler left this section with a jump) must
	 * not be reported to this user again. */
	movzwl (SF_USERS + 1) * 8(%rbp), %eax
	mov %rax, (SF_USERS + 1) * 8(%rbp)
	mov %rbx, %rax
	mov %rbp, %r10
	mov %r12, %rsi
	mov %r13, %rdx
	POP_STATE
2:	/* Pop the frame: shadow_top = its first word's index. */
	sub %rax, %r10
	sub $TC_SHADOW, %r10
	shr $3, %r10
	mov %r10d, TC_SHADOW_TOP(%rax)
	SEQ_EXIT_FROM %rax, %rdx, %dx
	mov %rsi, %rax
	ret

.Lreturn_retired:
	mov %rsi, (%r9)
	mov %rsi, PTR_IP(%rdi)
	jmp 2b

.Lreturn_bail:
	SEQ_EXIT_FROM %rax, %rdx, %dx
.Lreturn_light:
	jmp dprobe_ftrace_return_light
	.cfi_endproc
	.size dprobe_ftrace_return_direct, . - dprobe_ftrace_return_direct

	.section .note.GNU-stack, "", @progbits
