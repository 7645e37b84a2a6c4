// The agent's own memory: an allocator on pages it maps itself, so that dprobe never runs
// the program's allocator (a program may define malloc and free: a bump allocator, a
// debugging heap), never changes the program's heap, and never takes the program's heap
// locks. libdprobe-preload.so binds malloc, free, calloc, realloc and the aligned variants
// of its own objects to it (libc_binding.cpp), and those of the libraries it alone brought
// into the process: the ones linked in, and those of its private namespace (libdw, libelf,
// libz, liblzma, libbz2, Zydis and that namespace's C library: arch/x86_64/private_ns.h).
//
// Size classes from 16 bytes to 16 KB on 1 MB arenas, larger blocks on their own mapping;
// one lock (a futex, not the program's pthread_mutex_lock). Memory comes from raw mmap.
#pragma once

#include <cstddef>

namespace dprobe::agent
{

void *palloc(size_t size) noexcept;
void *palloc_aligned(size_t align, size_t size) noexcept;
void pfree(void *p) noexcept;
void *prealloc(void *p, size_t size) noexcept;
size_t pusable(const void *p) noexcept;
// Whether P lies in memory of this allocator: exact (its mappings are kept in a table), not
// a guess from the bytes before P, so any pointer may be asked about.
bool pown(const void *p) noexcept;

// Unmaps every page the allocator mapped, blocks in use included: the very last step of
// unloading the agent (its object's DT_FINI), when nothing will touch them again.
void palloc_release_all() noexcept;

// fork(): the lock held across it (the agent's atfork handlers).
void palloc_fork_prepare() noexcept;
void palloc_fork_parent() noexcept;
void palloc_fork_child() noexcept;

} // namespace dprobe::agent
