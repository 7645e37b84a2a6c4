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
// copy of the C library (its heap and locks are not the program's), which the program's
// symbol lookups and dl_iterate_phdr() (hence dprobe's own symbol tables) do not see, and
// which no dlopen of the program can share.
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
// aligned 8-byte word, so a call racing private_ns_bind() jumps to one or the other.
#pragma once

#include <string>

namespace dprobe::arch
{

// Loads the libraries into a new namespace and points every stub at its function. True when
// they are bound (now or already); false with the reason in WHY (a library missing, or
// without one of the functions), nothing loaded. Not async-signal-safe: takes the loader's
// lock. The agent calls it before any other work, to report a failure cleanly.
bool private_ns_bind(std::string *why = nullptr);

// Points every stub back at the lazy entry and unloads the namespace (its C library and
// heap included). For the teardown of an agent about to be unloaded: nothing dprobe holds
// from these libraries (an Elf, a Dwarf, a Dwarf_CFI, memory they returned) may be used
// after, and no thread may be inside one of them. A later call binds a new namespace.
void private_ns_unbind();

// Whether the libraries are loaded now.
bool private_ns_bound();

} // namespace dprobe::arch
