/*
 * pid_t dprobe_vfork_quiet(void): vfork() whose child ends without a signal to its parent:
 * clone(CLONE_VM | CLONE_VFORK) with exit signal 0. stop_machine's helper (core/stop_machine.cpp)
 * is such a child: the program's SIGCHLD handler never runs for it, and the program's wait()
 * never reaps it (only __WCLONE / __WALL waits see a child with no exit signal).
 *
 * As glibc's vfork: the child runs on the parent's stack while the parent is suspended, so
 * the return address is kept in a register (r9, which the system call leaves alone) rather
 * than in the stack slot the child will reuse. Returns the child's pid, 0 in the child, or a
 * negative errno.
 */
	.text
	.globl dprobe_vfork_quiet
	.hidden dprobe_vfork_quiet
	.type dprobe_vfork_quiet, @function
	.p2align 4
dprobe_vfork_quiet:
	.cfi_startproc
	endbr64
	pop %r9
	.cfi_adjust_cfa_offset -8
	.cfi_register rip, r9
	mov $0x4100, %edi	/* CLONE_VM | CLONE_VFORK; exit signal 0 */
	xor %esi, %esi		/* the same stack */
	xor %edx, %edx
	xor %r10d, %r10d
	xor %r8d, %r8d
	mov $56, %eax		/* SYS_clone */
	syscall
	push %r9
	.cfi_adjust_cfa_offset 8
	.cfi_rel_offset rip, 0
	ret
	.cfi_endproc
	.size dprobe_vfork_quiet, . - dprobe_vfork_quiet

	.section .note.GNU-stack, "", @progbits
