/*
 * The floor: the least work any hook does that runs an entry and an exit handler around a
 * function with calls and returns paired, as dprobe's balanced fprobe does, measured on the
 * same workload so that targets can be set against what the hardware allows.
 *
 * It is a measuring instrument, not a tracer: it keeps what the traced code can observe
 * (every general register a handler may clobber, the arithmetic flags; no vector register,
 * as in dprobe's light hits whose handlers leave them alone), moves the caller's return
 * address to a per-thread shadow stack and calls the function's body from the slot, and
 * calls one handler on each side. Everything else a real fprobe needs is left out: the
 * site's record and its list of users, the recursion guard, the quiescence marker that
 * unregistering waits on, checks that the shadow frame is still this return's (longjmp,
 * signals, exceptions), entry data, a bounded shadow stack, unwind information.
 *
 * leaf_floor_site is what a patched site of leaf_floor would be: a jump to the hook. The
 * caller (workload.c, flavour floor) calls it; the hook calls leaf_floor, the same body as
 * leaf_plain. Handlers: void handler(unsigned long ip, void *regs), set by bench/peers
 * (peers_floor.cpp) in floor_entry_handler and floor_exit_handler. floor_shadow_top: this
 * thread's shadow stack pointer (grows up), set before the first hooked call.
 */
/* The general registers a handler may clobber, and the flags (lahf/seto, as dprobe's
 * trampolines keep them), in the 80 bytes at %rsp; the same layout on both sides. */
.macro SAVE_REGS
	mov %rax, 0(%rsp)
	lahf
	seto %al
	mov %ax, 72(%rsp)
	mov %rdi, 8(%rsp)
	mov %rsi, 16(%rsp)
	mov %rdx, 24(%rsp)
	mov %rcx, 32(%rsp)
	mov %r8, 40(%rsp)
	mov %r9, 48(%rsp)
	mov %r10, 56(%rsp)
	mov %r11, 64(%rsp)
.endm

.macro RESTORE_REGS
	mov 72(%rsp), %ax
	add $0x7f, %al			/* OF back from al */
	sahf
	mov 0(%rsp), %rax
	mov 8(%rsp), %rdi
	mov 16(%rsp), %rsi
	mov 24(%rsp), %rdx
	mov 32(%rsp), %rcx
	mov 40(%rsp), %r8
	mov 48(%rsp), %r9
	mov 56(%rsp), %r10
	mov 64(%rsp), %r11
.endm

	.text
	.globl leaf_floor_site
	.type leaf_floor_site, @function
	.p2align 5
leaf_floor_site:
	jmp floor_hook
	.size leaf_floor_site, . - leaf_floor_site

/* Entry: [rsp] = the caller's return address, rsp = 8 mod 16. */
	.p2align 5
floor_hook:
	sub $88, %rsp			/* 16-byte aligned for the handler call */
	SAVE_REGS
	lea leaf_floor_site(%rip), %rdi
	mov %rsp, %rsi
	call *floor_entry_handler(%rip)
	/* The caller's return address to the shadow stack. */
	mov floor_shadow_top@gottpoff(%rip), %r11
	mov %fs:(%r11), %r10
	mov 88(%rsp), %rax
	mov %rax, (%r10)
	add $8, %r10
	mov %r10, %fs:(%r11)
	RESTORE_REGS
	add $96, %rsp			/* the frame and the caller's return-address slot */
	call leaf_floor			/* its return address takes the slot */
	/* Exit: rsp = the slot + 8 = 0 mod 16. */
	sub $96, %rsp
	SAVE_REGS
	lea leaf_floor_site(%rip), %rdi
	mov %rsp, %rsi
	call *floor_exit_handler(%rip)
	mov floor_shadow_top@gottpoff(%rip), %r11
	mov %fs:(%r11), %r10
	sub $8, %r10
	mov %r10, %fs:(%r11)
	mov (%r10), %rax
	mov %rax, 88(%rsp)		/* the caller's return address back in its slot */
	RESTORE_REGS
	add $88, %rsp
	ret				/* paired with the caller's call */
	.size floor_hook, . - floor_hook

	.section .note.GNU-stack, "", @progbits
