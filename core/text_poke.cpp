// text_poke (see text_poke.h): batches, page protection, the int3 protocol's sequence of
// writes and syncs, the SIGTRAP hook for threads that meet a temporary breakpoint, and
// writes with every other thread stopped. The bytes come from the arch verbs.
#include "core/text_poke.h"

#include "core/proc_maps.h"

#include "arch/x86_64/raw_syscall.h"
#include "arch/x86_64/uctx.h"
#include "core/membarrier.h"
#include "core/signal_chain.h"
#include "core/stop_machine.h"
#include "core/text_journal.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <mutex>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <vector>

namespace dprobe
{
namespace
{

std::mutex text_mutex;

// The batch the SIGTRAP hook consults, sorted by address. Published while int3s are live.
std::atomic<const text_poke_req *> active_reqs{nullptr};
std::atomic<size_t> active_count{0};
std::atomic<int> hooks_in_flight{0};

// Addresses of the last batches' int3s: a late trap is restarted only at such an address, so
// a program's own int3 that it removed itself is never mistaken for ours.
constexpr size_t recent_slots = 1024;
std::atomic<uintptr_t> recent[recent_slots];

void remember_poked(uintptr_t addr)
{
    recent[(addr >> 2) % recent_slots].store(addr, std::memory_order_release);
}

bool recently_poked(uintptr_t addr)
{
    return recent[(addr >> 2) % recent_slots].load(std::memory_order_acquire) == addr;
}

bool poke_int3_hook(int, siginfo_t *, ucontext_t *uc)
{
    // seq_cst pairs with the poker's store of nullptr followed by its read of the count.
    hooks_in_flight.fetch_add(1);
    const text_poke_req *reqs = active_reqs.load();
    size_t n = active_count.load();
    bool handled = false;
    // (A kprobe's own int3, emulate::trap, is its hook's to handle.)
    if (reqs) handled = arch::poke_int3_handler(uc, reqs, n);
    hooks_in_flight.fetch_sub(1);
    if (!handled) {
        const uintptr_t at = arch::uc_int3_addr(uc);
        // The int3 may have been written by a batch that has completed since this thread
        // trapped (the kernel's do_int3 makes the same check), possibly with another batch
        // under way now: if the byte is no longer an int3, run whatever is there now.
        if (!arch::breakpoint_at(at) && recently_poked(at)) {
            arch::uc_set_ip(uc, at);
            handled = true;
        }
    }
    return handled;
}

// A page range and the protection to give it back.
struct mapping {
    uintptr_t start, end;
    int prot;
};

// Makes every page touched by [addr, addr+len) of every range writable, remembering how to
// restore it. Pages stay executable: other threads may be running there.
class page_writer
{
  public:
    int open(const std::vector<std::pair<uintptr_t, size_t>> &ranges)
    {
        const uintptr_t pg = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
        std::vector<uintptr_t> pages;
        for (auto [a, l] : ranges)
            for (uintptr_t p = a & ~(pg - 1); p < a + l; p += pg)
                pages.push_back(p);
        std::sort(pages.begin(), pages.end());
        pages.erase(std::unique(pages.begin(), pages.end()), pages.end());
        const std::vector<proc_map> maps = read_proc_maps();
        for (uintptr_t p : pages) {
            auto it = std::find_if(maps.begin(), maps.end(),
                                   [&](const proc_map &m) { return p >= m.start && p < m.end; });
            if (it == maps.end()) {
                close();
                return -EFAULT;
            }
            int prot = it->prot();
            if (!(prot & PROT_WRITE)) {
                if (mprotect(reinterpret_cast<void *>(p), pg, prot | PROT_WRITE) != 0) {
                    int err = -errno;
                    close();
                    return err;
                }
                changed_.push_back({p, pg, prot});
            }
        }
        return 0;
    }
    void close()
    {
        for (auto &m : changed_)
            mprotect(reinterpret_cast<void *>(m.start), m.end, m.prot);
        changed_.clear();
    }
    ~page_writer() { close(); }

  private:
    std::vector<mapping> changed_; // start, length (in end), prot
};

bool fits_one_word(const text_poke_req &r)
{
    return (r.addr & 7) + r.len <= 8;
}

void atomic_word_write(const text_poke_req &r)
{
    auto *word = reinterpret_cast<uint64_t *>(r.addr & ~7UL);
    uint64_t v = __atomic_load_n(word, __ATOMIC_RELAXED);
    std::memcpy(reinterpret_cast<uint8_t *>(&v) + (r.addr & 7), r.bytes, r.len);
    __atomic_store_n(word, v, __ATOMIC_RELEASE);
}

// What the stop_machine function needs, prepared beforehand: it runs in a vfork child while
// other threads (which may hold any lock) are stopped, so it only touches this.
struct stopped_poke {
    std::span<const text_poke_req> reqs;
    std::span<const rip_move> moves;
    std::vector<mapping> pages; // start, length in end, original prot
    int error;
    text_poke_gate gate = nullptr;
    void *gate_arg = nullptr;
    bool refused = false;
};

void poke_while_stopped(stopped_thread *threads, size_t n, void *arg)
{
    auto *sp = static_cast<stopped_poke *>(arg);
    if (sp->gate && !sp->gate(threads, n, sp->gate_arg)) {
        sp->refused = true;
        return;
    }
    for (const mapping &m : sp->pages)
        if (arch::raw_syscall(SYS_mprotect, static_cast<long>(m.start), static_cast<long>(m.end),
                              m.prot | PROT_WRITE | PROT_EXEC) != 0)
            sp->error = -EFAULT;
    if (sp->error == 0) {
        // Byte by byte through a volatile pointer: no libc (memcpy may be the very function
        // being patched) and no compiler-generated call.
        for (const text_poke_req &r : sp->reqs) {
            auto *dst = reinterpret_cast<volatile uint8_t *>(r.addr);
            for (unsigned i = 0; i < r.len; ++i)
                dst[i] = r.bytes[i];
        }
        for (size_t t = 0; t < n; ++t) {
            // A thread inside an int3 trap is logically at the int3, not at its RIP (one
            // past it, which may happen to be the next old boundary): moving it would skip
            // the trapping instruction and hand its SIGTRAP handler an address no hook
            // knows. Its handler resolves the trap address against the new bytes instead.
            if (threads[t].in_trap) continue;
            const uintptr_t rip = arch::user_regs_ip(threads[t].regs);
            size_t lo = 0, hi = sp->moves.size();
            while (lo < hi) {
                size_t mid = (lo + hi) / 2;
                if (sp->moves[mid].from < rip)
                    lo = mid + 1;
                else
                    hi = mid;
            }
            if (lo < sp->moves.size() && sp->moves[lo].from == rip) {
                arch::user_regs_set_ip(threads[t].regs, sp->moves[lo].to);
                threads[t].changed = true;
            }
        }
    }
    for (const mapping &m : sp->pages)
        arch::raw_syscall(SYS_mprotect, static_cast<long>(m.start), static_cast<long>(m.end),
                          m.prot);
}

} // namespace

namespace
{

// text_poke_stopped, with GATE (if any) deciding in the stopped state whether to write.
// text_mutex held.
int poke_stopped_locked(std::span<const text_poke_req> reqs, std::span<const rip_move> moves,
                        text_poke_gate gate, void *gate_arg)
{
    for (const text_poke_req &r : reqs)
        text_journal_note(r.addr, r.len);
    if (process_thread_count() == 1) {
        if (gate && !gate(nullptr, 0, gate_arg)) return -EAGAIN;
        std::vector<std::pair<uintptr_t, size_t>> ranges;
        for (auto &r : reqs)
            ranges.emplace_back(r.addr, r.len);
        page_writer w;
        if (int err = w.open(ranges)) return err;
        for (auto &r : reqs)
            std::memcpy(reinterpret_cast<void *>(r.addr), r.bytes, r.len);
        return 0;
    }
    // A thread already trapped on an int3 at a region's start (an earlier batch's, or a
    // kprobe's) finds new bytes there when its handler runs: let the handler recognise it.
    for (const text_poke_req &r : reqs)
        remember_poked(r.addr);
    // The stopped side looks threads up by binary search: sorted here, whatever order the
    // caller built them in (a region's moves plus an out-of-line copy's, say).
    std::vector<rip_move> sorted(moves.begin(), moves.end());
    std::sort(sorted.begin(), sorted.end(),
              [](const rip_move &a, const rip_move &b) { return a.from < b.from; });
    stopped_poke sp{reqs, sorted, {}, 0, gate, gate_arg};
    const uintptr_t pg = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    const std::vector<proc_map> maps = read_proc_maps();
    std::vector<uintptr_t> pages;
    for (auto &r : reqs)
        for (uintptr_t p = r.addr & ~(pg - 1); p < r.addr + r.len; p += pg)
            pages.push_back(p);
    std::sort(pages.begin(), pages.end());
    pages.erase(std::unique(pages.begin(), pages.end()), pages.end());
    for (uintptr_t p : pages) {
        auto it = std::find_if(maps.begin(), maps.end(),
                               [&](const proc_map &m) { return p >= m.start && p < m.end; });
        if (it == maps.end()) return -EFAULT;
        sp.pages.push_back({p, pg, it->prot()});
    }
    int err = stop_machine(poke_while_stopped, &sp);
    if (err) return err;
    if (sp.refused) return -EAGAIN;
    return sp.error;
}

} // namespace

int text_poke_stopped(std::span<const text_poke_req> reqs, std::span<const rip_move> moves)
{
    if (reqs.empty()) return 0;
    std::lock_guard<std::mutex> g(text_mutex);
    return poke_stopped_locked(reqs, moves, nullptr, nullptr);
}

namespace
{

int restore(uintptr_t lo, uintptr_t hi, text_poke_gate gate, void *gate_arg)
{
    std::lock_guard<std::mutex> g(text_mutex);
    std::vector<text_poke_req> reqs = text_journal_restore_reqs();
    std::erase_if(reqs,
                  [&](const text_poke_req &r) { return r.addr + r.len <= lo || r.addr >= hi; });
    if (reqs.empty() && !gate) return 0;
    // A thread may have trapped on a breakpoint of ours that this removes: its SIGTRAP hook
    // must find the address among the recently poked ones and restart there.
    for (const text_poke_req &r : reqs)
        for (unsigned i = 0; i < r.len; i++)
            if (arch::breakpoint_at(r.addr + i)) remember_poked(r.addr + i);
    return poke_stopped_locked(reqs, {}, gate, gate_arg);
}

} // namespace

int text_poke_restore(uintptr_t lo, uintptr_t hi)
{
    return restore(lo, hi, nullptr, nullptr);
}

int text_poke_restore_all(text_poke_gate gate, void *gate_arg)
{
    return restore(0, UINTPTR_MAX, gate, gate_arg);
}

int process_thread_count()
{
    int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    char buf[1024];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return 0;
    buf[n] = 0;
    // Fields after the parenthesised comm: state is field 3, num_threads field 20.
    const char *p = std::strrchr(buf, ')');
    if (!p) return 0;
    int field = 2;
    for (++p; *p && field < 20; ++p)
        if (*p == ' ') ++field;
    return std::atoi(p);
}

void text_poke_sync()
{
    membarrier_everywhere(true);
}

bool text_poke_lock_free()
{
    if (!text_mutex.try_lock()) return false;
    text_mutex.unlock();
    return true;
}

int text_poke_early(uintptr_t addr, const void *bytes, size_t len)
{
    std::lock_guard<std::mutex> g(text_mutex);
    page_writer w;
    if (int err = w.open({{addr, len}})) return err;
    text_journal_note(addr, len);
    std::memcpy(reinterpret_cast<void *>(addr), bytes, len);
    w.close();
    return 0;
}

int text_poke_early(std::span<const text_poke_req> reqs)
{
    if (reqs.empty()) return 0;
    std::vector<std::pair<uintptr_t, size_t>> ranges;
    ranges.reserve(reqs.size());
    for (auto &r : reqs) {
        if (r.len == 0 || r.len > sizeof r.bytes) return -EINVAL;
        ranges.emplace_back(r.addr, r.len);
    }
    std::lock_guard<std::mutex> g(text_mutex);
    page_writer w;
    if (int err = w.open(ranges)) return err;
    for (auto &r : reqs) {
        text_journal_note(r.addr, r.len);
        std::memcpy(reinterpret_cast<void *>(r.addr), r.bytes, r.len);
    }
    w.close();
    return 0;
}

int text_poke_batch(std::span<text_poke_req> reqs)
{
    if (reqs.empty()) return 0;
    for (auto &r : reqs)
        if (r.len == 0 || r.len > sizeof r.bytes) return -EINVAL;
    std::lock_guard<std::mutex> g(text_mutex);
    std::sort(reqs.begin(), reqs.end(),
              [](const text_poke_req &a, const text_poke_req &b) { return a.addr < b.addr; });

    std::vector<std::pair<uintptr_t, size_t>> ranges;
    ranges.reserve(reqs.size());
    for (auto &r : reqs)
        ranges.emplace_back(r.addr, r.len);
    page_writer w;
    if (int err = w.open(ranges)) return err;
    for (auto &r : reqs)
        text_journal_note(r.addr, r.len);

    if (process_thread_count() == 1) {
        // Nobody else can be executing this code: plain copies.
        for (auto &r : reqs)
            std::memcpy(reinterpret_cast<void *>(r.addr), r.bytes, r.len);
        w.close();
        return 0;
    }

    signal_chain_add_hook(SIGTRAP, poke_int3_hook);
    active_count.store(reqs.size());
    active_reqs.store(reqs.data());

    bool need_protocol = false;
    for (auto &r : reqs) {
        if (fits_one_word(r)) {
            atomic_word_write(r);
        } else {
            remember_poked(r.addr);
            arch::text_poke_write_bp(r.addr);
            need_protocol = true;
        }
    }
    text_poke_sync();
    if (need_protocol) {
        for (auto &r : reqs)
            if (!fits_one_word(r) && r.len > 1)
                std::memcpy(reinterpret_cast<void *>(r.addr + 1), r.bytes + 1, r.len - 1);
        text_poke_sync();
        for (auto &r : reqs)
            if (!fits_one_word(r))
                __atomic_store_n(reinterpret_cast<uint8_t *>(r.addr), r.bytes[0], __ATOMIC_RELEASE);
        text_poke_sync();
    }
    active_reqs.store(nullptr);
    active_count.store(0);
    // A thread may have trapped just before the table went away and still be looking at it.
    while (hooks_in_flight.load() != 0)
        sched_yield();
    w.close();
    return 0;
}

} // namespace dprobe
