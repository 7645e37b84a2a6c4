// Client side of the tracefs Unix socket (protocol: tracefs_socket.h), for `dprobe ctl` and
// tests, and the default locations both sides agree on.
//
// Locations (per user, never shared between users):
//   runtime dir   $XDG_RUNTIME_DIR/dprobe, or /tmp/dprobe-<uid> when XDG_RUNTIME_DIR is unset
//                 (created mode 0700; refused when it exists but is not ours or not 0700)
//   FUSE mount    $DPROBE_TRACEFS, or <runtime dir>/<pid>
//   socket        $DPROBE_TRACEFS_SOCKET, or <runtime dir>/dprobe-<pid>.sock
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>
#include <string_view>

namespace dprobe
{

// The runtime directory (not created).
std::string tracefs_runtime_dir();
// Creates DIR (and missing parents) mode 0700 and checks that the last component is a
// directory owned by the caller and not accessible to others. Returns 0 or -errno.
int tracefs_make_private_dir(const std::string &dir);
// Default FUSE mount point and socket path of process PID.
std::string tracefs_default_mountpoint(pid_t pid);
std::string tracefs_default_socket(pid_t pid);

enum class tracefs_op {
    read,        // READ: the whole file (trace_pipe: what is there now)
    write,       // WRITE: one write(), like `echo ... >> file`
    write_trunc, // TRUNCWRITE: O_TRUNC then write, like `echo ... > file`
    trunc,       // TRUNC: O_TRUNC only, like `> file` (clears trace, deletes all events)
    list,        // LIST: directory entries, one per line, '/' after directories
    poll,        // POLL: waits up to timeout_ms for the file to be readable; data "1" or "0"
    mkdir,       // MKDIR: a directory (instances/NAME: a new trace array)
    rmdir,       // RMDIR: instances/NAME removed
};

struct tracefs_reply {
    int err = 0;      // 0, or the positive errno the operation failed with
    std::string data; // READ / LIST / POLL payload
};

// One request. TARGET is a pid ("1234") or a socket path. Connection failures come back as
// their errno (ENOENT: no such socket, ECONNREFUSED, EACCES, ...).
tracefs_reply tracefs_socket_request(const std::string &target, tracefs_op op,
                                     std::string_view path, std::string_view data = {},
                                     int timeout_ms = 0);
tracefs_reply tracefs_socket_request(pid_t pid, tracefs_op op, std::string_view path,
                                     std::string_view data = {}, int timeout_ms = 0);

// Streams PATH (trace_pipe) to ON_DATA until ON_DATA returns false, or TIMEOUT_MS passes
// with no data (< 0: no limit), or the server goes away. Returns 0 or -errno.
int tracefs_socket_pipe(const std::string &target, std::string_view path, int timeout_ms,
                        const std::function<bool(std::string_view)> &on_data);

// A connection for several requests in a row.
class tracefs_client
{
  public:
    tracefs_client() = default;
    ~tracefs_client();
    tracefs_client(const tracefs_client &) = delete;
    tracefs_client &operator=(const tracefs_client &) = delete;

    // TARGET: pid or socket path. A pid's socket is looked for where this process's
    // environment puts it (tracefs_default_socket), then among the live sockets named
    // dprobe-PID.sock served by that process (one `dprobe attach` started, whose environment
    // differs). Returns 0 or -errno.
    int connect(const std::string &target);
    tracefs_reply request(tracefs_op op, std::string_view path, std::string_view data = {},
                          int timeout_ms = 0);
    int pipe(std::string_view path, int timeout_ms,
             const std::function<bool(std::string_view)> &on_data);
    void close();
    int fd() const { return fd_; }

  private:
    int connect_path(const std::string &path);
    int fd_ = -1;
    std::string inbuf_;
    bool send_all(std::string_view s);
    bool read_line(std::string &line);
    bool read_bytes(size_t n, std::string &out);
    tracefs_reply read_reply();
};

} // namespace dprobe
