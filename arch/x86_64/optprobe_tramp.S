/*
 * The optimized-kprobe trampoline (the kernel's optprobe_template_func), for a probe in the
 * middle of a function, where every register may be live.
 *
 * The detour of a probe is:
 *     lea -128(%rsp), %rsp        step over the red zone the probed code may be using
 *     mov %r11, -16(%rsp)         park r11 below the return address the call pushes
 *     movabs $optprobe, %r11
 *     call *dprobe_optprobe_caller(%rip)
 *     lea 128(%rsp), %rsp
 *     <the relocated instructions the jmp replaced>
 *     jmp <after them>
 * dprobe_optprobe_caller saves the full state: a struct pt_regs (with the complete rflags),
 * then the whole x87/SSE/AVX/AVX-512 state with xsavec (or xsave), since a handler may
 * clobber any of it. DF may be set mid-function; C code needs it clear (cld), popfq puts it
 * back.
 *
 * dprobe_optprobe_caller_light is for handlers that provably leave the extended state alone
 * (arch/x86_64/ext_state.h) in functions that never set DF (no std, no popf): it keeps the
 * general registers and the arithmetic flags only (lahf/seto, no pushf/popf), and calls
 * dprobe_optprobe_dispatch_light, which may answer "not now" (1) before anything ran, for
 * instance on a thread's first hit, which allocates: then the extended state is saved after
 * all and the full dispatch runs.
 */
#include "arch/x86_64/ftrace_frame.h"
#include "arch/x86_64/tramp_macros.inc"

#define OPT_FRAME 176 /* pt_regs (168) + the r11 parking slot at the top */

/* The full and vector callers' struct pt_regs: every general register, the complete
 * rflags (DF may be set mid-function), the probed code's stack pointer. */
.macro OPT_SAVE_PT_REGS
	lea -OPT_FRAME(%rsp), %rsp
	.cfi_adjust_cfa_offset OPT_FRAME
	pushfq
	popq PTR_FLAGS(%rsp)
	mov %rax, PTR_AX(%rsp)
	mov OPT_FRAME - 8(%rsp), %rax
	mov %rax, PTR_R11(%rsp)
	SAVE_SCRATCH_GPRS
	STORE_CALLEE_SAVED
	movq $-1, PTR_ORIG_AX(%rsp)
	movq $0, PTR_IP(%rsp)
	movq $0x33, PTR_CS(%rsp)
	movq $0x2b, PTR_SS(%rsp)
	/* The probed code's stack pointer: above the return address and the red zone. */
	lea OPT_FRAME + 8 + 128(%rsp), %rax
	mov %rax, PTR_SP(%rsp)
.endm

/* Writes every register of the pt_regs back (a handler may change any) and drops the frame. */
.macro OPT_RESTORE_PT_REGS
	RESTORE_SCRATCH_GPRS
	mov PTR_R11(%rsp), %r11
	mov PTR_R12(%rsp), %r12
	mov PTR_R13(%rsp), %r13
	mov PTR_R14(%rsp), %r14
	mov PTR_R15(%rsp), %r15
	mov PTR_AX(%rsp), %rax
	pushq PTR_FLAGS(%rsp)
	popfq
	lea OPT_FRAME(%rsp), %rsp
	.cfi_adjust_cfa_offset -OPT_FRAME
.endm

	.section dprobe_noprobe_text, "ax", @progbits
	.globl dprobe_optprobe_caller
	.hidden dprobe_optprobe_caller
	.type dprobe_optprobe_caller, @function
	.p2align 5
dprobe_optprobe_caller:
	.cfi_startproc
	OPT_SAVE_PT_REGS
	mov %rsp, %rbx
	.cfi_def_cfa_register rbx
	/* XSAVE area: dprobe_xsave_size bytes, 64-byte aligned, below the frame. */
	XSAVE_AREA_ALLOC
	mov $-1, %eax
	mov $-1, %edx
	cmpb $0, dprobe_have_xsavec(%rip)
	je 1f
	xsavec (%rsp)
	jmp 2f
1:	xsave (%rsp)
2:
	/* Handlers and C++ run with the upper vector state clean (a legacy-SSE instruction
	 * costs ~200 ns on Intel parts while it is in use); xrstor puts back what was live. */
	cmpb $0, dprobe_have_avx(%rip)
	je 3f
	vzeroupper
3:
	cld
	mov %r11, %rdi
	mov %rbx, %rsi
	call dprobe_optprobe_dispatch
	mov $-1, %eax
	mov $-1, %edx
	xrstor (%rsp)
	mov %rbx, %rsp
	.cfi_def_cfa_register rsp
	OPT_RESTORE_PT_REGS
	ret
	.cfi_endproc
	.size dprobe_optprobe_caller, . - dprobe_optprobe_caller

/*
 * dprobe_optprobe_caller_vec_{16,32,64}: the full caller for handlers that provably touch no
 * extended state but the vector registers 0-15 and the MXCSR (arch::ext_scope::vector): it
 * saves those (at full width only when their upper halves are live, as the function-entry
 * trampolines do) instead of xsavec/xrstor of the whole state, about 25 ns instead of 160
 * on AVX-512 parts. VSIZE: the CPU's vector width in bytes. Like the light caller it calls
 * the checked handler (dprobe_optprobe_dispatch_vec), which answers 1 before anything ran
 * when a probe that joined since needs more; the whole state is then saved after all.
 */
#define OPT_VEC_WIDE 1024
#define OPT_VEC_MXCSR 1032
#define OPT_VEC_AREA 1088
.macro OPTPROBE_CALLER_VEC vsize
	.globl dprobe_optprobe_caller_vec_\vsize
	.hidden dprobe_optprobe_caller_vec_\vsize
	.type dprobe_optprobe_caller_vec_\vsize, @function
	.p2align 5
dprobe_optprobe_caller_vec_\vsize:
	.cfi_startproc
	OPT_SAVE_PT_REGS
	/* The parking slot keeps the optprobe for the fallback below. */
	mov %r11, OPT_FRAME - 8(%rsp)
	mov %rsp, %rbx
	.cfi_def_cfa_register rbx
	/* The vector registers (and the MXCSR) below the frame, 64-byte aligned: the handlers
	 * provably use no other extended state (no x87, MMX, mask or upper-16 vector register). */
	sub $OPT_VEC_AREA, %rsp
	and $-64, %rsp
	stmxcsr OPT_VEC_MXCSR(%rsp)
	VSAVE \vsize, 16, 15, 14, OPT_VEC_WIDE(%rsp)
	cld
	mov %r11, %rdi
	mov %rbx, %rsi
	call dprobe_optprobe_dispatch_vec
	test %eax, %eax
	jz 1f
	/* Not now (a probe that joined has a handler this caller cannot serve): the whole
	 * extended state saved around the full dispatch after all. */
	mov OPT_FRAME - 8(%rbx), %rdi
	mov %rbx, %rsi
	lea dprobe_optprobe_dispatch(%rip), %r11
	call dprobe_call_ext_saved
1:	ldmxcsr OPT_VEC_MXCSR(%rsp)
	VRESTORE \vsize, 16, OPT_VEC_WIDE(%rsp)
	mov %rbx, %rsp
	.cfi_def_cfa_register rsp
	OPT_RESTORE_PT_REGS
	ret
	.cfi_endproc
	.size dprobe_optprobe_caller_vec_\vsize, . - dprobe_optprobe_caller_vec_\vsize
.endm

	OPTPROBE_CALLER_VEC 16
	OPTPROBE_CALLER_VEC 32
	OPTPROBE_CALLER_VEC 64


	.globl dprobe_optprobe_caller_light
	.hidden dprobe_optprobe_caller_light
	.type dprobe_optprobe_caller_light, @function
	.p2align 5
dprobe_optprobe_caller_light:
	.cfi_startproc
	lea -OPT_FRAME(%rsp), %rsp
	.cfi_adjust_cfa_offset OPT_FRAME
	mov %rax, PTR_AX(%rsp)
	mov OPT_FRAME - 8(%rsp), %rax
	mov %rax, PTR_R11(%rsp)
	SAVE_SCRATCH_GPRS
	STORE_CALLEE_SAVED
	/* rflags as pushf would show them: the arithmetic flags (lahf: SF ZF AF PF CF at
	 * their rflags positions; seto: OF, bit 11), IF and the reserved bit 1; DF is clear
	 * (the function never sets it). Nothing above changed the flags. */
	lahf
	seto %al
	movzbl %ah, %ecx
	movzbl %al, %eax
	shl $11, %eax
	or %ecx, %eax
	or $0x202, %eax
	mov %rax, PTR_FLAGS(%rsp)
	movq $-1, PTR_ORIG_AX(%rsp)
	movq $0, PTR_IP(%rsp)
	movq $0x33, PTR_CS(%rsp)
	movq $0x2b, PTR_SS(%rsp)
	lea OPT_FRAME + 8 + 128(%rsp), %rax
	mov %rax, PTR_SP(%rsp)
	/* The parking slot keeps the optprobe for the fallback below. */
	mov %r11, OPT_FRAME - 8(%rsp)
	mov %rsp, %rbx
	.cfi_def_cfa_register rbx
	and $-16, %rsp
	mov %r11, %rdi
	mov %rbx, %rsi
	call dprobe_optprobe_dispatch_light
	test %eax, %eax
	jnz 2f
1:	mov %rbx, %rsp
	.cfi_def_cfa_register rsp
	/* The flags a handler may have changed in pt_regs: OF into al, the rest into ah. */
	mov PTR_FLAGS(%rsp), %rax
	mov %eax, %ecx
	shr $11, %ecx
	and $1, %ecx
	mov %al, %ah
	mov %cl, %al
	add $0x7f, %al
	sahf
	RESTORE_SCRATCH_GPRS
	mov PTR_R11(%rsp), %r11
	mov PTR_R12(%rsp), %r12
	mov PTR_R13(%rsp), %r13
	mov PTR_R14(%rsp), %r14
	mov PTR_R15(%rsp), %r15
	mov PTR_AX(%rsp), %rax
	lea OPT_FRAME(%rsp), %rsp
	.cfi_adjust_cfa_offset -OPT_FRAME
	ret
	.cfi_adjust_cfa_offset OPT_FRAME
	.cfi_def_cfa_register rbx
2:	/* Not now: save the extended state and run the full dispatch. */
	mov OPT_FRAME - 8(%rbx), %rdi
	mov %rbx, %rsi
	lea dprobe_optprobe_dispatch(%rip), %r11
	call dprobe_call_ext_saved
	jmp 1b
	.cfi_endproc
	.size dprobe_optprobe_caller_light, . - dprobe_optprobe_caller_light

/*
 * dprobe_call_ext_saved: calls *%r11 (arguments in rdi, rsi) with the whole extended state
 * saved around it, and returns its rax. Called with a 16-byte aligned stack.
 */
	.globl dprobe_call_ext_saved
	.hidden dprobe_call_ext_saved
	.type dprobe_call_ext_saved, @function
	.p2align 4
dprobe_call_ext_saved:
	.cfi_startproc
	push %rbp
	.cfi_adjust_cfa_offset 8
	.cfi_rel_offset rbp, 0
	mov %rsp, %rbp
	.cfi_def_cfa_register rbp
	push %rbx
	.cfi_rel_offset rbx, -8
	XSAVE_AREA_ALLOC
	mov %rdx, %rbx
	mov $-1, %eax
	mov $-1, %edx
	cmpb $0, dprobe_have_xsavec(%rip)
	je 1f
	xsavec (%rsp)
	jmp 2f
1:	xsave (%rsp)
2:	mov %rbx, %rdx
	cmpb $0, dprobe_have_avx(%rip)
	je 3f
	vzeroupper
3:
	cld
	call *%r11
	mov %rax, %rbx
	mov $-1, %eax
	mov $-1, %edx
	xrstor (%rsp)
	mov %rbx, %rax
	mov -8(%rbp), %rbx
	leave
	.cfi_def_cfa rsp, 8
	ret
	.cfi_endproc
	.size dprobe_call_ext_saved, . - dprobe_call_ext_saved

/*
 * long dprobe_ext_guarded(long a0, long a1, long a2, long (*fn)(long, long, long)): FN(a0,
 * a1, a2), inside dprobe_call_ext_saved when this thread runs a light handler
 * (dprobe_ext_unsaved: nobody saved the extended state of the code it interrupted),
 * directly otherwise. For the rare paths of code that must scan clean (the ring buffer's
 * first event on a thread, a clock read through the C library): the scan takes a call of
 * this function as clean (arch::ext_state_scan_code) and does not follow FN.
 */
	.globl dprobe_ext_guarded
	.hidden dprobe_ext_guarded
	.type dprobe_ext_guarded, @function
	.p2align 4
dprobe_ext_guarded:
	.cfi_startproc
	mov dprobe_ext_unsaved@gottpoff(%rip), %rax
	cmpl $0, %fs:(%rax)
	jne 1f
	jmp *%rcx
1:	push %rbp
	.cfi_adjust_cfa_offset 8
	.cfi_rel_offset rbp, 0
	mov %rcx, %r11
	call dprobe_call_ext_saved
	pop %rbp
	.cfi_adjust_cfa_offset -8
	.cfi_restore rbp
	ret
	.cfi_endproc
	.size dprobe_ext_guarded, . - dprobe_ext_guarded

	.section .note.GNU-stack, "", @progbits
