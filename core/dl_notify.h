// Notification of dlopen and dlclose (the kernel's module notifier): after the loader has
// changed the list of loaded objects, the site records are brought up to date (the new
// objects scanned, the sites of unloaded ones marked gone) and each notifier runs.
//
// The hook is the loader's own debugger interface: _dl_debug_state() (r_brk of the r_debug
// that DT_DEBUG points to), which ld.so calls with r_state RT_CONSISTENT once the objects of
// a dlopen are mapped —
// before they are relocated and before their constructors run (checked with glibc 2.36:
// their data relocations are still zero and their constructors have not run) — and once the
// objects of a dlclose are unmapped. dprobe makes that function jump to
// arch/x86_64/dl_hook.S, with the same text_poke protocol as every other site. It is
// installed only when a notifier is first added: a program that asks for nothing keeps ld.so
// untouched. Interposing dlopen() itself would change which object dlopen sees as its caller
// (whose RUNPATH and namespace it uses), and would miss the loads ld.so does on its own.
//
// Notifiers run on the thread calling dlopen/dlclose, inside the loader, with its locks
// held (dl_load_lock and, in glibc 2.35 and later, dl_load_tls_lock): they may take dprobe's
// registration locks and patch code, but must not call dlopen, dlsym, dladdr, dlclose or
// pthread_create; and no code that holds a lock a notifier takes may call those either.
#pragma once

#include "core/fair_mutex.h"
#include "core/symbols.h"

#include <mutex>
#include <span>

namespace dprobe
{

struct dl_notifier {
    // The objects recorded since the last notification: those this dlopen mapped (no thread
    // has run their code yet, see ftrace_site::unreached), and any another thread's lookup
    // recorded in between. Empty after a dlclose (its sites are already marked gone).
    void (*objects_changed)(std::span<const object_ptr> added);
    // The lock objects_changed takes, if any: a child forked while another thread held it
    // gets no notifications (the lock stays held there forever), rather than hanging in its
    // next dlopen.
    fair_mutex *lock;
    // Runs before the others: the ftrace users (fprobes following loads), whose sites a
    // kprobe armed on a new object (a pending probe) then rides on - as the kernel's module
    // loader enables ftrace's sites of a module before its notifier chain runs.
    bool ftrace_user = false;
};

// Adds N (a static object; adding it twice is harmless). The first call installs the hook
// and records every object loaded so far. Returns 0, -EBUSY when a breakpoint (a debugger's
// int3) is on _dl_debug_state, -EOPNOTSUPP when that function is not the lone `ret` dprobe
// knows, or another -errno. INSTALL false: N only listens - it is called once some other
// notifier has the hook installed, which it never installs itself (0, or -ENOSPC).
int dl_notifier_add(const dl_notifier *n, bool install = true);

// Removes N. A notification already under way on another thread may still call it. The
// hook stays, and keeps the site records in step with the loader.
void dl_notifier_remove(const dl_notifier *n);

// The end of dprobe in the process: every notifier removed and the loader's bytes written
// back. 0 or -errno (the hook stays then). A later dl_notifier_add installs it afresh.
int dl_notify_release();

// True once the hook is installed (and not lost in a forked child): every object not yet
// recorded then belongs to a dlopen that has not reached the hook, so nobody runs its code.
bool dl_hook_active();

} // namespace dprobe
