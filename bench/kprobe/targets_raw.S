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
	.section .note.GNU-stack, "", @progbits
