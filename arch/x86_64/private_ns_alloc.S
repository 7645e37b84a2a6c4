/*
 * libdprobe-nsalloc.so: the allocator of the preload's private link-map namespace
 * (arch/x86_64/private_ns.h), a shared object of its own that private_ns_bind() loads FIRST
 * into the new namespace, before libdw and Zydis. Kernel counterpart: none (a module
 * allocates from the kernel's allocator, which unloading it does not touch; here the
 * namespace must not keep a heap of its own that outlives it).
 *
 * Why: the first object of a namespace is that namespace's global scope, searched before
 * each object's own dependencies. So the malloc, free, calloc... that libdw, libelf, libz,
 * liblzma, libbz2, Zydis and the namespace's copy of the C library look up (libc's own
 * strdup, realpath, fopen... included: it calls them through its GOT, as it does for a
 * program that replaces malloc) all bind here, and the namespace's C library never makes a
 * heap: no arena of its own (64 MB reserved per thread that allocated), nothing left mapped
 * when the namespace is unloaded, no lock of its own that fork() could copy held.
 *
 * What it does: each function of private_ns_alloc_fns.h jumps through its slot in
 * dprobe_nsalloc_slots, which private_ns_bind() fills (dlsym) right after loading this
 * object, before anything else is in the namespace: with functions of the preload that
 * allocate from the allocator the runtime registered (the agent's, tools/agent/private_alloc.h)
 * and hand a pointer the allocator does not own to the namespace's C library. So every
 * allocation is the preload's, from the libraries' constructors on, and freeing them needs
 * no help from here.
 *
 * Invariants: no DT_NEEDED, no constructor, no TLS, no data but the slots: it binds to
 * nothing and nothing can pin it (dlclose of the namespace unloads it last, after the
 * libraries' destructors have freed through it). A slot is one aligned 8-byte word. Until
 * filled, a slot points to dprobe_nsalloc_unset, which says so on stderr and traps (a call
 * then would be a bug of private_ns.cpp's order; there is no allocator to fall back to).
 */

#define PRIVATE_NS_ALLOC(name) .quad dprobe_nsalloc_unset;

	.data
	.p2align 3
	.globl dprobe_nsalloc_slots
	.type dprobe_nsalloc_slots, @object
dprobe_nsalloc_slots:
.Lslots:
#include "arch/x86_64/private_ns_alloc_fns.h"
	.size dprobe_nsalloc_slots, . - dprobe_nsalloc_slots
#undef PRIVATE_NS_ALLOC

	.text

.macro NSALLOC_ENTRY name, index
	.globl \name
	.type \name, @function
	.p2align 4
\name:
	.cfi_startproc
	endbr64
	jmp *.Lslots + 8 * \index (%rip)
	.cfi_endproc
	.size \name, . - \name
.endm

/* __COUNTER__ (not used above) numbers them from 0, in the list's order. */
#define PRIVATE_NS_ALLOC(name) NSALLOC_ENTRY name, __COUNTER__;
#include "arch/x86_64/private_ns_alloc_fns.h"
#undef PRIVATE_NS_ALLOC

	.section .rodata
.Lunset_msg:
	.ascii "dprobe: an allocation in dprobe's namespace before its allocator was set\n"
.Lunset_len = . - .Lunset_msg

	.text
	.p2align 4
	.type dprobe_nsalloc_unset, @function
dprobe_nsalloc_unset:
	.cfi_startproc
	endbr64
	mov $1, %eax /* write(2, msg, len) */
	mov $2, %edi
	lea .Lunset_msg(%rip), %rsi
	mov $.Lunset_len, %edx
	syscall
	ud2
	.cfi_endproc
	.size dprobe_nsalloc_unset, . - dprobe_nsalloc_unset

	.section .note.GNU-stack, "", @progbits
