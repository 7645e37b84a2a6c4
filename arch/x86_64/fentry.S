/*
 * __fentry__, the function -pg -mfentry code calls at every entry. dprobe turns those calls
 * into NOPs when it first sees an object; until then (or in an object it could not patch)
 * the call lands here and returns at once.
 */
	.section dprobe_noprobe_text, "ax", @progbits
	.globl __fentry__
	.type __fentry__, @function
	.p2align 4
__fentry__:
	.cfi_startproc
	ret
	.cfi_endproc
	.size __fentry__, . - __fentry__

	.section .note.GNU-stack, "", @progbits
