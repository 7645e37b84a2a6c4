// The tracefs tree as a FUSE file system (libfuse3), served by threads of the traced
// process itself.
//
// Mount: owner-only (directories 0700, files 0600/0400, owned by the process' uid;
// default_permissions, no allow_other), direct_io (sizes need not be known, reads always
// reach the tree), no attribute or entry caching (events come and go), atomic O_TRUNC (so
// `echo > dynamic_events` deletes the events and can fail with EBUSY at open).
// trace_pipe blocks in its FUSE request until data arrives (a Ctrl-C interrupts it) and
// supports poll(2)/select(2): a notifier thread wakes pollers when events arrive.
//
// Unmount: tracefs_fuse_unmount(), which dprobe_tracefs_start() also registers with atexit;
// if the mount is still there afterwards, `fusermount3 -u -z` is run. A process killed by a
// signal leaves a dead mount behind ("Transport endpoint is not connected"): `fusermount3 -u`
// removes it (the dprobe CLI does, as it knows the mount point), and so does the next mount
// at that point (a later process given the same PID mounts at the same default path).
// DPROBE_TRACEFS_AUTO_UNMOUNT=1
// mounts with libfuse's auto_unmount instead, which cleans up even after SIGKILL but keeps a
// fusermount3 child process in the traced program for its whole life (its wait() sees it).
#pragma once

#include <string>

namespace dprobe
{

// Mounts at MOUNTPOINT (created mode 0700 if missing; a dead dprobe tracefs mount there is
// unmounted first) and starts serving. Returns 0 or -errno (ENODEV/ENOENT without /dev/fuse,
// EBUSY when already mounted by this process, ENOTCONN when a dead mount cannot be removed).
int tracefs_fuse_mount(const std::string &mountpoint);
// Unmounts and stops the serving threads. Only the process that mounted does anything (a
// forked child calling it leaves the parent's mount alone).
void tracefs_fuse_unmount();
// The mount point, "" when not mounted.
std::string tracefs_fuse_mountpoint();

} // namespace dprobe
