// dprobe's own file descriptors in the traced process: the ring buffer's memfd, the trace
// file, the CLI's status socket and eventfd, /dev/fuse. Kernel counterpart: none (the kernel
// keeps its files out of the process's descriptor table).
//
// Why: a program may close every descriptor it did not open itself (closefrom(3),
// close_range, a loop over /proc/self/fd: daemons and shells do) and then open files, which
// get the same numbers. dprobe writing through a number it still took for its own then
// writes into the program's files (found with a program that called closefrom(3): ring buffer
// pages fallocated into one of its files, session records appended to another, and libfuse
// printing "reading device: Bad file descriptor" on its stderr). So dprobe's descriptors are
// noted here, and the close family is interposed (core/fd_interpose.cpp): a program's close of
// one of them succeeds without closing it, and its numbers are never handed out again.
//
// Invariants: lock-free and async-signal-safe; a descriptor is noted by the part of dprobe
// that opened it, and forgotten by it before it closes it; numbers from k_own_fds_max up are
// not tracked.
#pragma once

namespace dprobe
{

inline constexpr int k_own_fds_max = 1 << 16;

void own_fd_add(int fd) noexcept;
void own_fd_remove(int fd) noexcept;
bool own_fd(int fd) noexcept;
// The lowest own descriptor at FROM or above, -1 if none.
int own_fd_next(int from) noexcept;

} // namespace dprobe
