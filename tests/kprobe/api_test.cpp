// The rest of the kprobes API: errno results, the blacklist, aggregate probes, enable and
// disable, the global switch, get_kprobe, kprobe_busy, kprobes/list, [GONE] after dlclose,
// probes in libc, and FPROBE_FL_KPROBE_SHARED. The fixtures of targets.c are built with
// -pg -mfentry here, so kprobe_target has a patch site.
#include "targets.h"

#include "core/ftrace.h"
#include "kprobe/kprobe_internal.h"

#include <dprobe/fprobe.h>
#include <dprobe/kprobes.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <dlfcn.h>
#include <string>
#include <sys/syscall.h>
#include <unistd.h>
#include <vector>

extern "C" long insn_riprel(long, long);
extern "C" long insn_hot(long, long);

namespace
{

unsigned (*volatile target)(unsigned) = kprobe_target;
unsigned (*volatile target2)(unsigned) = kprobe_target2;
unsigned (*volatile nokprobe)(unsigned) = nokprobe_target;
long (*volatile hot)(long, long) = insn_hot;

std::atomic<int> hits;
std::vector<int> order; // written by handlers of the aggregate test (one thread)

int count_pre(struct kprobe *, struct pt_regs *)
{
    ++hits;
    return 0;
}

uintptr_t site_ip(void *fn)
{
    dprobe::ftrace_update_objects();
    dprobe::ftrace_site *s = dprobe::ftrace_location(reinterpret_cast<uintptr_t>(fn));
    return s ? s->ip : 0;
}

TEST(kprobe_api, errno_results)
{
    struct kprobe p = {};
    p.pre_handler = count_pre;
    EXPECT_EQ(-EINVAL, register_kprobe(&p)) << "neither addr nor symbol_name";
    p.symbol_name = "kprobe_target";
    p.addr = reinterpret_cast<kprobe_opcode_t *>(kprobe_target);
    EXPECT_EQ(-EINVAL, register_kprobe(&p)) << "both addr and symbol_name";

    p = {};
    p.symbol_name = "no_such_function_anywhere";
    EXPECT_EQ(-ENOENT, register_kprobe(&p));

    p = {};
    p.addr = reinterpret_cast<kprobe_opcode_t *>(insn_riprel) + 5; // inside mov rip_var(%rip)
    EXPECT_EQ(-EINVAL, register_kprobe(&p)) << "not an instruction boundary";

    p = {};
    static long some_data = 1;
    p.addr = reinterpret_cast<kprobe_opcode_t *>(&some_data);
    EXPECT_EQ(-EINVAL, register_kprobe(&p)) << "data, not code";

    // Inside a patch site's NOP: the kernel's -EILSEQ.
    const uintptr_t sip = site_ip(reinterpret_cast<void *>(kprobe_target));
    ASSERT_NE(0u, sip) << "targets.c is built with -pg -mfentry here";
    p = {};
    p.addr = reinterpret_cast<kprobe_opcode_t *>(sip + 2);
    EXPECT_EQ(-EILSEQ, register_kprobe(&p));

    // Registered twice.
    p = {};
    p.symbol_name = "insn_riprel";
    p.pre_handler = count_pre;
    ASSERT_EQ(0, register_kprobe(&p));
    EXPECT_EQ(-EEXIST, register_kprobe(&p));
    unregister_kprobe(&p);
    unregister_kprobe(&p); // not registered any more: harmless
    struct kprobe never = {};
    unregister_kprobe(&never);
    EXPECT_EQ(-EINVAL, enable_kprobe(&never));
    EXPECT_EQ(-EINVAL, disable_kprobe(&never));
    EXPECT_EQ(-EINVAL, register_kprobes(nullptr, 1));
    struct kprobe *none[1] = {&p};
    EXPECT_EQ(-EINVAL, register_kprobes(none, 0));
}

TEST(kprobe_api, symbol_offset_and_func_entry)
{
    struct kprobe p = {};
    p.symbol_name = "insn_riprel";
    p.offset = 11; // endbr64 (4) + mov rip_var(%rip),%rax (7)
    p.pre_handler = count_pre;
    ASSERT_EQ(0, register_kprobe(&p));
    EXPECT_EQ(reinterpret_cast<kprobe_opcode_t *>(insn_riprel) + 11, p.addr);
    EXPECT_FALSE(p.flags & KPROBE_FLAG_ON_FUNC_ENTRY);
    unregister_kprobe(&p);

    // Offset 0 of a function starting with endbr64 moves past it, as on x86 with IBT.
    p = {};
    p.symbol_name = "insn_riprel";
    ASSERT_EQ(0, register_kprobe(&p));
    EXPECT_EQ(reinterpret_cast<kprobe_opcode_t *>(insn_riprel) + 4, p.addr);
    EXPECT_TRUE(p.flags & KPROBE_FLAG_ON_FUNC_ENTRY);
    unregister_kprobe(&p);

    EXPECT_EQ(0, kprobe_on_func_entry(nullptr, "insn_riprel", 0));
    EXPECT_EQ(0, kprobe_on_func_entry(nullptr, "insn_riprel", 4));
    EXPECT_EQ(-EINVAL, kprobe_on_func_entry(nullptr, "insn_riprel", 11));
    EXPECT_EQ(-ENOENT, kprobe_on_func_entry(nullptr, "no_such_function_anywhere", 0));
}

TEST(kprobe_api, blacklist)
{
    struct kprobe p = {};
    p.symbol_name = "insn_riprel";
    ASSERT_EQ(0, register_kprobe(&p)); // dprobe's SIGTRAP handler is in place from here on
    unregister_kprobe(&p);
    p = {};
    p.pre_handler = count_pre;
    // dprobe's own hot path, its API, the no-probe section, NOKPROBE_SYMBOL, libc's
    // __errno_location and the signal return trampoline.
    std::vector<std::pair<const char *, uintptr_t>> banned = {
        {"dprobe_ftrace_entry", reinterpret_cast<uintptr_t>(dprobe_ftrace_entry)},
        {"register_kprobe", reinterpret_cast<uintptr_t>(register_kprobe)},
        {"kprobe_trap_hook", reinterpret_cast<uintptr_t>(dprobe::kp::kprobe_trap_hook)},
        {"kprobe_ftrace_entry", reinterpret_cast<uintptr_t>(dprobe::kp::kprobe_ftrace_entry)},
        {"nokprobe_target", reinterpret_cast<uintptr_t>(nokprobe_target)},
        {"__errno_location", reinterpret_cast<uintptr_t>(dlsym(RTLD_DEFAULT, "__errno_location"))},
    };
    // The restorer dprobe's SIGTRAP handler returns through (__restore_rt).
    struct {
        void *handler;
        unsigned long flags;
        void *restorer;
        unsigned long mask;
    } kact{};
    ASSERT_EQ(0, syscall(SYS_rt_sigaction, SIGTRAP, nullptr, &kact, sizeof kact.mask));
    ASSERT_NE(nullptr, kact.restorer);
    for (auto [name, addr] : banned) {
        SCOPED_TRACE(name);
        ASSERT_NE(0u, addr);
        EXPECT_TRUE(within_kprobe_blacklist(addr));
        p = {};
        p.addr = reinterpret_cast<kprobe_opcode_t *>(addr);
        p.pre_handler = count_pre;
        EXPECT_EQ(-EINVAL, register_kprobe(&p));
    }
    EXPECT_TRUE(within_kprobe_blacklist(reinterpret_cast<uintptr_t>(kact.restorer)));
    p = {};
    p.symbol_name = "nokprobe_target";
    EXPECT_EQ(-EINVAL, register_kprobe(&p));
    EXPECT_FALSE(within_kprobe_blacklist(reinterpret_cast<uintptr_t>(insn_riprel)));
    EXPECT_EQ(nokprobe(1), 8u);

    const std::string bl = dprobe::kprobes_blacklist_text();
    EXPECT_NE(std::string::npos, bl.find("\tnokprobe_target\n")) << bl;
    EXPECT_NE(std::string::npos, bl.find("\tdprobe_noprobe_text\n")) << bl;
    // "0x<16 hex>-0x<16 hex>\t<name>" per line.
    ASSERT_GT(bl.size(), 38u);
    EXPECT_EQ("0x", bl.substr(0, 2));
    EXPECT_EQ("-0x", bl.substr(18, 3));
    EXPECT_EQ('\t', bl[37]);
    EXPECT_EQ(std::string::npos, bl.substr(2, 16).find_first_not_of("0123456789abcdef"));
}

struct kprobe agg[3];

int agg_pre(struct kprobe *p, struct pt_regs *)
{
    order.push_back(static_cast<int>(p - agg) + 1);
    return 0;
}

int agg_pre_stop(struct kprobe *p, struct pt_regs *regs)
{
    order.push_back(static_cast<int>(p - agg) + 1);
    // Do the probed lea here and continue after it: the instruction is skipped.
    regs->ip = reinterpret_cast<unsigned long>(p->addr) + 4;
    regs->ax = static_cast<unsigned long>(regs->di + 2 * regs->si);
    return 1;
}

void agg_post(struct kprobe *p, struct pt_regs *, unsigned long)
{
    order.push_back(-(static_cast<int>(p - agg) + 1));
}

TEST(kprobe_api, aggregate_probes_share_one_arming_in_order)
{
    const auto at = reinterpret_cast<kprobe_opcode_t *>(insn_hot) + 4; // lea
    for (int i = 0; i < 3; ++i) {
        agg[i] = {};
        agg[i].addr = at;
        agg[i].pre_handler = agg_pre;
    }
    agg[1].post_handler = agg_post;
    ASSERT_EQ(0, register_kprobe(&agg[0]));
    ASSERT_EQ(0, register_kprobe(&agg[1]));
    ASSERT_EQ(0, register_kprobe(&agg[2]));
    EXPECT_EQ(&agg[0], get_kprobe(at));
    const unsigned long traps = dprobe::kp::stats().int3_hits.load();
    order.clear();
    EXPECT_EQ(1 + 2 * 2 + 1, hot(1, 2));
    EXPECT_EQ(traps + 1, dprobe::kp::stats().int3_hits.load()) << "one arming, one trap";
    EXPECT_EQ((std::vector<int>{1, 2, 3, -2}), order);

    // A disabled child is skipped; the others still run.
    EXPECT_EQ(0, disable_kprobe(&agg[1]));
    order.clear();
    hot(1, 2);
    EXPECT_EQ((std::vector<int>{1, 3}), order);
    EXPECT_EQ(0, enable_kprobe(&agg[1]));

    // Unregistering the middle keeps the order of the rest.
    unregister_kprobe(&agg[1]);
    order.clear();
    hot(1, 2);
    EXPECT_EQ((std::vector<int>{1, 3}), order);

    // A pre handler returning non-zero stops the chain and skips the instruction.
    agg[0].pre_handler = agg_pre_stop;
    order.clear();
    EXPECT_EQ(1 + 2 * 2 + 1, hot(1, 2));
    EXPECT_EQ((std::vector<int>{1}), order);
    agg[0].pre_handler = agg_pre;

    // All disabled: the address is disarmed (no trap).
    EXPECT_EQ(0, disable_kprobe(&agg[0]));
    EXPECT_EQ(0, disable_kprobe(&agg[2]));
    const unsigned long t2 = dprobe::kp::stats().int3_hits.load();
    order.clear();
    hot(1, 2);
    EXPECT_TRUE(order.empty());
    EXPECT_EQ(t2, dprobe::kp::stats().int3_hits.load());
    unregister_kprobe(&agg[0]);
    unregister_kprobe(&agg[2]);
    EXPECT_EQ(nullptr, get_kprobe(at));
}

TEST(kprobe_api, batch_registration_rolls_back)
{
    struct kprobe a = {}, bad = {}, c = {};
    a.symbol_name = "kprobe_target2";
    a.pre_handler = count_pre;
    bad.symbol_name = "no_such_function_anywhere";
    c.symbol_name = "insn_riprel";
    c.pre_handler = count_pre;
    struct kprobe *kps[3] = {&a, &bad, &c};
    EXPECT_EQ(-ENOENT, register_kprobes(kps, 3));
    hits = 0;
    target2(9);
    insn_riprel(1, 2);
    EXPECT_EQ(0, hits.load()) << "the first probe was not rolled back";
    EXPECT_EQ(-EINVAL, enable_kprobe(&a));
    // The same structs register fine once cleared (KP_CLEAR in the kernel's test).
    a.addr = nullptr;
    a.flags = 0;
    struct kprobe *good[1] = {&a};
    ASSERT_EQ(0, register_kprobes(good, 1));
    target2(9);
    EXPECT_EQ(1, hits.load());
    unregister_kprobes(good, 1);
}

TEST(kprobe_api, disabled_at_registration_and_global_switch)
{
    struct kprobe p = {};
    p.symbol_name = "kprobe_target";
    p.pre_handler = count_pre;
    p.flags = KPROBE_FLAG_DISABLED | KPROBE_FLAG_GONE | KPROBE_FLAG_OPTIMIZED;
    ASSERT_EQ(0, register_kprobe(&p));
    EXPECT_EQ(unsigned(KPROBE_FLAG_DISABLED),
              p.flags & ~unsigned(KPROBE_FLAG_ON_FUNC_ENTRY | KPROBE_FLAG_FTRACE));
    hits = 0;
    target(9);
    EXPECT_EQ(0, hits.load());
    EXPECT_EQ(0, enable_kprobe(&p));
    target(9);
    EXPECT_EQ(1, hits.load());

    EXPECT_EQ(1, kprobes_enabled());
    EXPECT_EQ(0, kprobes_set_enabled(0));
    EXPECT_EQ(0, kprobes_enabled());
    target(9);
    EXPECT_EQ(1, hits.load());
    EXPECT_FALSE(kprobe_disabled(&p)) << "the global switch keeps the probe's own state";
    EXPECT_EQ(0, kprobes_set_enabled(1));
    target(9);
    EXPECT_EQ(2, hits.load());
    unregister_kprobe(&p);
}

TEST(kprobe_api, busy_marks_hits_missed)
{
    struct kprobe p = {};
    p.symbol_name = "insn_riprel";
    p.pre_handler = count_pre;
    ASSERT_EQ(0, register_kprobe(&p));
    hits = 0;
    EXPECT_EQ(nullptr, kprobe_running());
    kprobe_busy_begin();
    EXPECT_NE(nullptr, kprobe_running());
    insn_riprel(1, 2);
    kprobe_busy_end();
    EXPECT_EQ(nullptr, kprobe_running());
    EXPECT_EQ(0, hits.load());
    EXPECT_EQ(1u, p.nmissed);
    insn_riprel(1, 2);
    EXPECT_EQ(1, hits.load());
    unregister_kprobe(&p);
}

TEST(kprobe_api, list_text)
{
    struct kprobe k1 = {}, k2 = {};
    struct kretprobe r1 = {};
    k1.symbol_name = "insn_riprel";
    k1.offset = 11;
    k1.pre_handler = count_pre;
    k2.symbol_name = "kprobe_target"; // a patch site: [FTRACE]
    k2.pre_handler = count_pre;
    r1.kp.symbol_name = "kprobe_target2";
    r1.handler = [](struct kretprobe_instance *, struct pt_regs *) { return 0; };
    ASSERT_EQ(0, register_kprobe(&k1));
    ASSERT_EQ(0, register_kprobe(&k2));
    ASSERT_EQ(0, register_kretprobe(&r1));
    ASSERT_EQ(0, disable_kprobe(&k1));
    const std::string text = dprobe::kprobes_list_text();
    char want[128];
    std::snprintf(want, sizeof want, "%016lx  k  insn_riprel+0xb    [DISABLED]\n",
                  reinterpret_cast<unsigned long>(k1.addr));
    EXPECT_NE(std::string::npos, text.find(want)) << text;
    std::snprintf(want, sizeof want, "%016lx  k  kprobe_target+0x%lx    [FTRACE]\n",
                  reinterpret_cast<unsigned long>(k2.addr),
                  reinterpret_cast<unsigned long>(k2.addr) -
                      reinterpret_cast<unsigned long>(kprobe_target));
    EXPECT_NE(std::string::npos, text.find(want)) << text;
    std::snprintf(want, sizeof want, "%016lx  r  kprobe_target2+0x%lx    [FTRACE]\n",
                  reinterpret_cast<unsigned long>(r1.kp.addr),
                  reinterpret_cast<unsigned long>(r1.kp.addr) -
                      reinterpret_cast<unsigned long>(kprobe_target2));
    EXPECT_NE(std::string::npos, text.find(want)) << text;
    unregister_kprobe(&k1);
    unregister_kprobe(&k2);
    unregister_kretprobe(&r1);
    EXPECT_EQ(std::string::npos, dprobe::kprobes_list_text().find("insn_riprel")) << "unregistered";
}

TEST(kprobe_api, probe_in_libc_and_ifunc)
{
    struct kprobe p = {};
    p.symbol_name = "libc:getpid";
    p.pre_handler = count_pre;
    ASSERT_EQ(0, register_kprobe(&p));
    hits = 0;
    const pid_t pid = getpid();
    EXPECT_EQ(static_cast<pid_t>(syscall(SYS_getpid)), pid);
    EXPECT_EQ(1, hits.load());
    EXPECT_NE(std::string::npos, dprobe::kprobes_list_text().find("  k  getpid+0x"));
    EXPECT_NE(std::string::npos, dprobe::kprobes_list_text().find(" libc.so.6 "));
    unregister_kprobe(&p);

    // An IFUNC symbol resolves to the implementation the program calls.
    p = {};
    p.symbol_name = "strlen";
    p.pre_handler = count_pre;
    ASSERT_EQ(0, register_kprobe(&p));
    size_t (*volatile len)(const char *) = strlen;
    hits = 0;
    EXPECT_EQ(5u, len("hello"));
    EXPECT_GE(hits.load(), 1);
    unregister_kprobe(&p);
}

TEST(kprobe_api, gone_after_dlclose)
{
    void *h = dlopen(KPROBE_DL_LIB, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(nullptr, h) << dlerror();
    auto fn = reinterpret_cast<unsigned long (*)(unsigned long)>(dlsym(h, "dl_target"));
    ASSERT_NE(nullptr, fn);
    struct kprobe p = {};
    p.symbol_name = "libkprobe_dl:dl_target";
    p.pre_handler = count_pre;
    ASSERT_EQ(0, register_kprobe(&p));
    hits = 0;
    EXPECT_EQ(21u, fn(7));
    EXPECT_EQ(1, hits.load());
    std::string text = dprobe::kprobes_list_text();
    const std::string line =
        "  k  dl_target+0x" +
        std::to_string(reinterpret_cast<uintptr_t>(p.addr) - reinterpret_cast<uintptr_t>(fn)) +
        "  libkprobe_dl.so ";
    // (Jump-optimized when the region allows it, as in the kernel's list.)
    EXPECT_NE(std::string::npos,
              text.find(line + (kprobe_optimized(&p) ? "[OPTIMIZED]" : "") + "\n"))
        << text;
    ASSERT_EQ(0, dlclose(h));
    text = dprobe::kprobes_list_text();
    EXPECT_NE(std::string::npos, text.find(line + "[GONE]\n")) << text;
    EXPECT_TRUE(kprobe_gone(&p));
    EXPECT_EQ(-EINVAL, enable_kprobe(&p));
    unregister_kprobe(&p); // never writes to the unmapped code
    EXPECT_EQ(std::string::npos, dprobe::kprobes_list_text().find("dl_target"));
}

// FPROBE_FL_KPROBE_SHARED: such an fprobe's handler does not run inside a kprobe handler and
// counts a miss; a plain fprobe runs there as in the kernel.
std::atomic<int> fp_hits;
int fp_entry(struct fprobe *, unsigned long, unsigned long, struct ftrace_regs *, void *)
{
    ++fp_hits;
    return 0;
}

int calls_target2(struct kprobe *, struct pt_regs *)
{
    ++hits;
    target2(5);
    return 0;
}

TEST(kprobe_api, fprobe_kprobe_shared)
{
    for (bool shared : {true, false}) {
        SCOPED_TRACE(shared ? "shared" : "plain");
        struct fprobe fp = {};
        fp.entry_handler = fp_entry;
        fp.flags = shared ? FPROBE_FL_KPROBE_SHARED : 0;
        ASSERT_EQ(0, register_fprobe(&fp, "kprobe_target2", nullptr));
        struct kprobe p = {};
        p.symbol_name = "insn_riprel";
        p.pre_handler = calls_target2;
        ASSERT_EQ(0, register_kprobe(&p));
        hits = 0;
        fp_hits = 0;
        insn_riprel(1, 2);
        EXPECT_EQ(1, hits.load());
        EXPECT_EQ(shared ? 0 : 1, fp_hits.load());
        EXPECT_EQ(shared ? 1u : 0u, fp.nmissed);
        target2(5); // outside a kprobe handler both run
        EXPECT_EQ(shared ? 1 : 2, fp_hits.load());
        unregister_kprobe(&p);
        unregister_fprobe(&fp);
    }
}

} // namespace
