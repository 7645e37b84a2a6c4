// close(), close_range() and closefrom() interposers: dprobe's own descriptors
// (core/own_fds.h) stay open when the program closes "every descriptor", and a close of one of
// them by number succeeds as if it had closed it; every other descriptor is closed by the C
// library, as untraced. (Not covered: the raw close_range system call, and dup2/dup3 onto one
// of dprobe's numbers.)
#include "core/interpose_next.h"
#include "core/own_fds.h"

#include <cerrno>
#include <climits>
#include <unistd.h>

namespace
{

using close_fn = int (*)(int);
using close_range_fn = int (*)(unsigned, unsigned, int);
using closefrom_fn = void (*)(int);
std::atomic<close_fn> next_close{nullptr};
std::atomic<close_range_fn> next_close_range{nullptr};
std::atomic<closefrom_fn> next_closefrom{nullptr};

// Looked up at load (core/interpose_next.h).
__attribute__((constructor)) void find_next_close_functions()
{
    dprobe::interpose_next(next_close, "close");
    dprobe::interpose_next(next_close_range, "close_range");
    dprobe::interpose_next(next_closefrom, "closefrom");
}

// The C library's close_range over [FIRST, LAST] less dprobe's descriptors.
int close_range_around_own(unsigned first, unsigned last, int flags)
{
    close_range_fn fn = dprobe::interpose_next(next_close_range, "close_range");
    if (!fn) {
        errno = ENOSYS;
        return -1;
    }
    unsigned lo = first;
    while (lo <= last) {
        const int own = dprobe::own_fd_next(lo > INT_MAX ? INT_MAX : static_cast<int>(lo));
        if (own < 0 || static_cast<unsigned>(own) > last || lo > INT_MAX)
            return fn(lo, last, flags);
        const auto o = static_cast<unsigned>(own);
        if (o > lo && fn(lo, o - 1, flags) != 0) return -1;
        if (o == UINT_MAX) break;
        lo = o + 1;
    }
    return 0;
}

} // namespace

extern "C" __attribute__((visibility("default"))) int close(int fd)
{
    if (dprobe::own_fd(fd)) return 0;
    close_fn fn = dprobe::interpose_next(next_close, "close");
    if (!fn) {
        errno = ENOSYS;
        return -1;
    }
    return fn(fd);
}

extern "C" __attribute__((visibility("default"))) int close_range(unsigned first, unsigned last,
                                                                  int flags)
{
    if (first > last || dprobe::own_fd_next(0) < 0) {
        close_range_fn fn = dprobe::interpose_next(next_close_range, "close_range");
        if (!fn) {
            errno = ENOSYS;
            return -1;
        }
        return fn(first, last, flags);
    }
    return close_range_around_own(first, last, flags);
}

extern "C" __attribute__((visibility("default"))) void closefrom(int lowfd)
{
    const int own = dprobe::own_fd_next(lowfd);
    if (own >= 0 &&
        close_range_around_own(lowfd < 0 ? 0 : static_cast<unsigned>(lowfd), ~0U, 0) == 0)
        return;
    // None of dprobe's descriptors above LOWFD (or close_range missing: glibc's closefrom
    // falls back to a walk of /proc/self/fd, which goes through close() above).
    closefrom_fn fn = dprobe::interpose_next(next_closefrom, "closefrom");
    if (fn) fn(lowfd);
}
