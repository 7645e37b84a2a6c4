// dprobe's own shared libraries, in a link-map namespace of their own: what
// libdprobe-preload.so does instead of needing libdw, libelf and Zydis (and, through them,
// libz, liblzma and libbz2). Kernel counterpart: none (the kernel links its decoder and its
// ELF reader in; a process's global symbol scope has no equivalent).
//
// Why: a library the preload needs (DT_NEEDED) joins the program's global scope. The
// program's own definitions then bind its calls (a program built -rdynamic with a bundled
// zlib gets libelf's inflate calls; one that defines elf_begin gets dprobe's), and its
// libraries bind to dprobe's (dlsym(RTLD_DEFAULT, "dwarf_begin") finds one). Debian ships
// libdw.a and libelf.a built as position-dependent code with local-exec TLS, which no shared
// object can contain, and no static Zydis; so these come in as shared objects, with
// dlmopen(LM_ID_NEWLM): a namespace whose objects bind only to each other and to their own
// copy of the C library (its locks are not the program's), which the program's symbol
// lookups and dl_iterate_phdr() (hence dprobe's own symbol tables) do not see, and which no
// dlopen of the program can share.
//
// Their memory: the namespace's first object is libdprobe-nsalloc.so (private_ns_alloc.S),
// installed next to the preload, where every malloc, free, calloc, realloc, posix_memalign...
// of the namespace binds, its C library's own included; it hands them to the allocator the
// runtime registered (private_ns_set_allocator: the agent's, on pages it maps itself). So the
// namespace's C library makes no heap of its own: unloading the namespace leaves no arena
// behind (each thread that allocated in it used to leave 64 MB reserved, 132 KB of it
// touched), and fork() is covered by that allocator's own fork handlers (a child does not
// inherit a heap lock held by another thread). A pointer the allocator does not own (which
// only the namespace's C library could have made, without going through its GOT) goes back
// to that C library's free or realloc.
//
// How the runtime calls them: libdprobe-preload.so links private_ns_stubs.S, where each
// function of private_ns_syms.h is a hidden symbol of that name, an indirect jump through
// its slot; the runtime's code calls dwarf_begin() as anywhere else. libdprobe.so, the CLI
// and the tests link the libraries normally and do not have these files.
//
// Invariants: a slot holds either the function in the namespace or the lazy entry, which
// binds first (so a call before private_ns_bind() works, from anywhere but a signal handler
// or the loader's own notifications) and aborts with a message when the libraries cannot
// be loaded; private_ns_bind() and private_ns_unbind() serialize on one lock; a slot is one
// aligned 8-byte word, so a call racing private_ns_bind() jumps to one or the other. The
// allocator object is loaded first (its slots filled before any other object of the
// namespace, constructors included, can allocate) and unloaded last.
#pragma once

#include <cstddef>
#include <string>

namespace dprobe::arch
{

// The allocator of everything in the namespace. Every function must be there, and work from
// any thread, from the libraries' constructors on (no lazy setup that allocates through the
// namespace). OWNS must be exact: it is asked about any pointer freed in the namespace.
struct private_ns_allocator {
    void *(*alloc)(size_t size) noexcept;                       // 16-aligned; NULL if out of memory
    void *(*alloc_aligned)(size_t align, size_t size) noexcept; // ALIGN a power of two
    void *(*realloc)(void *p, size_t size) noexcept;            // P its own; size 0 frees
    void (*free)(void *p) noexcept;                             // P its own
    size_t (*usable)(const void *p) noexcept;                   // P its own
    bool (*owns)(const void *p) noexcept;
};

// Registers A (kept by address) for the next bind; not to be changed while bound. Without
// one, binding fails: the namespace would otherwise allocate from nothing.
void private_ns_set_allocator(const private_ns_allocator *a);

// The allocator object (libdprobe-nsalloc.so) is looked for in the directory of the object
// this code is linked into (the preload's); PATH (kept by address), when set, replaces that
// (tests).
void private_ns_set_allocator_object(const char *path);

// Loads the allocator object, then the libraries, into a new namespace and points every stub
// at its function. True when they are bound (now or already); false with the reason in WHY
// (no allocator registered, an object missing, or without one of the functions), nothing
// loaded. Not async-signal-safe: takes the loader's
// lock. The agent calls it before any other work, to report a failure cleanly.
bool private_ns_bind(std::string *why = nullptr);

// Points every stub back at the lazy entry and unloads the namespace (its C library
// included; what its libraries allocated and did not free stays with the registered
// allocator, the agent's, which an unload frees wholesale). For the teardown of an agent about to
// be unloaded: nothing dprobe holds from these libraries (an Elf, a Dwarf, a Dwarf_CFI, memory they
// returned) may be used after, and no thread may be inside one of them. A later call binds a new
// namespace.
void private_ns_unbind();

// Whether the libraries are loaded now.
bool private_ns_bound();

} // namespace dprobe::arch
