/*
 * Nofault user-memory reads (see uaccess.h). Every instruction that may fault on the source
 * gets an entry in dprobe_uaccess_extable: {insn - ., fixup - .}, 32-bit self-relative like
 * the kernel's exception table, so the table needs no relocations in a shared object.
 */
#define EFAULT 14

.macro EXTABLE insn, fixup
    .pushsection .rodata.dprobe_uaccess_extable, "a"
    .balign 4
    .long \insn - .
    .long \fixup - .
    .popsection
.endm

    .pushsection .rodata.dprobe_uaccess_extable, "a"
    .balign 4
    .globl dprobe_uaccess_extable_start
    .hidden dprobe_uaccess_extable_start
dprobe_uaccess_extable_start:
    .popsection

    /* Runs inside probe handlers: kept with the code dprobe never probes. */
    .section dprobe_noprobe_text, "ax", @progbits

/* long copy_from_user_nofault(void *dst %rdi, const void *src %rsi, size_t size %rdx) */
    .globl copy_from_user_nofault
    .hidden copy_from_user_nofault
    .type copy_from_user_nofault, @function
    .balign 16
copy_from_user_nofault:
    .cfi_startproc
    endbr64
    cmp $8, %rdx
    jne 1f
.Lcfu_q:
    movq (%rsi), %rax
    movq %rax, (%rdi)
    xorl %eax, %eax
    ret
1:  cmp $4, %rdx
    jne 2f
.Lcfu_l:
    movl (%rsi), %eax
    movl %eax, (%rdi)
    xorl %eax, %eax
    ret
2:  cmp $2, %rdx
    jne 3f
.Lcfu_w:
    movzwl (%rsi), %eax
    movw %ax, (%rdi)
    xorl %eax, %eax
    ret
3:  cmp $1, %rdx
    jne 4f
.Lcfu_b:
    movzbl (%rsi), %eax
    movb %al, (%rdi)
    xorl %eax, %eax
    ret
4:  movq %rdx, %rcx
.Lcfu_rep:
    rep movsb
    xorl %eax, %eax
    ret
.Lcfu_fault:
    movq $-EFAULT, %rax
    ret
    .cfi_endproc
    .size copy_from_user_nofault, . - copy_from_user_nofault

    EXTABLE .Lcfu_q, .Lcfu_fault
    EXTABLE .Lcfu_l, .Lcfu_fault
    EXTABLE .Lcfu_w, .Lcfu_fault
    EXTABLE .Lcfu_b, .Lcfu_fault
    EXTABLE .Lcfu_rep, .Lcfu_fault

/* long strncpy_from_user_nofault(char *dst %rdi, const void *src %rsi, long count %rdx) */
    .globl strncpy_from_user_nofault
    .hidden strncpy_from_user_nofault
    .type strncpy_from_user_nofault, @function
    .balign 16
strncpy_from_user_nofault:
    .cfi_startproc
    endbr64
    xorl %eax, %eax
    test %rdx, %rdx
    jle .Lsncpy_ret
    dec %rdx                    /* room for characters, the NUL excluded */
    jz .Lsncpy_term
.Lsncpy_loop:
.Lsncpy_ld:
    movzbl (%rsi,%rax), %ecx
    movb %cl, (%rdi,%rax)
    test %cl, %cl
    jz .Lsncpy_ret
    inc %rax
    cmp %rdx, %rax
    jb .Lsncpy_loop
.Lsncpy_term:
    movb $0, (%rdi,%rax)
.Lsncpy_ret:
    ret
.Lsncpy_fault:
    movb $0, (%rdi,%rax)
    movq $-EFAULT, %rax
    ret
    .cfi_endproc
    .size strncpy_from_user_nofault, . - strncpy_from_user_nofault

    EXTABLE .Lsncpy_ld, .Lsncpy_fault

/* long strnlen_user_nofault(const void *src %rdi, long count %rsi) */
    .globl strnlen_user_nofault
    .hidden strnlen_user_nofault
    .type strnlen_user_nofault, @function
    .balign 16
strnlen_user_nofault:
    .cfi_startproc
    endbr64
    xorl %eax, %eax
    test %rsi, %rsi
    jle .Lslen_ret
.Lslen_loop:
.Lslen_ld:
    cmpb $0, (%rdi,%rax)
    je .Lslen_ret
    inc %rax
    cmp %rsi, %rax
    jb .Lslen_loop
.Lslen_ret:
    ret
.Lslen_fault:
    movq $-EFAULT, %rax
    ret
    .cfi_endproc
    .size strnlen_user_nofault, . - strnlen_user_nofault

    EXTABLE .Lslen_ld, .Lslen_fault

    .pushsection .rodata.dprobe_uaccess_extable, "a"
    .globl dprobe_uaccess_extable_end
    .hidden dprobe_uaccess_extable_end
dprobe_uaccess_extable_end:
    .popsection

    .section .note.GNU-stack, "", @progbits
