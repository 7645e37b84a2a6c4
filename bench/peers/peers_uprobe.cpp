// Kernel uprobes and uretprobes on the same instructions dprobe probes (this program's own
// copy of the plain workload), created through libtracefs and enabled in a private tracefs
// instance so their records do not land in the main buffer. Hits are read back from the
// kernel's uprobe_profile.
#include "bench/peers/peers.h"

#include "bench/peers/uprobe_tracefs.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <link.h>
#include <climits>
#include <cerrno>
#include <unistd.h>

namespace peers
{

namespace
{

std::string &exe_path()
{
    static std::string s;
    return s;
}

// File offset of ADDR in this executable (what uprobe_events wants: PATH:0xOFFSET).
struct offset_query {
    uintptr_t addr;
    long long off = -1;
};

int find_offset(struct dl_phdr_info *info, size_t, void *arg)
{
    auto *q = static_cast<offset_query *>(arg);
    for (int i = 0; i < info->dlpi_phnum; ++i) {
        const ElfW(Phdr) &ph = info->dlpi_phdr[i];
        uintptr_t start = info->dlpi_addr + ph.p_vaddr;
        if (ph.p_type == PT_LOAD && q->addr >= start && q->addr < start + ph.p_filesz) {
            q->off = static_cast<long long>(q->addr - start + ph.p_offset);
            return 1;
        }
    }
    return 1; // the main program comes first: only it is searched
}

long long file_offset(const void *addr)
{
    offset_query q{reinterpret_cast<uintptr_t>(addr)};
    dl_iterate_phdr(find_offset, &q);
    return q.off;
}

// Why kernel uprobes cannot be measured here, or "".
std::string unavailable()
{
    if (geteuid() != 0) return "needs root (uprobe_events is root-only)";
    const char *dir = peers_tracefs_dir(); // mounts tracefs when it is not
    if (!dir) return "tracefs is not mounted and could not be mounted";
    if (access((std::string(dir) + "/uprobe_events").c_str(), W_OK) != 0)
        return "the kernel has no uprobe_events (CONFIG_UPROBE_EVENTS)";
    char buf[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n <= 0) return "cannot read /proc/self/exe";
    exe_path().assign(buf, static_cast<size_t>(n));
    return "";
}

void add_uprobe(std::vector<mode> &modes, const std::string &why_not, const char *key,
                const char *name, const char *match, const char *event, const void *addr, bool ret,
                const char *fetchargs, unsigned long calls)
{
    mode m;
    m.tool = "kernel uprobe";
    m.key = key;
    m.name = name;
    m.match = match;
    m.calls = calls;
    m.untraced = m.traced = caller_plain;
    m.skipped = why_not;
    if (m.skipped.empty()) {
        long long off = file_offset(addr);
        if (off < 0)
            m.skipped = "no file offset for the probed address";
        else if (peers_uprobe_create(event, exe_path().c_str(),
                                     static_cast<unsigned long long>(off), ret, fetchargs) != 0)
            m.skipped = std::string("creating the uprobe failed: ") + std::strerror(errno);
    }
    std::string ev = event;
    m.arm = [ev]() -> std::string {
        return peers_uprobe_enable(ev.c_str(), 1) ? "enabling the uprobe event failed" : "";
    };
    m.disarm = [ev] { peers_uprobe_enable(ev.c_str(), 0); };
    m.hits = [ev] { return peers_uprobe_hits(exe_path().c_str(), ev.c_str()); };
    modes.push_back(std::move(m));
}

} // namespace

void add_uprobe_modes(std::vector<mode> &modes, double scale)
{
    auto n = [scale](double c) { return static_cast<unsigned long>(std::max(100.0, c * scale)); };
    std::string why = unavailable();
    add_uprobe(modes, why, "uprobe_nop", "uprobe on the 5-byte NOP", "kprobe_opt_nop", "nop",
               leaf_plain_nop, false, nullptr, n(1e5));
    add_uprobe(modes, why, "uprobe_insn", "uprobe on ordinary instructions (lea; imul)",
               "kprobe_opt", "insn", leaf_plain_insn, false, nullptr, n(1e4));
    add_uprobe(modes, why, "uretprobe", "uretprobe", "kretprobe", "ret",
               reinterpret_cast<const void *>(leaf_plain), true, nullptr, n(5e4));
    add_uprobe(modes, why, "uprobe_event", "uprobe on the NOP, 2 fetch args", "event", "nop_args",
               leaf_plain_nop, false, "x=%di:u64 y=%si:u32" /* $arg1 $arg2 */, n(1e5));
}

void uprobe_cleanup()
{
    peers_uprobe_destroy_all();
}

} // namespace peers
