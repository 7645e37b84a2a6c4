/*
 * fentry and return trampolines (the kernel's ftrace_caller / return_to_handler).
 *
 * A patched site calls a per-site stub in dprobe's executable memory:
 *     mov %r11, -8(%rsp)      park r11 in the (unused) red zone of the probed function
 *     movabs $site, %r11      the site record
 *     jmp *tramp(%rip)        one of the dprobe_ftrace_caller_* variants below
 * The variants differ in how much of each vector register they keep (xmm, ymm, zmm), and
 * in how many of them: a patch site is in code built with -pg/-mfentry/-fpatchable-function-
 * entry, where GCC turns interprocedural register allocation (-fipa-ra) off, so its callers
 * expect every call-clobbered register clobbered and only the argument registers xmm0-7 need
 * keeping. A jump site is in a plain function whose callers in the same unit may keep values
 * in any vector register the function is known not to touch: its entry keeps all sixteen.
 * The return trampoline serves both kinds and kretprobes on any function: it keeps the
 * result registers xmm0/xmm1, and xmm2-15 as well once a jump site or a kretprobe has been
 * set up in the process (dprobe_ret_keep_all_xmm), so that code built with patch sites
 * alone does not pay for them.
 *
 * Everything the probed code can observe is preserved: all caller-saved general registers
 * (the caller may rely on a callee's known clobbers with -fipa-ra), the vector argument
 * registers at full width, the arithmetic flags (with lahf/seto instead of the slow popf),
 * and at return the x87 stack (long double results). MXCSR is not saved: stmxcsr costs
 * more than everything else here together, and like any called function a handler keeps
 * the control bits (callee-saved) but may raise sticky exception flags.
 */
#include "arch/x86_64/ftrace_frame.h"
#include "arch/x86_64/tramp_macros.inc"

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

/* Calls FN (C++, arguments already in rdi/rsi). Inside the handler of a light optprobe
 * detour (arch/x86_64/ext_state.h) nobody saved the extended state the probed code may
 * have live: then FN runs with the whole of it saved around it. Clobbers rax, r11. */
.macro CALL_HANDLERS fn
	movq dprobe_ext_unsaved@gottpoff(%rip), %rax
	cmpl $0, %fs:(%rax)
	jne 8f
	call \fn
	jmp 9f
8:	lea \fn(%rip), %r11
	call dprobe_call_ext_saved
9:
.endm

.macro SAVE_VEC kind, n
	.if \kind == 16
	movdqu %xmm\n, FR_VEC + \n * 16(%rsp)
	.elseif \kind == 32
	vmovdqu %ymm\n, FR_VEC + \n * 32(%rsp)
	.else
	vmovdqu64 %zmm\n, FR_VEC + \n * 64(%rsp)
	.endif
.endm

.macro RESTORE_VEC kind, n
	.if \kind == 16
	movdqu FR_VEC + \n * 16(%rsp), %xmm\n
	.elseif \kind == 32
	vmovdqu FR_VEC + \n * 32(%rsp), %ymm\n
	.else
	vmovdqu64 FR_VEC + \n * 64(%rsp), %zmm\n
	.endif
.endm

/* xmm FIRST .. FIRST+COUNT-1, 16 bytes each, from offset BASE: the registers past the
 * argument or result ones. Their low 128 bits are what code built for the x86-64 baseline
 * (SSE2, as distributions build) can keep in them. */
.macro SAVE_XMMS kind, first, count, base
	.irp n, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15
	.if \n >= \first && \n < \first + \count
	.if \kind == 16
	movdqu %xmm\n, \base + (\n - \first) * 16(%rsp)
	.else
	vmovdqu %xmm\n, \base + (\n - \first) * 16(%rsp)
	.endif
	.endif
	.endr
.endm

.macro RESTORE_XMMS kind, first, count, base
	.irp n, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15
	.if \n >= \first && \n < \first + \count
	.if \kind == 16
	movdqu \base + (\n - \first) * 16(%rsp), %xmm\n
	.else
	vmovdqu \base + (\n - \first) * 16(%rsp), %xmm\n
	.endif
	.endif
	.endr
.endm

/* NX: 0 for patch sites, 8 for jump sites (NAME ends in _all): xmm8-15 kept too. */
.macro FTRACE_CALLER vsize, nx, name
	.globl \name
	.hidden \name
	.type \name, @function
	.p2align 5
\name:
	.cfi_startproc
	/* [rsp] = return address into the probed function (site + call length), and the
	 * stub parked r11 at -8(%rsp), which becomes the top slot of this frame.
	 * For unwinders, this frame's caller is the probed function's caller: the site is the
	 * function's entry, where it has done nothing an unwinder must undo (no register
	 * saved, no object to destroy), and the address after the site is in no call-site
	 * table of its LSDA (the C++ personality would call std::terminate for it) nor, for a
	 * jump site, in any FDE (the detour). So CFA = the function's CFA (rsp + 16), and the
	 * return address is the function's own: a thread cancelled in an entry handler, or a
	 * walk from it, goes straight to the caller. (gdb's unwinder for dprobe shows the
	 * probed function in between where it can: the .Lent_* labels, ENTRY_LAYOUT.) */
	.cfi_def_cfa_offset 16
	lea -ENTRY_FRAME(\vsize, \nx)(%rsp), %rsp
.Lent_framed_\name:
	.cfi_adjust_cfa_offset ENTRY_FRAME(\vsize, \nx)
	mov %rax, PTR_AX(%rsp)
.Lent_ax_saved_\name:
	SAVE_FLAGS
	mov ENTRY_FRAME(\vsize, \nx) - 8(%rsp), %rax
	mov %rax, PTR_R11(%rsp)
	SAVE_SCRATCH_GPRS
.Lent_saved_\name:
	STORE_CALLEE_SAVED /* so kprobes on sites get a full pt_regs */
	SAVE_VEC \vsize, 0
	SAVE_VEC \vsize, 1
	SAVE_VEC \vsize, 2
	SAVE_VEC \vsize, 3
	SAVE_VEC \vsize, 4
	SAVE_VEC \vsize, 5
	SAVE_VEC \vsize, 6
	SAVE_VEC \vsize, 7
	SAVE_XMMS \vsize, 8, \nx, (FR_VEC+8*\vsize)
	lea FR_VEC(%rsp), %rax
	mov %rax, FREGS_VEC(%rsp)
	movq $\vsize, FREGS_VEC_SIZE(%rsp)
	mov ENTRY_FRAME(\vsize, \nx)(%rsp), %rax
	mov %rax, PTR_IP(%rsp)
	lea ENTRY_FRAME(\vsize, \nx) + 8(%rsp), %rax
	mov %rax, PTR_SP(%rsp)
	mov %r11, %rdi
	mov %rsp, %rsi
	/* Handlers get a 16-byte aligned stack even if the probed code's was not. */
	mov %rsp, %rbx
	.cfi_def_cfa_register rbx
.Lent_rbx_frame_\name:
	and $-16, %rsp
	CALL_HANDLERS dprobe_ftrace_entry
	mov %rbx, %rsp
.Lent_rsp_frame_\name:
	.cfi_def_cfa_register rsp
	/* A handler may redirect the function (regs->ip), as with the kernel's IPMODIFY. */
	mov PTR_IP(%rsp), %rax
	mov %rax, ENTRY_FRAME(\vsize, \nx)(%rsp)
	RESTORE_VEC \vsize, 0
	RESTORE_VEC \vsize, 1
	RESTORE_VEC \vsize, 2
	RESTORE_VEC \vsize, 3
	RESTORE_VEC \vsize, 4
	RESTORE_VEC \vsize, 5
	RESTORE_VEC \vsize, 6
	RESTORE_VEC \vsize, 7
	RESTORE_XMMS \vsize, 8, \nx, (FR_VEC+8*\vsize)
	RESTORE_SCRATCH_GPRS
	mov PTR_R11(%rsp), %r11
	RESTORE_FLAGS
	mov PTR_AX(%rsp), %rax
.Lent_restored_\name:
	lea ENTRY_FRAME(\vsize, \nx)(%rsp), %rsp
.Lent_unframed_\name:
	.cfi_adjust_cfa_offset -ENTRY_FRAME(\vsize, \nx)
	ret
.Lent_end_\name:
	.cfi_endproc
	.size \name, . - \name
.endm

/* One record of dprobe_entry_tramp_layout (see the end of this file). */
.macro ENTRY_LAYOUT vsize, nx, name
	.quad \name
	.quad .Lent_framed_\name	/* from here the frame is at rsp... */
	.quad .Lent_rbx_frame_\name	/* ...from here at rbx (rsp is aligned)... */
	.quad .Lent_rsp_frame_\name	/* ...from here at rsp again... */
	.quad .Lent_unframed_\name	/* ...until here; out of it the return address is at rsp */
	.quad .Lent_end_\name
	.quad .Lent_ax_saved_\name	/* rax is in the frame from here... */
	.quad .Lent_saved_\name	/* ...all general registers from here... */
	.quad .Lent_restored_\name	/* ...to here (before it r11 is parked above the frame) */
	.quad ENTRY_FRAME(\vsize, \nx)	/* offset of the return address into the function */
.endm

/*
 * The probed function returns here instead of to its caller. The slot its `ret` just
 * popped becomes the top of this frame; C++ stores the real return address there before
 * any exit handler runs, so that the CFI below lets unwinders (backtrace(), a C++ throw
 * from a handler) walk from a handler into the real caller.
 */
.macro RETURN_HANDLER vsize
	.globl dprobe_return_to_handler_\vsize
	.hidden dprobe_return_to_handler_\vsize
	.type dprobe_return_to_handler_\vsize, @function
	.p2align 5
	/*
	 * A hooked return-address slot holds the address of the next instruction: for an
	 * unwinder that reads it, the caller "returned here", and it looks up the FDE of this
	 * nop (return address - 1). That frame (call it T) sits between the hooked function
	 * and its real caller, whose address only the shadow stack knows. Its personality
	 * routine (core/unwind.cpp) supplies it: it writes the real return address into the
	 * slot, from where the rule for rip below reads it, or restarts the exception from the
	 * real caller (dprobe_return_reraise). The slot is at T's stack pointer - 8; T's CFA is
	 * its stack pointer + 8, so that T and the real caller, whose stack pointer is T's,
	 * have different frame identities (libgcc identifies a frame by its callee's CFA).
	 * Unwinders that run no personality (gdb, _Unwind_Backtrace) see T return to itself
	 * and stop there; dprobe's interposed backtrace() and _Unwind_Backtrace() write every
	 * real return address back first, and gdb's frame unwinder for dprobe
	 * (scripts/gdb/dprobe-gdb.py) reads it from the shadow stack. The nop has a symbol of
	 * its own so that a debugger names T.
	 */
	.type dprobe_return_trampoline_\vsize, @function
dprobe_return_trampoline_\vsize:
	.cfi_startproc
	.cfi_personality 0x1b, dprobe_return_personality
	.cfi_def_cfa rsp, 8
	.cfi_offset rip, -16
	/* .cfi_val_offset rsp, -8 (DW_CFA_val_offset, rsp, 1 x data alignment -8), spelled as
	 * bytes for assemblers without the directive (clang, used by the fuzz build). */
	.cfi_escape 0x14, 0x07, 0x01
	nop
	.cfi_endproc
	.size dprobe_return_trampoline_\vsize, . - dprobe_return_trampoline_\vsize
dprobe_return_to_handler_\vsize:
	.cfi_startproc
	.cfi_def_cfa rsp, 0
	lea -8 - RET_FRAME(\vsize)(%rsp), %rsp
.Lret_framed_\vsize:
	.cfi_def_cfa rsp, RET_FRAME(\vsize) + 8
	.cfi_offset rip, -8
	mov %rax, PTR_AX(%rsp)
	SAVE_FLAGS
	SAVE_SCRATCH_GPRS
.Lret_bx_saved_\vsize:
	mov %r11, PTR_R11(%rsp)
	STORE_CALLEE_SAVED
	SAVE_VEC \vsize, 0
	SAVE_VEC \vsize, 1
	/* xmm2-15 once a plain function may return here (see the top of this file); the
	 * decision is kept in the frame for the restore (the switch only ever turns on). */
	movzbl dprobe_ret_keep_all_xmm(%rip), %eax
	mov %eax, FR_KEEP_ALL(%rsp)
	test %eax, %eax
	jz 5f
	SAVE_XMMS \vsize, 2, 14, (FR_VEC+2*\vsize)
5:
	lea FR_VEC(%rsp), %rax
	mov %rax, FREGS_VEC(%rsp)
	movq $\vsize, FREGS_VEC_SIZE(%rsp)
	/* x87: TOP (status word bits 11-13) is 0 when the stack is empty; 7 with one value
	 * (long double result), 6 with two (complex long double). Pop them so handlers get
	 * the empty x87 stack the ABI promises, and push them back afterwards. */
	xor %ecx, %ecx
	fnstsw %ax
	shr $11, %eax
	and $7, %eax
	jz 2f
	fstpt FR_X87(%rsp)
	inc %ecx
	cmp $7, %eax
	je 2f
	fstpt FR_X87 + 16(%rsp)
	inc %ecx
2:
	mov %ecx, FR_X87_COUNT(%rsp)
	lea RET_FRAME(\vsize) + 8(%rsp), %rax
	mov %rax, PTR_SP(%rsp)
	mov %rsp, %rdi
	mov %rsp, %rbx
	.cfi_def_cfa_register rbx
.Lret_rbx_frame_\vsize:
	and $-16, %rsp
	CALL_HANDLERS dprobe_ftrace_return
	mov %rbx, %rsp
.Lret_rsp_frame_\vsize:
	.cfi_def_cfa_register rsp
	mov %rax, RET_FRAME(\vsize)(%rsp)
	mov FR_X87_COUNT(%rsp), %ecx
	test %ecx, %ecx
	jz 3f
	cmp $1, %ecx
	je 4f
	fldt FR_X87 + 16(%rsp)
4:
	fldt FR_X87(%rsp)
3:
	RESTORE_VEC \vsize, 0
	RESTORE_VEC \vsize, 1
	cmpl $0, FR_KEEP_ALL(%rsp)
	je 6f
	RESTORE_XMMS \vsize, 2, 14, (FR_VEC+2*\vsize)
6:
	RESTORE_SCRATCH_GPRS
.Lret_bx_restored_\vsize:
	mov PTR_R11(%rsp), %r11
	RESTORE_FLAGS
	mov PTR_AX(%rsp), %rax
	lea RET_FRAME(\vsize) + 8(%rsp), %rsp
.Lret_unframed_\vsize:
	.cfi_def_cfa rsp, 0
	/* jmp, not ret: the probed function's ret already consumed the return stack buffer
	 * entry of its caller's call; another ret would mispredict every return after it.
	 * The address sits in the red zone, which signal delivery does not touch. */
	jmp *-8(%rsp)
.Lret_end_\vsize:
	.cfi_endproc
	.size dprobe_return_to_handler_\vsize, . - dprobe_return_to_handler_\vsize
.endm

/* One record of dprobe_return_tramp_layout (see below): where in the return trampoline of
 * VSIZE its frame lives, instruction by instruction. */
.macro RETURN_LAYOUT vsize
	.quad dprobe_return_trampoline_\vsize	/* the nop an unwinder looks up */
	.quad dprobe_return_to_handler_\vsize	/* what a hooked return-address slot holds */
	.quad .Lret_framed_\vsize		/* from here the frame is at rsp... */
	.quad .Lret_rbx_frame_\vsize		/* ...from here at rbx (rsp is aligned)... */
	.quad .Lret_rsp_frame_\vsize		/* ...from here at rsp again... */
	.quad .Lret_unframed_\vsize		/* ...until here; then the slot is at rsp - 8 */
	.quad .Lret_end_\vsize
	.quad .Lret_bx_saved_\vsize		/* the caller's rbx is in the frame from here... */
	.quad .Lret_bx_restored_\vsize	/* ...to here */
	.quad RET_FRAME(\vsize)		/* the slot's offset in the frame */
	.quad PTR_BX				/* rbx's offset in the frame */
.endm

FTRACE_CALLER 16, 0, dprobe_ftrace_caller_16
FTRACE_CALLER 32, 0, dprobe_ftrace_caller_32
FTRACE_CALLER 64, 0, dprobe_ftrace_caller_64
FTRACE_CALLER 16, 8, dprobe_ftrace_caller_all_16
FTRACE_CALLER 32, 8, dprobe_ftrace_caller_all_32
FTRACE_CALLER 64, 8, dprobe_ftrace_caller_all_64
RETURN_HANDLER 16
RETURN_HANDLER 32
RETURN_HANDLER 64

/*
 * For debuggers (core/debugger_info.cpp, scripts/gdb/dprobe-gdb.py): a hooked function
 * returns into a return trampoline, and its caller is known only from the shadow stack and
 * from where the trampoline keeps its frame at each instruction. Layout of the three
 * trampolines, RETURN_LAYOUT_WORDS (ftrace_frame.h) words each.
 */
	.section .data.rel.ro, "aw", @progbits
	.p2align 3
	.globl dprobe_return_tramp_layout
	.hidden dprobe_return_tramp_layout
	.type dprobe_return_tramp_layout, @object
dprobe_return_tramp_layout:
	RETURN_LAYOUT 16
	RETURN_LAYOUT 32
	RETURN_LAYOUT 64
	.size dprobe_return_tramp_layout, . - dprobe_return_tramp_layout

/* The same for the six fentry trampolines, ENTRY_LAYOUT_WORDS words each: a thread in one
 * is in a probed function's entry, which gdb can show as a frame of its own. The frame is a
 * struct pt_regs (ftrace_frame.h) once the registers are saved. */
	.globl dprobe_entry_tramp_layout
	.hidden dprobe_entry_tramp_layout
	.type dprobe_entry_tramp_layout, @object
dprobe_entry_tramp_layout:
	ENTRY_LAYOUT 16, 0, dprobe_ftrace_caller_16
	ENTRY_LAYOUT 32, 0, dprobe_ftrace_caller_32
	ENTRY_LAYOUT 64, 0, dprobe_ftrace_caller_64
	ENTRY_LAYOUT 16, 8, dprobe_ftrace_caller_all_16
	ENTRY_LAYOUT 32, 8, dprobe_ftrace_caller_all_32
	ENTRY_LAYOUT 64, 8, dprobe_ftrace_caller_all_64
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
