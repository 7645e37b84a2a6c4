/* An int3 and a return: one SIGTRAP round trip per call when a handler just returns. */
	.text
	.globl kp_bench_raw_int3
	.type kp_bench_raw_int3, @function
kp_bench_raw_int3:
	endbr64
	int3
	lea 1(%rdi), %rax
	ret
	.size kp_bench_raw_int3, . - kp_bench_raw_int3

/* A function with a body: kprobes sit on kp_bench_mid_probe, mid-function (the optimized
 * one takes the jmp over `lea ; imul`; the int3 one, for reference, is in kp_bench_mid_int3). */
	.globl kp_bench_mid_opt
	.type kp_bench_mid_opt, @function
kp_bench_mid_opt:
	endbr64
	mov %rdi, %rax
	.globl kp_bench_mid_probe
kp_bench_mid_probe:
	lea 3(%rax), %rax
	imul $5, %rax, %rax
	sub $14, %rax
	ret
	.size kp_bench_mid_opt, . - kp_bench_mid_opt

	.globl kp_bench_mid_plain
	.type kp_bench_mid_plain, @function
kp_bench_mid_plain:
	endbr64
	mov %rdi, %rax
	lea 3(%rax), %rax
	imul $5, %rax, %rax
	sub $14, %rax
	ret
	.size kp_bench_mid_plain, . - kp_bench_mid_plain

/* The same body, for a kretprobe: no patch site, so its entry is a jump site. */
	.globl kp_bench_ret_jump
	.type kp_bench_ret_jump, @function
kp_bench_ret_jump:
	endbr64
	mov %rdi, %rax
	lea 3(%rax), %rax
	imul $5, %rax, %rax
	sub $14, %rax
	ret
	.size kp_bench_ret_jump, . - kp_bench_ret_jump

	.section .note.GNU-stack, "", @progbits
