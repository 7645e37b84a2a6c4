// The tracefs tree served on a Unix stream socket, for machines without FUSE; `dprobe ctl`
// speaks it (client: tracefs_client.h). Default path <runtime dir>/dprobe-<pid>.sock, see
// tracefs_client.h; the socket file is mode 0600 in a 0700 directory.
//
// Access: a connection is served only when the peer's SO_PEERCRED uid equals this process'
// effective uid, or is 0 (root may read any process' memory anyway). Other peers are closed
// without a reply.
//
// Protocol: requests and reply headers are lines ending in '\n'; PATH is relative to the
// tracefs root (a leading '/' is allowed) and has no spaces. Several requests may follow
// each other on one connection; each gets exactly one reply (PIPE: a stream of frames).
//
//   READ <path>                     the whole file; trace_pipe: what is buffered now (never
//                                   blocks); a directory: EISDIR
//   WRITE <path> <n>\n<n bytes>     one write() of the n bytes (like `echo ... >> file`)
//   TRUNCWRITE <path> <n>\n<bytes>  open with O_TRUNC, then write (like `echo ... > file`)
//   TRUNC <path>                    open with O_TRUNC (like `> file`)
//   MKDIR <path>                    mkdir (instances/<name>: a new trace array)
//   RMDIR <path>                    rmdir (instances/<name>)
//   LIST <path>                     directory entries, one per line, '/' after directories
//   POLL <path> <timeout_ms>        wait until the file is readable or timeout_ms passes
//                                   (< 0: no limit); payload "1" (readable) or "0"
//   PIPE <path> [<timeout_ms>]      consuming stream of trace_pipe: one frame per chunk of
//                                   text as events arrive, "END\n" after timeout_ms without
//                                   data (absent or < 0: until the client hangs up);
//                                   EINVAL for a file that is not a stream
//
// Replies:
//   OK <n>\n<n bytes>               success; n is 0 for WRITE, TRUNCWRITE, TRUNC, MKDIR, RMDIR
//   ERR <errno> <NAME>\n            failure, e.g. "ERR 22 EINVAL", "ERR 16 EBUSY"
//   DATA <n>\n<n bytes>             one PIPE frame
//   END\n                           end of a PIPE stream
//
// Example session (what `echo 'f:myev do_work' >> dynamic_events` becomes):
//   > WRITE dynamic_events 17\nf:myev do_work\n
//   < OK 0
#pragma once

#include <string>

namespace dprobe
{

// Binds PATH (removing a stale socket file first), listens and serves from a thread.
// Returns 0 or -errno. One server per process.
int tracefs_socket_start(const std::string &path);
// Stops accepting, ends the connections (blocked PIPE/POLL requests return) and removes the
// socket file. Returns after every server thread has finished.
void tracefs_socket_stop();
// The path being served, "" when not serving.
std::string tracefs_socket_path();

} // namespace dprobe
