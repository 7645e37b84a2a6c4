// The loader's notification of dlopen/dlclose (r_debug's r_brk breakpoint function, as
// debuggers use it): a hook jumped to from _dl_debug_state() that updates the patch sites
// inside the loader and calls the registered notifiers. Where and how the jmp is written is
// arch/x86_64's (dl_hook_site.h, dl_hook.S).
#include "core/dl_notify.h"

#include "arch/x86_64/dl_hook_site.h"
#include "arch/x86_64/text_patching.h"
#include "core/compiler.h"
#include "core/exec_mem.h"
#include "core/ftrace.h"
#include "core/ftrace_internal.h"
#include "core/ring_buffer.h"
#include "core/text_poke.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <link.h>
#include <pthread.h>

extern "C" void dprobe_dl_debug_hook();

namespace dprobe
{
namespace
{

constexpr int max_notifiers = 8;
std::atomic<const dl_notifier *> notifiers[max_notifiers];
std::mutex install_lock;
bool installed;             // under install_lock
uintptr_t hook_at;          // where the hook's jmp is, once installed
std::atomic<uint64_t> mark; // objects delivered so far (ftrace_loader_update)
// The hook runs the loader update at every change (dl_hook_active).
std::atomic<bool> active{false};
// A child forked while another thread held a lock the notification takes.
std::atomic<bool> broken_by_fork{false};
__thread bool in_event __attribute__((tls_model("initial-exec")));
// Between a dlclose's RT_DELETE and RT_CONSISTENT calls: the ftrace lock is held.
__thread bool unmapping __attribute__((tls_model("initial-exec")));

// The loader's r_debug, as debuggers find it: through DT_DEBUG in the program's dynamic
// section. `_r_debug` itself may name a stale copy: a program that refers to it gets a copy
// relocation, and ld.so keeps updating its own.
const volatile r_debug *live_r_debug;

int find_dt_debug(struct dl_phdr_info *info, size_t, void *out)
{
    for (int i = 0; i < info->dlpi_phnum; ++i) {
        if (info->dlpi_phdr[i].p_type != PT_DYNAMIC) continue;
        auto *d = reinterpret_cast<const ElfW(Dyn) *>(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
        for (; d->d_tag != DT_NULL; ++d)
            if (d->d_tag == DT_DEBUG && d->d_un.d_ptr)
                *static_cast<const r_debug **>(out) =
                    reinterpret_cast<const r_debug *>(d->d_un.d_ptr);
    }
    return 1; // the first object is the program
}

const volatile r_debug *find_r_debug()
{
    const r_debug *r = nullptr;
    dl_iterate_phdr(find_dt_debug, &r);
    return r ? r : &_r_debug;
}

template <class M> bool lock_free(M &m)
{
    if (!m.try_lock()) return false;
    m.unlock();
    return true;
}

// fork(): only the forking thread goes on in the child, and a lock another thread held at
// that moment is never released there. Rather than hang in the child's next dlopen, the
// child then gets no notifications.
void after_fork_child()
{
    bool ok = lock_free(ftrace_st().lock) && kallsyms::instance().refresh_lock_free() &&
              text_poke_lock_free() && exec_mem_lock_free();
    for (auto &n : notifiers)
        if (const dl_notifier *p = n.load(); p && p->lock && !lock_free(*p->lock)) ok = false;
    if (!ok) {
        broken_by_fork.store(true);
        active.store(false);
    }
}

// _r_debug.r_brk is _dl_debug_state: `ret` padded to the next function, room for the hook's
// 5-byte jmp (arch/x86_64/dl_hook_site.h reads the bytes).
int install_hook()
{
    live_r_debug = find_r_debug();
    const uintptr_t brk = live_r_debug->r_brk;
    if (!brk) return -EOPNOTSUPP;
    uintptr_t at = 0;
    if (long err = arch::dl_hook_site(brk, &at)) return static_cast<int>(err);
    // With ld.so's symbols (Debian keeps them): no other function starts in those bytes.
    if (object_ptr ld = kallsyms::instance().object_of(at)) {
        auto next = std::upper_bound(ld->funcs.begin(), ld->funcs.end(), at,
                                     [](uintptr_t a, const ksym &k) { return a < k.addr; });
        if (next != ld->funcs.end() && next->addr < at + arch::DL_HOOK_SITE_LEN) return -EOPNOTSUPP;
    }
    // An absolute jump to dprobe_dl_debug_hook: reaches the hook wherever libdprobe is,
    // without touching a register; the site's jmp goes there.
    exec_chunk c = exec_alloc(at, at + arch::DL_HOOK_SITE_LEN, arch::ABS_JMP_SIZE);
    if (!c) return -ENOMEM;
    arch::write_abs_jmp(c.rw, reinterpret_cast<uintptr_t>(&dprobe_dl_debug_hook));
    text_poke_req one[1];
    arch::jmp_req(at, c.rx, &one[0]); // the chunk was allocated in reach
    if (int err = text_poke_batch(one)) {
        exec_free(c);
        return err;
    }
    hook_at = at;
    return 0;
}

} // namespace

int dl_notifier_add(const dl_notifier *n, bool install)
{
    std::lock_guard<std::mutex> g(install_lock);
    if (!installed && install) {
        if (int err = install_hook()) return err;
        installed = true;
        pthread_atfork(nullptr, nullptr, after_fork_child);
        // Every object loaded so far is recorded here, as running code. Any object found
        // after this was mapped by a dlopen whose RT_CONSISTENT call is still to come: until
        // the hook has seen that call, nobody runs its code (dl_hook_active).
        ftrace_update_objects();
        mark.store(ftrace_objects_mark());
        active.store(true);
    }
    for (auto &slot : notifiers)
        if (slot.load() == n) return 0;
    for (auto &slot : notifiers) {
        const dl_notifier *expect = nullptr;
        if (slot.compare_exchange_strong(expect, n)) return 0;
    }
    return -ENOSPC;
}

int dl_notify_release()
{
    std::lock_guard<std::mutex> g(install_lock);
    for (auto &slot : notifiers)
        slot.store(nullptr);
    if (!installed) return 0;
    active.store(false);
    // The loader's bytes back; a thread inside the hook meanwhile leaves it on its own (the
    // end of the session waits for that, core/unload.h).
    if (int err = text_poke_restore(hook_at, hook_at + arch::DL_HOOK_SITE_LEN)) return err;
    installed = false;
    return 0;
}

bool dl_hook_active()
{
    return active.load();
}

void dl_notifier_remove(const dl_notifier *n)
{
    std::lock_guard<std::mutex> g(install_lock);
    for (auto &slot : notifiers) {
        const dl_notifier *expect = n;
        slot.compare_exchange_strong(expect, nullptr);
    }
}

} // namespace dprobe

using namespace dprobe;

// Called by dprobe_dl_debug_hook at each _dl_debug_state() of the loader. The loader
// serialises its calls (its lock is held), so `mark` has one writer at a time.
extern "C" DPROBE_NOPROBE void dprobe_dl_event() noexcept
{
    // RT_ADD and RT_DELETE announce a change; RT_CONSISTENT says it is done. (A dlmopen into
    // another namespace changes that namespace's r_debug: objects are then looked at one
    // call early, which is harmless, as dl_iterate_phdr lists only fully mapped objects;
    // but its dlclose is not seen before the unmapping.) Once installed, every change is
    // looked at, with or without notifiers: the records of objects that other threads find
    // before the dlopen gets here count as unreached, and only this call says they are
    // reached.
    if (in_event || broken_by_fork.load()) return;
    const int state = live_r_debug->r_state;
    if (state == r_debug::RT_DELETE && !unmapping) {
        // Destructors have run; the loader unmaps the objects before its next call.
        ftrace_loader_unmapping();
        unmapping = true;
        return;
    }
    if (state != r_debug::RT_CONSISTENT) return;
    const int saved_errno = errno;
    in_event = true;
    // The notifiers take locks a ring buffer's consumer may want (the agent's streamer
    // describes loaded objects): this thread, in the loader, never waits for it.
    ring_buffer_thread_nowait(true);
    const bool was_unmapping = unmapping;
    unmapping = false;
    try {
        uint64_t m = mark.load();
        std::vector<object_ptr> added = ftrace_loader_update(&m, was_unmapping);
        mark.store(m);
        for (bool first : {true, false})
            for (auto &n : notifiers)
                if (const dl_notifier *p = n.load(); p && p->ftrace_user == first)
                    p->objects_changed(added);
    } catch (...) {
        // Out of memory: these objects are not followed; the loader must carry on.
    }
    ftrace_loader_done();
    ring_buffer_thread_nowait(false);
    in_event = false;
    errno = saved_errno;
}
