/*
 * fentry and return trampolines (the kernel's ftrace_caller / return_to_handler, and the
 * "call the function from the trampoline" scheme of its BPF trampolines for fexit).
 *
 * A patched site jumps to a per-site stub in dprobe's executable memory:
 *     mov %r11, -8(%rsp)      park r11 in the (unused) red zone of the probed function
 *     movabs $site, %r11      the site record
 *     jmp *tramp(%rip)        one of the dprobe_ftrace_caller_* variants below
 * so the trampoline starts with the probed function's stack as at its entry: [rsp] is its
 * caller's return address. The trampoline saves the registers, runs the entry handlers
 * (dprobe_fgraph_entry) and then either jumps to the function's body, or, when an exit
 * handler wants the return, *calls* the body from dprobe_fgraph_call_*: the caller's return
 * address has been moved to the thread's shadow stack and the slot it occupied receives the
 * return address of that call, so the body returns (predicted) into dprobe_fgraph_return_*,
 * which runs the exit handlers and returns to the real caller with `ret`, paired with the
 * caller's own call. Calls and returns stay paired, for the return stack buffer and for CET
 * shadow stacks. dprobe_return_to_handler_* serves returns hooked the other way, by
 * replacing the return address (a kretprobe entered through an int3): it ends with
 * `jmp *`, since the function's own `ret` has consumed the caller's prediction.
 *
 * The variants differ in how much of each vector register they keep (xmm, ymm, zmm), and
 * in how many of them: a patch site is in code built with -pg/-mfentry/-fpatchable-
 * function-entry, where GCC turns interprocedural register allocation (-fipa-ra) off, so
 * its callers expect every call-clobbered register clobbered and only the argument
 * registers 0-7 need keeping. A jump site is in a plain function whose callers in the same
 * unit may keep values in any vector register the function is known not to touch: its
 * entry keeps all sixteen. The return trampolines keep the result registers 0-1, and all
 * sixteen once a jump site or a kretprobe has been set up in the process
 * (dprobe_ret_keep_all_xmm), so that code built with patch sites alone does not pay.
 *
 * Vector state. Handlers and dprobe's C++ run with the upper halves of the vector
 * registers clean (after vzeroupper): on Intel parts a legacy-SSE instruction costs about
 * 200 ns while they are in use. The registers kept are first tested: when their upper bits
 * (128 and up) are all zero, only their low 128 bits are stored, and restored with VEX.128
 * loads, which leave the upper state as clean as the probed code had it; otherwise they are
 * stored and restored at full width, and the probed code gets its live upper state back
 * bit for bit. Inside a light optprobe handler (arch/x86_64/ext_state.h) nobody saved the
 * state of the code that optprobe interrupted, so no vector register is touched at all and
 * the handlers run inside a whole xsave/xrstor (dprobe_call_ext_saved).
 *
 * Light hits. Most handlers are integer code. When every handler of a site provably leaves
 * the extended state alone (scanned when the fprobe is registered, as for the light
 * optprobe detour; ftrace_ops::light) and so does the dispatch (core/ftrace_dispatch.cpp,
 * built with -mgeneral-regs-only and scanned once), the site's record says so
 * (SITE_LIGHT) and its hits save no vector register, test no upper state, issue no
 * vzeroupper, and at the entry store the callee-saved registers only when a user wants a
 * full pt_regs (a kretprobe; fprobe handlers get the kernel's partial ftrace_regs). The
 * entry calls dprobe_fgraph_entry_light and, when an exit is wanted, the body from
 * dprobe_fgraph_call_light_*, whose return calls dprobe_ftrace_return_light.
 * Both answer "not now" before anything ran when the hit needs more (the thread's first
 * hit, recursion, a gone frame, a list that changed), and the full path runs instead.
 * fregs->vec is NULL in a light hit: ftrace_regs_get_xmm() reads the live registers then.
 * A light site whose one user gave direct handlers (SITE_LIGHT_DIRECT, core's
 * ftrace_direct: an fprobe's handlers) runs the direct entry
 * inline instead (DIRECT_ENTRY, ftrace_direct.inc); the body of a call it hooked is called
 * from dprobe_fgraph_call_direct_*, whose return runs the direct exit inline (DIRECT_EXIT).
 * Both fall back to the light dispatch for anything else.
 *
 * Everything else the probed code can observe is preserved: all general registers (the
 * caller may rely on a callee's known clobbers with -fipa-ra), the arithmetic flags (with
 * lahf/seto instead of the slow popf), and at return the x87 stack (long double results:
 * set aside in C++ around exit handlers that may touch it, dprobe_x87_pop/push).
 * MXCSR is not saved: stmxcsr costs more than everything else here together, and like any
 * called function a handler keeps the control bits (callee-saved) but may raise sticky
 * exception flags.
 */
#include "arch/x86_64/ftrace_frame.h"
#include "arch/x86_64/tramp_macros.inc"
#include "arch/x86_64/ftrace_direct.inc"

	.section dprobe_noprobe_text, "ax", @progbits

/* lahf/seto snapshot of SF ZF AF PF CF (AH) and OF (AL) into FLAGS; clobbers rax. */
.macro SAVE_FLAGS
	lahf
	seto %al
	mov %ax, PTR_FLAGS(%rsp)
.endm

/* Inverse of SAVE_FLAGS: al=1 + 0x7f overflows and sets OF; sahf sets the rest. */
.macro RESTORE_FLAGS
	mov PTR_FLAGS(%rsp), %ax
	add $0x7f, %al
	sahf
.endm

/*
 * Calls FN (C++, arguments already in rdi/rsi; its result stays in rax) with vector
 * registers 0..N-1 saved in the area at %rsp (VSIZE bytes apart, 64-byte aligned) and the
 * frame at %rbx. Inside a light optprobe handler the vector registers are only copied for
 * the handlers to read, and FN runs inside a whole xsave/xrstor. Clobbers r11, the flags.
 */
.macro CALL_WITH_VECTORS fn, vsize, n, acc, tmp
	mov %rsp, FREGS_VEC(%rbx)
	movq $\vsize, FREGS_VEC_SIZE(%rbx)
	movq dprobe_ext_unsaved@gottpoff(%rip), %r11
	cmpl $0, %fs:(%r11)
	jne 17f
	VSAVE \vsize, \n, \acc, \tmp
	call \fn
	VRESTORE \vsize, \n
	jmp 18f
17:
	.irp r, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15
	.if \r < \n
	.if \vsize == 16
	movdqu %xmm\r, \r * 16(%rsp)
	.else
	vmovdqu %xmm\r, \r * \vsize(%rsp)
	.endif
	.endif
	.endr
	movl $0, FR_VWIDE(%rbx)
	lea \fn(%rip), %r11
	call dprobe_call_ext_saved
18:
.endm

/*
 * Entry trampoline. N: vector registers kept (8 for patch sites, 16 for jump sites);
 * ACC/TMP: the last two of them (the upper-bits test's scratch registers).
 */
.macro FTRACE_CALLER vsize, n, acc, tmp, name
	.globl \name
	.hidden \name
	.type \name, @function
	.p2align 5
\name:
	.cfi_startproc
	/* [rsp] = the probed function's caller's return address, and the stub parked r11 at
	 * -8(%rsp), which becomes the top slot of this frame. For unwinders, this frame's caller
	 * is the probed function's caller: the site is the function's entry, where it has done
	 * nothing an unwinder must undo, so a thread cancelled in an entry handler, or a walk
	 * from it, goes straight to the caller. (gdb's unwinder for dprobe shows the probed
	 * function in between: the .Lent_* labels, ENTRY_LAYOUT.) */
	.cfi_def_cfa_offset 8
	lea -ENTRY_FRAME(%rsp), %rsp
.Lent_framed_\name:
	.cfi_adjust_cfa_offset ENTRY_FRAME
	mov %rax, PTR_AX(%rsp)
.Lent_ax_saved_\name:
	SAVE_FLAGS
	mov ENTRY_FRAME - 8(%rsp), %rax
	mov %rax, PTR_R11(%rsp)
	SAVE_SCRATCH_GPRS
.Lent_saved_\name:
	mov SITE_BODY(%r11), %rax
	mov %rax, PTR_IP(%rsp)
	mov SITE_IP(%r11), %rax
	mov %rax, FR_FUNC(%rsp)
.Lent_func_saved_\name:
	lea ENTRY_FRAME(%rsp), %rax
	mov %rax, PTR_SP(%rsp)
	mov %r11, %rdi
	mov %rsp, %rsi
	/* Handlers get a 64-byte aligned vector area and a 16-byte aligned stack. */
	mov %rsp, %rbx
	.cfi_def_cfa_register rbx
.Lent_rbx_frame_\name:
	/* Light (see the top of this file): nothing the dispatch and the handlers run touches
	 * the extended state, so nothing of it is saved. The dispatch may answer "not now"
	 * (2) before anything ran: then the full path runs after all. */
	movzbl SITE_LIGHT(%rdi), %edx
	test $SITE_LIGHT_ON, %dl
	jz 19f
	test $SITE_LIGHT_PT_REGS, %dl
	jz 22f
	STORE_CALLEE_SAVED
22:	movq $0, FREGS_VEC(%rbx)
	mov %rdi, FR_NEXT(%rbx)		/* the site, for the fallback (FR_NEXT is set below) */
	and $-16, %rsp
	/* One user with direct handlers: the direct entry (ftrace_direct.inc), or the light
	 * dispatch when the hit is not the direct entry's. When the direct entry built a frame,
	 * the body is called from dprobe_fgraph_call_direct_*, whose return runs the direct
	 * exit. */
	test $SITE_LIGHT_DIRECT, %dl
	jz 23f
	DIRECT_ENTRY 25f, 26f
	mov %rbx, %rsi
	mov $SITE_LIGHT_ON, %edx
23:	call dprobe_fgraph_entry_light
	lea dprobe_fgraph_call_light_\vsize(%rip), %rdx
	cmp $2, %eax
	jne 21f
	mov FR_NEXT(%rbx), %rdi
	mov %rbx, %rsi
	mov %rbx, %rsp
	jmp 20f
19:	/* The one user has an entry of its own (ftrace_direct.inc, DIRECT_CALL), which saves
	 * what it needs; when it answers "not now", the full path runs. */
	test $SITE_LIGHT_CALL, %dl
	jz 20f
	and $-16, %rsp
	DIRECT_CALL 26f, \vsize, \n
	mov %rbx, %rsi
	mov %rbx, %rsp
20:
	STORE_CALLEE_SAVED /* so kprobes and kretprobes on sites get a full pt_regs */
	sub $\n * \vsize, %rsp
	and $-64, %rsp
	CALL_WITH_VECTORS dprobe_fgraph_entry, \vsize, \n, \acc, \tmp
	lea dprobe_fgraph_call_\vsize(%rip), %rdx
	jmp 21f
25:	/* The direct entry built a frame. */
	lea dprobe_fgraph_call_direct_\vsize(%rip), %rdx
	mov $1, %eax
	jmp 21f
26:	xor %eax, %eax
21:
	/* rax: 1 when the function is to be called (its exit handlers want its return), from
	 * RDX, the light or the full one. A handler may redirect the function (regs->ip), as
	 * with the kernel's IPMODIFY. */
	mov PTR_IP(%rbx), %rcx
	mov %rcx, FR_TARGET(%rbx)
	test %eax, %eax
	cmovnz %rdx, %rcx
	mov %rcx, FR_NEXT(%rbx)
	mov %rbx, %rsp
.Lent_rsp_frame_\name:
	.cfi_def_cfa_register rsp
	RESTORE_SCRATCH_GPRS
	mov PTR_R11(%rsp), %r11
	RESTORE_FLAGS
	mov PTR_AX(%rsp), %rax
.Lent_restored_\name:
	lea ENTRY_FRAME(%rsp), %rsp
.Lent_unframed_\name:
	.cfi_adjust_cfa_offset -ENTRY_FRAME
	jmp *-24(%rsp)
.Lent_end_\name:
	.cfi_endproc
	.size \name, . - \name
.endm

/* One record of dprobe_entry_tramp_layout (see the end of this file). */
.macro ENTRY_LAYOUT name
	.quad \name
	.quad .Lent_framed_\name	/* from here the frame is at rsp... */
	.quad .Lent_rbx_frame_\name	/* ...from here at rbx (rsp is aligned)... */
	.quad .Lent_rsp_frame_\name	/* ...from here at rsp again... */
	.quad .Lent_unframed_\name	/* ...until here; out of it the return address is at rsp */
	.quad .Lent_end_\name
	.quad .Lent_ax_saved_\name	/* rax is in the frame from here... */
	.quad .Lent_saved_\name	/* ...all general registers from here... */
	.quad .Lent_restored_\name	/* ...to here (before it r11 is parked above the frame) */
	.quad ENTRY_FRAME		/* offset of the caller's return address */
	.quad FR_FUNC			/* offset of the probed function's site address, */
	.quad .Lent_func_saved_\name	/* there from here (before, the site record is in r11) */
.endm

/*
 * unsigned dprobe_x87_pop(void *buf): the x87 stack of a hooked return, set aside for exit
 * handlers that may use it (core/ftrace_dispatch.cpp). TOP (status word bits 11-13) is 0
 * when the stack is empty; 7 with one value (a long double result), 6 with two (complex
 * long double). Pops them into BUF (16 bytes each) and returns how many;
 * dprobe_x87_push(buf, n) pushes them back.
 */
	.globl dprobe_x87_pop
	.hidden dprobe_x87_pop
	.type dprobe_x87_pop, @function
	.p2align 4
dprobe_x87_pop:
	.cfi_startproc
	xor %ecx, %ecx
	fnstsw %ax
	shr $11, %eax
	and $7, %eax
	jz 1f
	fstpt (%rdi)
	inc %ecx
	cmp $7, %eax
	je 1f
	fstpt 16(%rdi)
	inc %ecx
1:	mov %ecx, %eax
	ret
	.cfi_endproc
	.size dprobe_x87_pop, . - dprobe_x87_pop

	.globl dprobe_x87_push
	.hidden dprobe_x87_push
	.type dprobe_x87_push, @function
	.p2align 4
dprobe_x87_push:
	.cfi_startproc
	test %esi, %esi
	jz 1f
	cmp $1, %esi
	je 2f
	fldt 16(%rdi)
2:	fldt (%rdi)
1:	ret
	.cfi_endproc
	.size dprobe_x87_push, . - dprobe_x87_push

/*
 * Return trampolines. BALANCED: reached by the return of a body that dprobe_fgraph_call_*
 * called (ends with `ret`); otherwise by a hooked function's return into a replaced return
 * address (ends with `jmp *`).
 *
 * The code an unwinder looks up for such a return (return address - 1) sits just before
 * it: the `call` of dprobe_fgraph_call_*, or a nop before dprobe_return_to_handler_*. That
 * frame (call it T) sits between the hooked function and its real caller, whose address
 * only the shadow stack knows. Its personality routine (core/unwind.cpp) supplies it: it
 * writes the real return address into the slot, from where the rule for rip below reads it,
 * or restarts the exception from the real caller (dprobe_return_reraise). The slot is at
 * T's stack pointer - 8; T's CFA is its stack pointer + 8, so that T and the real caller,
 * whose stack pointer is T's, have different frame identities (libgcc identifies a frame
 * by its callee's CFA). Unwinders that run no personality (gdb, _Unwind_Backtrace) see T
 * return to itself and stop there; dprobe's interposed backtrace() and _Unwind_Backtrace()
 * write every real return address back first, and gdb's frame unwinder for dprobe
 * (scripts/gdb/dprobe-gdb.py) reads it from the shadow stack.
 */
.macro RETURN_HANDLER vsize, balanced, tname, name, light=0
	.globl \tname
	.hidden \tname
	.type \tname, @function
	.p2align 5
\tname:
	.cfi_startproc
	.cfi_personality 0x1b, dprobe_return_personality
	.if \balanced
	/* Entered with [rsp] = the caller's return address (a copy is on the shadow stack)
	 * and the function's body address at -16(%rsp): pop the one, call the other. The
	 * call's return address takes the popped one's slot. */
	.cfi_def_cfa rsp, 8
	.cfi_offset rip, -8
	lea 8(%rsp), %rsp
	.cfi_def_cfa rsp, 8
	.cfi_offset rip, -16
	/* .cfi_val_offset rsp, -8 (DW_CFA_val_offset, rsp, 1 x data alignment -8), spelled as
	 * bytes for assemblers without the directive (clang, used by the fuzz build). */
	.cfi_escape 0x14, 0x07, 0x01
	call *-24(%rsp)
	.else
	.cfi_def_cfa rsp, 8
	.cfi_offset rip, -16
	.cfi_escape 0x14, 0x07, 0x01
	nop
	.endif
	.cfi_endproc
	.size \tname, . - \tname
	.globl \name
	.hidden \name
	.type \name, @function
\name:
	.cfi_startproc
	.cfi_def_cfa rsp, 0
	lea -8 - RET_FRAME(%rsp), %rsp
.Lret_framed_\name:
	.cfi_def_cfa rsp, RET_FRAME + 8
	.cfi_offset rip, -8
	mov %rax, PTR_AX(%rsp)
	SAVE_FLAGS
	SAVE_SCRATCH_GPRS
.Lret_bx_saved_\name:
	mov %r11, PTR_R11(%rsp)
	.if \light != 2
	STORE_CALLEE_SAVED /* a full pt_regs, for kretprobe handlers */
	.else
	/* A direct frame's user gets a partial ftrace_regs (SITE_LIGHT_DIRECT is never set
	 * with SITE_LIGHT_PT_REGS); should the direct exit hand the return to the full path,
	 * that stores them. */
	.endif
	lea RET_FRAME + 8(%rsp), %rax
	mov %rax, PTR_SP(%rsp)
	.if \light
	movq $0, FREGS_VEC(%rsp)
	.endif
	mov %rsp, %rdi
	mov %rsp, %rbx
	.cfi_def_cfa_register rbx
.Lret_rbx_frame_\name:
	.if \light
	/* Light: the frame was built by the light entry dispatch, whose users' exit
	 * handlers leave the extended state alone. The exit dispatch answers 0, before
	 * anything ran, when the full path must run. */
	and $-16, %rsp
	.if \light == 2
	DIRECT_EXIT 16f /* or, when the return is not the direct exit's, the light one: */
	mov %rbx, %rdi
	.endif
	call dprobe_ftrace_return_light
	test %rax, %rax
	jnz 16f
	mov %rbx, %rsp
	mov %rbx, %rdi
	.if \light == 2
	STORE_CALLEE_SAVED
	.endif
	.endif
	/* Registers 2-15 too once a plain function may return here (see the top of this
	 * file); the decision is kept in the frame for the restore (the switch only ever
	 * turns on). */
	movzbl dprobe_ret_keep_all_xmm(%rip), %eax
	mov %eax, FR_KEEP_ALL(%rbx)
	test %eax, %eax
	jnz 15f
	sub $2 * \vsize, %rsp
	and $-64, %rsp
	CALL_WITH_VECTORS dprobe_ftrace_return, \vsize, 2, 1, 0
	jmp 16f
15:
	sub $16 * \vsize, %rsp
	and $-64, %rsp
	CALL_WITH_VECTORS dprobe_ftrace_return, \vsize, 16, 15, 14
16:
	mov %rbx, %rsp
.Lret_rsp_frame_\name:
	.cfi_def_cfa_register rsp
	/* The real return address, into the slot. */
	mov %rax, RET_FRAME(%rsp)
	RESTORE_SCRATCH_GPRS
.Lret_bx_restored_\name:
	mov PTR_R11(%rsp), %r11
	RESTORE_FLAGS
	mov PTR_AX(%rsp), %rax
	.if \balanced
	lea RET_FRAME(%rsp), %rsp
.Lret_unframed_\name:
	.cfi_def_cfa rsp, 8
	ret
	.else
	lea RET_FRAME + 8(%rsp), %rsp
.Lret_unframed_\name:
	.cfi_def_cfa rsp, 0
	/* jmp, not ret: the hooked function's ret already consumed the return stack buffer
	 * entry of its caller's call; another ret would mispredict every return after it. The
	 * address sits in the red zone, which signal delivery does not touch. */
	jmp *-8(%rsp)
	.endif
.Lret_end_\name:
	.cfi_endproc
	.size \name, . - \name
.endm

/* One record of dprobe_return_tramp_layout (see below): where in a return trampoline its
 * frame lives, instruction by instruction. */
.macro RETURN_LAYOUT tname, name, unframed_slot
	.quad \tname			/* the code an unwinder looks up */
	.quad \name			/* what a hooked return-address slot holds */
	.quad .Lret_framed_\name	/* from here the frame is at rsp... */
	.quad .Lret_rbx_frame_\name	/* ...from here at rbx (rsp is aligned)... */
	.quad .Lret_rsp_frame_\name	/* ...from here at rsp again... */
	.quad .Lret_unframed_\name	/* ...until here; then the slot is at rsp - 8 */
	.quad .Lret_end_\name
	.quad .Lret_bx_saved_\name	/* the caller's rbx is in the frame from here... */
	.quad .Lret_bx_restored_\name	/* ...to here */
	.quad RET_FRAME			/* the slot's offset in the frame */
	.quad PTR_BX			/* rbx's offset in the frame */
	.quad \unframed_slot		/* where the slot is from .Lret_unframed on: rsp + this */
.endm

FTRACE_CALLER 16, 8, 7, 6, dprobe_ftrace_caller_16
FTRACE_CALLER 32, 8, 7, 6, dprobe_ftrace_caller_32
FTRACE_CALLER 64, 8, 7, 6, dprobe_ftrace_caller_64
FTRACE_CALLER 16, 16, 15, 14, dprobe_ftrace_caller_all_16
FTRACE_CALLER 32, 16, 15, 14, dprobe_ftrace_caller_all_32
FTRACE_CALLER 64, 16, 15, 14, dprobe_ftrace_caller_all_64
RETURN_HANDLER 16, 1, dprobe_fgraph_call_16, dprobe_fgraph_return_16
RETURN_HANDLER 32, 1, dprobe_fgraph_call_32, dprobe_fgraph_return_32
RETURN_HANDLER 64, 1, dprobe_fgraph_call_64, dprobe_fgraph_return_64
RETURN_HANDLER 16, 1, dprobe_fgraph_call_light_16, dprobe_fgraph_return_light_16, 1
RETURN_HANDLER 32, 1, dprobe_fgraph_call_light_32, dprobe_fgraph_return_light_32, 1
RETURN_HANDLER 64, 1, dprobe_fgraph_call_light_64, dprobe_fgraph_return_light_64, 1
RETURN_HANDLER 16, 1, dprobe_fgraph_call_direct_16, dprobe_fgraph_return_direct_16, 2
RETURN_HANDLER 32, 1, dprobe_fgraph_call_direct_32, dprobe_fgraph_return_direct_32, 2
RETURN_HANDLER 64, 1, dprobe_fgraph_call_direct_64, dprobe_fgraph_return_direct_64, 2
RETURN_HANDLER 16, 0, dprobe_return_trampoline_16, dprobe_return_to_handler_16
RETURN_HANDLER 32, 0, dprobe_return_trampoline_32, dprobe_return_to_handler_32
RETURN_HANDLER 64, 0, dprobe_return_trampoline_64, dprobe_return_to_handler_64

/*
 * For debuggers (core/task_ctx.cpp, scripts/gdb/dprobe-gdb.py): a hooked function
 * returns into a return trampoline, and its caller is known only from the shadow stack and
 * from where the trampoline keeps its frame at each instruction. Layout of the twelve return
 * trampolines, RETURN_LAYOUT_WORDS (ftrace_frame.h) words each.
 */
	.section .data.rel.ro, "aw", @progbits
	.p2align 3
	.globl dprobe_return_tramp_layout
	.hidden dprobe_return_tramp_layout
	.type dprobe_return_tramp_layout, @object
dprobe_return_tramp_layout:
	RETURN_LAYOUT dprobe_fgraph_call_16, dprobe_fgraph_return_16, 0
	RETURN_LAYOUT dprobe_fgraph_call_32, dprobe_fgraph_return_32, 0
	RETURN_LAYOUT dprobe_fgraph_call_64, dprobe_fgraph_return_64, 0
	RETURN_LAYOUT dprobe_fgraph_call_light_16, dprobe_fgraph_return_light_16, 0
	RETURN_LAYOUT dprobe_fgraph_call_light_32, dprobe_fgraph_return_light_32, 0
	RETURN_LAYOUT dprobe_fgraph_call_light_64, dprobe_fgraph_return_light_64, 0
	RETURN_LAYOUT dprobe_fgraph_call_direct_16, dprobe_fgraph_return_direct_16, 0
	RETURN_LAYOUT dprobe_fgraph_call_direct_32, dprobe_fgraph_return_direct_32, 0
	RETURN_LAYOUT dprobe_fgraph_call_direct_64, dprobe_fgraph_return_direct_64, 0
	RETURN_LAYOUT dprobe_return_trampoline_16, dprobe_return_to_handler_16, -8
	RETURN_LAYOUT dprobe_return_trampoline_32, dprobe_return_to_handler_32, -8
	RETURN_LAYOUT dprobe_return_trampoline_64, dprobe_return_to_handler_64, -8
	.size dprobe_return_tramp_layout, . - dprobe_return_tramp_layout

/* The same for the six fentry trampolines, ENTRY_LAYOUT_WORDS words each: a thread in one
 * is in a probed function's entry, which gdb can show as a frame of its own. The frame is a
 * struct pt_regs (ftrace_frame.h) once the registers are saved. */
	.globl dprobe_entry_tramp_layout
	.hidden dprobe_entry_tramp_layout
	.type dprobe_entry_tramp_layout, @object
dprobe_entry_tramp_layout:
	ENTRY_LAYOUT dprobe_ftrace_caller_16
	ENTRY_LAYOUT dprobe_ftrace_caller_32
	ENTRY_LAYOUT dprobe_ftrace_caller_64
	ENTRY_LAYOUT dprobe_ftrace_caller_all_16
	ENTRY_LAYOUT dprobe_ftrace_caller_all_32
	ENTRY_LAYOUT dprobe_ftrace_caller_all_64
	.size dprobe_entry_tramp_layout, . - dprobe_entry_tramp_layout
	.section dprobe_noprobe_text, "ax", @progbits

/*
 * Where the return personality sends an exception whose handler frame is T (see above):
 * the stack pointer is the real caller's (just above the slot), rax holds the exception and
 * rdx the real return address. Put the address back into the slot, so that this frame looks
 * like one called from the real caller, and raise the exception again from here.
 */
	.globl dprobe_return_reraise
	.hidden dprobe_return_reraise
	.type dprobe_return_reraise, @function
	.p2align 4
dprobe_return_reraise:
	.cfi_startproc
	.cfi_def_cfa rsp, 0
	.cfi_undefined rip
	push %rdx
	.cfi_def_cfa rsp, 8
	.cfi_offset rip, -8
	sub $8, %rsp
	.cfi_adjust_cfa_offset 8
	mov %rax, %rdi
	call dprobe_reraise
	ud2
	.cfi_endproc
	.size dprobe_return_reraise, . - dprobe_return_reraise

	.section .note.GNU-stack, "", @progbits

/*
 * gdb's frame unwinder for these trampolines (scripts/gdb/dprobe-gdb.py), for gdb to load
 * with whatever object carries this one: libdprobe.so, or a program linked with the static
 * archive. An inline Python entry of .debug_gdb_scripts: kind 4, the script's name up to the
 * first newline, the script, a NUL. gdb runs it when its auto-load safe-path allows the
 * object.
 */
	.pushsection .debug_gdb_scripts, "MS", @progbits, 1
	.byte 4
	.ascii "dprobe-gdb.py\n"
	.incbin DPROBE_GDB_SCRIPT
	.byte 0
	.popsection
