/* SPDX-License-Identifier: MIT */
/*
 * The tracefs file tree of this process, served for `echo` and `cat` (a FUSE mount) and for
 * `dprobe ctl` (a Unix socket), as in the kernel's /sys/kernel/tracing:
 *
 *   dprobe_tracefs_start(NULL);
 *   printf("tracefs at %s\n", dprobe_tracefs_mountpoint());
 *
 *   $ echo 'f:myevent do_work a=$arg1:u32' >> $T/dynamic_events
 *   $ echo 1 > $T/events/fprobes/myevent/enable
 *   $ cat $T/trace_pipe
 *
 * Locations (the directory is per user, mode 0700):
 *   mount point  MOUNTPOINT, else $DPROBE_TRACEFS, else $XDG_RUNTIME_DIR/dprobe/<pid>
 *                (/tmp/dprobe-<uid>/<pid> when XDG_RUNTIME_DIR is unset)
 *   socket       $DPROBE_TRACEFS_SOCKET, else $XDG_RUNTIME_DIR/dprobe/dprobe-<pid>.sock
 *                (/tmp/dprobe-<uid>/dprobe-<pid>.sock)
 * DPROBE_NO_FUSE=1 skips the FUSE mount (the socket is still served).
 * DPROBE_TRACEFS_AUTO_UNMOUNT=1 mounts with libfuse's auto_unmount (cleaned up even after
 * SIGKILL, at the price of a fusermount3 child process for the program's lifetime).
 * Both are served by threads of this process and go away at exit (atexit), or with
 * dprobe_tracefs_stop().
 */
#ifndef DPROBE_TRACEFS_H
#define DPROBE_TRACEFS_H

#include <dprobe/compiler.h>

DPROBE_EXTERN_C_BEGIN

/*
 * Starts both bindings. Returns 0 when the FUSE mount (unless DPROBE_NO_FUSE=1) and the
 * socket are up, else the first failure as a negative errno; a binding that did start stays
 * up (see the accessors below). Calling it again while started returns 0.
 */
DPROBE_API int dprobe_tracefs_start(const char *mountpoint);
/* Unmounts, stops the socket and wakes blocked readers. */
DPROBE_API void dprobe_tracefs_stop(void);
/* The FUSE mount point, or NULL when not mounted. Valid until dprobe_tracefs_stop(). */
DPROBE_API const char *dprobe_tracefs_mountpoint(void);
/* The socket path, or NULL when not serving. Valid until dprobe_tracefs_stop(). */
DPROBE_API const char *dprobe_tracefs_socket(void);

/*
 * Writes TEXT into the top-level trace buffer as a `print` record, as writing it to
 * trace_marker does, on behalf of the calling thread; it prints as "CALLER: TEXT" where
 * CALLER is the function that called this (a newline is added when missing; at most 4096
 * bytes). Works whether or not the bindings are started. Returns 0, -EINVAL (the markers
 * option is off) or -EBADF (tracing is off).
 */
DPROBE_API int dprobe_trace_marker(const char *text);
/* The same with printf formatting (the kernel's trace_printk). Returns the formatted length
 * or -errno. */
DPROBE_API int dprobe_trace_printk(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

DPROBE_EXTERN_C_END

#endif
