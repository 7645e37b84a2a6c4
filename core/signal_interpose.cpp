// sigaction()/signal() interposers: while dprobe owns a signal (SIGTRAP for int3 probes,
// SIGSEGV/SIGBUS for nofault reads) a program that installs its own handler must not
// displace dprobe's; its handler is recorded and called for every signal dprobe does not
// claim (that bookkeeping is dprobe's own work: not recorded). For signals dprobe does not
// own, the program's call goes to the C library's function of the same name, as it would
// untraced: a graph of libc functions shows the program's signal() and what libc does in
// it, not dprobe's. While dprobe owns SIGTRAP, a handler's mask leaves it out
// (core/sigmask_interpose.cpp says why).
#include "core/interpose_next.h"
#include "core/signal_chain.h"

#include <cerrno>

using sigaction_fn = int (*)(int, const struct sigaction *, struct sigaction *);
using signal_fn = sighandler_t (*)(int, sighandler_t);

namespace
{

std::atomic<sigaction_fn> next_sigaction{nullptr};
std::atomic<signal_fn> next_signal{nullptr};

__attribute__((constructor)) void find_next_signal_functions()
{
    dprobe::interpose_next(next_sigaction, "sigaction");
    dprobe::interpose_next(next_signal, "signal");
}

// The program's disposition of SIG noted instead of installed, if dprobe owns SIG.
bool set_program_action(int sig, const struct sigaction *act, struct sigaction *oldact)
{
    if (!dprobe::signal_chain_owns(sig)) return false; // no lock taken: nothing recorded
    dprobe::interpose_mute quiet;
    return dprobe::signal_chain_set_program_action(sig, act, oldact);
}

} // namespace

extern "C" __attribute__((visibility("default"))) int
sigaction(int sig, const struct sigaction *act, struct sigaction *oldact)
{
    if (set_program_action(sig, act, oldact)) return 0;
    sigaction_fn fn = dprobe::interpose_next(next_sigaction, "sigaction");
    if (!fn) {
        errno = ENOSYS;
        return -1;
    }
    struct sigaction filtered;
    if (dprobe::sigaction_mask_filtered(act, &filtered)) act = &filtered;
    return fn(sig, act, oldact);
}

extern "C" __attribute__((visibility("default"))) sighandler_t signal(int sig, sighandler_t handler)
{
    if (dprobe::signal_chain_owns(sig)) {
        struct sigaction act {
        }, old{};
        {
            dprobe::interpose_mute quiet;
            act.sa_handler = handler;
            sigemptyset(&act.sa_mask);
            sigaddset(&act.sa_mask, sig);
            act.sa_flags = SA_RESTART; // BSD semantics, as glibc's signal() gives
        }
        if (set_program_action(sig, &act, &old)) return old.sa_handler;
    }
    signal_fn fn = dprobe::interpose_next(next_signal, "signal");
    if (!fn) {
        errno = ENOSYS;
        return SIG_ERR;
    }
    return fn(sig, handler);
}
