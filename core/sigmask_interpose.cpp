// sigprocmask()/pthread_sigmask() interposers, and the sa_mask of sigaction(): while dprobe
// owns SIGTRAP (int3 probes armed), no thread of the program may block it. A breakpoint trap
// that finds SIGTRAP blocked is not left pending: the kernel resets the signal to its default
// action and unblocks it, which kills the process (force_sig_info). Programs block every
// signal routinely: liblzma starts its worker threads with all signals blocked, handlers are
// installed with sigfillset() masks. So the mask the program asks for is installed without
// SIGTRAP, and what the thread asked for about SIGTRAP is remembered and shown in the old
// masks it reads back, so the program sees the mask it set. What cannot be seen through:
// a SIGTRAP another process sends to a thread that "blocked" it arrives at once (dprobe's
// handler passes it to the program's disposition), and masks set by raw system calls or in
// the C library's own code keep SIGTRAP blocked (the C library and the loader get int3
// entries only when a glob names the function exactly, see Documentation/cli.md).
#include "core/interpose_next.h"
#include "core/signal_chain.h"

#include <cerrno>
#include <csignal>
#include <pthread.h>

using sigprocmask_fn = int (*)(int, const sigset_t *, sigset_t *);

namespace
{

std::atomic<sigprocmask_fn> next_sigprocmask{nullptr}, next_pthread_sigmask{nullptr};

__attribute__((constructor)) void find_next_sigmask_functions()
{
    dprobe::interpose_next(next_sigprocmask, "sigprocmask");
    dprobe::interpose_next(next_pthread_sigmask, "pthread_sigmask");
}

// Whether this thread asked for SIGTRAP blocked (while dprobe kept it unblocked).
__attribute__((tls_model("initial-exec"))) thread_local bool t_trap_blocked;

bool trap_owned()
{
    return dprobe::signal_chain_owns(SIGTRAP);
}

// FN(HOW, SET, OLD) with SIGTRAP kept out of the mask installed and, in OLD, as the thread
// asked. Returns FN's result (0 or an error number for pthread_sigmask, 0 or -1 for
// sigprocmask).
int set_mask(sigprocmask_fn fn, int how, const sigset_t *set, sigset_t *old)
{
    if (!trap_owned()) {
        const int r = fn(how, set, old);
        t_trap_blocked = false;
        return r;
    }
    sigset_t filtered;
    const sigset_t *use = set;
    bool asked = t_trap_blocked;
    if (set) {
        const bool has = sigismember(set, SIGTRAP) == 1;
        if (how == SIG_BLOCK && has)
            asked = true;
        else if (how == SIG_UNBLOCK && has)
            asked = false;
        else if (how == SIG_SETMASK)
            asked = has;
        if (has && how != SIG_UNBLOCK) {
            filtered = *set;
            sigdelset(&filtered, SIGTRAP);
            use = &filtered;
        }
    }
    const int r = fn(how, use, old);
    if (r == 0) {
        if (old && t_trap_blocked) sigaddset(old, SIGTRAP);
        if (set) t_trap_blocked = asked;
    }
    return r;
}

} // namespace

namespace dprobe
{

// For sigaction(): the handler's mask without SIGTRAP while dprobe owns it (a handler runs
// with its mask added to the thread's; a probe hit inside it must not find SIGTRAP blocked).
bool sigaction_mask_filtered(const struct sigaction *act, struct sigaction *out)
{
    if (!act || !trap_owned() || sigismember(&act->sa_mask, SIGTRAP) != 1) return false;
    *out = *act;
    sigdelset(&out->sa_mask, SIGTRAP);
    return true;
}

} // namespace dprobe

extern "C" __attribute__((visibility("default"))) int sigprocmask(int how, const sigset_t *set,
                                                                  sigset_t *old)
{
    sigprocmask_fn fn = dprobe::interpose_next(next_sigprocmask, "sigprocmask");
    if (!fn) {
        errno = ENOSYS;
        return -1;
    }
    return set_mask(fn, how, set, old);
}

extern "C" __attribute__((visibility("default"))) int pthread_sigmask(int how, const sigset_t *set,
                                                                      sigset_t *old)
{
    sigprocmask_fn fn = dprobe::interpose_next(next_pthread_sigmask, "pthread_sigmask");
    if (!fn) return ENOSYS;
    return set_mask(fn, how, set, old);
}
