// A minimal client of the tracefs socket for the e2e script (the real one is `dprobe ctl`):
//   tracefs_ctl TARGET read|write|truncwrite|trunc|list PATH [DATA]
//   tracefs_ctl TARGET poll PATH TIMEOUT_MS
//   tracefs_ctl TARGET pipe PATH TIMEOUT_MS      (streams trace_pipe to stdout)
// TARGET is a pid or a socket path. Exit status 0, or 1 with "error: <errno name>" on stderr.
#include "tracefs/tracefs_client.h"

#include <cstdio>
#include <cstring>
#include <string>

using namespace dprobe;

int main(int argc, char **argv)
{
    if (argc < 4) {
        std::fprintf(stderr, "usage: %s TARGET OP PATH [DATA|TIMEOUT_MS]\n", argv[0]);
        return 2;
    }
    std::string target = argv[1], op = argv[2], path = argv[3];
    std::string arg = argc > 4 ? argv[4] : "";
    if (op == "pipe") {
        int r = tracefs_socket_pipe(target, path, arg.empty() ? -1 : std::stoi(arg),
                                    [](std::string_view d) {
                                        std::fwrite(d.data(), 1, d.size(), stdout);
                                        std::fflush(stdout);
                                        return true;
                                    });
        if (r) {
            std::fprintf(stderr, "error: %s\n", strerrorname_np(-r));
            return 1;
        }
        return 0;
    }
    tracefs_op o;
    if (op == "read")
        o = tracefs_op::read;
    else if (op == "write")
        o = tracefs_op::write;
    else if (op == "truncwrite")
        o = tracefs_op::write_trunc;
    else if (op == "trunc")
        o = tracefs_op::trunc;
    else if (op == "list")
        o = tracefs_op::list;
    else if (op == "poll")
        o = tracefs_op::poll;
    else {
        std::fprintf(stderr, "unknown op %s\n", op.c_str());
        return 2;
    }
    int timeout = o == tracefs_op::poll && !arg.empty() ? std::stoi(arg) : 0;
    tracefs_reply r =
        tracefs_socket_request(target, o, path, o == tracefs_op::poll ? "" : arg, timeout);
    if (r.err) {
        std::fprintf(stderr, "error: %s\n", strerrorname_np(r.err));
        return 1;
    }
    std::fwrite(r.data.data(), 1, r.data.size(), stdout);
    return 0;
}
