#include "core/signal_chain.h"
#include "core/ring_buffer.h"

#include <atomic>
#include <cstring>
#include <cerrno>
#include <dlfcn.h>
#include <mutex>
#include <sys/syscall.h>
#include <unistd.h>
#include <vector>

namespace dprobe
{
namespace
{

constexpr int max_hooks = 8;

struct chain {
    std::atomic<fault_hook> hooks[max_hooks];
    std::atomic<bool> owned{false};
    // The program's disposition; read in signal context, written under chain_lock with the
    // signal blocked, so a handler never sees a torn struct.
    struct sigaction program {
    };
};

chain chains[NSIG];
std::mutex chain_lock;

using sigaction_fn = int (*)(int, const struct sigaction *, struct sigaction *);

// The libc sigaction, bypassing dprobe's own interposer. Looked up at load time: dlsym takes
// the loader's lock, and the first text_poke batch arrives here with dprobe's locks held,
// which a dlopen notification (core/dl_notify.cpp) may be waiting for with the loader's
// lock held.
std::atomic<sigaction_fn> real_sigaction_fn{nullptr};

__attribute__((constructor)) void find_real_sigaction()
{
    real_sigaction_fn.store(reinterpret_cast<sigaction_fn>(dlsym(RTLD_NEXT, "sigaction")));
}

sigaction_fn real_sigaction()
{
    sigaction_fn fn = real_sigaction_fn.load();
    if (!fn) // called before this object's constructors ran
        find_real_sigaction();
    fn = real_sigaction_fn.load();
    return fn ? fn : ::sigaction;
}

void reraise_default(int sig, const siginfo_t *info)
{
    struct sigaction dfl {
    };
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    real_sigaction()(sig, &dfl, nullptr);
    chains[sig].owned.store(false, std::memory_order_release);
    // A fault raised by the kernel re-executes its instruction and now gets the default
    // action with its own siginfo (the core file shows the real si_code and address, as
    // without dprobe). A trap (int3, TF) or a sent signal does not come back by itself:
    // send it again, delivered when this handler returns.
    const bool refault = info && info->si_code > 0 &&
                         (sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGFPE);
    if (!refault) syscall(SYS_tgkill, getpid(), syscall(SYS_gettid), sig);
}

// This thread's errno, found with recording muted: errno is a call of the C library
// (__errno_location), and with libc functions traced every int3 hit showed one under the
// program's call. The handler below is dprobe's, not the program's.
int *errno_slot() noexcept
{
    ring_buffer_thread_mute(true);
    int *slot = &errno;
    ring_buffer_thread_mute(false);
    return slot;
}

void chain_handler(int sig, siginfo_t *info, void *ucv)
{
    int *const err = errno_slot();
    const int saved_errno = *err;
    auto *uc = static_cast<ucontext_t *>(ucv);
    chain &c = chains[sig];
    for (auto &h : c.hooks) {
        fault_hook hook = h.load(std::memory_order_acquire);
        if (hook && hook(sig, info, uc)) {
            *err = saved_errno;
            return;
        }
    }
    // The program's own handler runs as it would untraced (recorded, if traced).
    const struct sigaction &p = c.program;
    if (p.sa_flags & SA_SIGINFO) {
        if (p.sa_sigaction) {
            p.sa_sigaction(sig, info, ucv);
            *err = saved_errno;
            return;
        }
    } else if (p.sa_handler != SIG_DFL && p.sa_handler != SIG_IGN) {
        p.sa_handler(sig);
        *err = saved_errno;
        return;
    }
    // SIG_IGN of a synchronous fault would loop forever; the kernel forces the default
    // action in that case, and so do we. Untraced the kernel does it alone: the C library
    // calls made here (sigemptyset, sigaction, getpid ...) are not the program's.
    ring_buffer_thread_mute(true);
    reraise_default(sig, info);
    ring_buffer_thread_mute(false);
    *err = saved_errno;
}

void install_locked(int sig)
{
    chain &c = chains[sig];
    if (c.owned.load(std::memory_order_acquire)) return;
    struct sigaction act {
    };
    act.sa_sigaction = chain_handler;
    act.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART | SA_NODEFER;
    sigemptyset(&act.sa_mask);
    struct sigaction old {
    };
    real_sigaction()(sig, &act, &old);
    c.program = old;
    c.owned.store(true, std::memory_order_release);
}

} // namespace

void signal_chain_add_hook(int sig, fault_hook hook)
{
    std::lock_guard<std::mutex> g(chain_lock);
    chain &c = chains[sig];
    bool present = false;
    for (auto &h : c.hooks)
        present |= h.load() == hook;
    if (!present) {
        for (auto &h : c.hooks) {
            fault_hook expected = nullptr;
            if (h.compare_exchange_strong(expected, hook)) break;
        }
    }
    install_locked(sig);
}

bool signal_chain_owns(int sig)
{
    return sig > 0 && sig < NSIG && chains[sig].owned.load(std::memory_order_acquire);
}

bool signal_chain_set_program_action(int sig, const struct sigaction *act, struct sigaction *oldact)
{
    std::lock_guard<std::mutex> g(chain_lock);
    if (!signal_chain_owns(sig)) return false;
    chain &c = chains[sig];
    if (oldact) *oldact = c.program;
    if (act) {
        sigset_t all, prev;
        sigfillset(&all);
        pthread_sigmask(SIG_BLOCK, &all, &prev);
        c.program = *act;
        pthread_sigmask(SIG_SETMASK, &prev, nullptr);
    }
    return true;
}

std::vector<int> signal_chain_release()
{
    std::lock_guard<std::mutex> g(chain_lock);
    std::vector<int> kept;
    for (int sig = 1; sig < NSIG; sig++) {
        chain &c = chains[sig];
        if (!c.owned.load(std::memory_order_acquire)) continue;
        for (auto &h : c.hooks)
            h.store(nullptr, std::memory_order_release);
        struct sigaction now {
        };
        real_sigaction()(sig, nullptr, &now);
        // Only a handler that is still dprobe's is replaced: a program that set its own
        // through the C library directly (loaded by attach, dprobe interposes nothing) keeps it.
        if ((now.sa_flags & SA_SIGINFO) && now.sa_sigaction == chain_handler) {
            if (real_sigaction()(sig, &c.program, nullptr) != 0) {
                kept.push_back(sig);
                continue;
            }
        }
        c.owned.store(false, std::memory_order_release);
        c.program = {};
    }
    return kept;
}

} // namespace dprobe
