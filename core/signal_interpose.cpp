// sigaction()/signal() interposers: while dprobe owns a signal (SIGTRAP for int3 probes,
// SIGSEGV/SIGBUS for nofault reads) a program that installs its own handler must not
// displace dprobe's; its handler is recorded and called for every signal dprobe does not
// claim. For signals dprobe does not own these forward to libc unchanged.
#include "core/signal_chain.h"

#include <cerrno>
#include <dlfcn.h>

using sigaction_fn = int (*)(int, const struct sigaction *, struct sigaction *);

static sigaction_fn next_sigaction()
{
    static sigaction_fn fn = reinterpret_cast<sigaction_fn>(dlsym(RTLD_NEXT, "sigaction"));
    return fn;
}

extern "C" __attribute__((visibility("default"))) int
sigaction(int sig, const struct sigaction *act, struct sigaction *oldact)
{
    if (dprobe::signal_chain_set_program_action(sig, act, oldact)) return 0;
    sigaction_fn fn = next_sigaction();
    if (!fn) {
        errno = ENOSYS;
        return -1;
    }
    return fn(sig, act, oldact);
}

extern "C" __attribute__((visibility("default"))) sighandler_t signal(int sig, sighandler_t handler)
{
    struct sigaction act {
    }, old{};
    act.sa_handler = handler;
    sigemptyset(&act.sa_mask);
    sigaddset(&act.sa_mask, sig);
    act.sa_flags = SA_RESTART; // BSD semantics, as glibc's signal() gives
    if (sigaction(sig, &act, &old) < 0) return SIG_ERR;
    return old.sa_handler;
}
