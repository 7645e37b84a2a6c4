// register_kprobes() arms its probes in one batch (kprobe/kprobe_arm.cpp): a batch that fails
// in the middle leaves nothing behind; one batch mixes probes riding on patch sites,
// jump-optimized probes, int3 probes, probes sharing an address and probes inside another's
// region, each armed as it would be alone; threads keep running the probed code, with right
// results and no handler after unregister returns, while batches are armed and disarmed.
#include <dprobe/kprobes.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

extern "C" {
extern unsigned long (*const batch_site_fns[])(unsigned long);
extern unsigned long (*const batch_plain_fns[])(unsigned long);
extern const unsigned batch_nfuncs;
}

namespace
{

using fn = unsigned long (*)(unsigned long);

unsigned long want_site(unsigned n, unsigned long x)
{
    return (x + n + 1) * 3;
}
unsigned long want_plain(unsigned n, unsigned long x)
{
    return (x + n + 1) * 3 + 1;
}

kprobe_opcode_t *site_at(unsigned n, unsigned off)
{
    return reinterpret_cast<kprobe_opcode_t *>(batch_site_fns[n]) + off;
}
kprobe_opcode_t *plain_at(unsigned n, unsigned off)
{
    return reinterpret_cast<kprobe_opcode_t *>(batch_plain_fns[n]) + off;
}

// Calls every function once with X through a volatile pointer; returns the wrong results.
unsigned long call_all(unsigned long x)
{
    unsigned long wrong = 0;
    for (unsigned n = 0; n < batch_nfuncs; ++n) {
        fn volatile s = batch_site_fns[n], p = batch_plain_fns[n];
        wrong += s(x) != want_site(n, x);
        wrong += p(x) != want_plain(n, x);
    }
    return wrong;
}

// The bytes of every function (and the padding after it): nothing may stay changed.
std::vector<uint8_t> code_bytes()
{
    std::vector<uint8_t> v;
    for (unsigned n = 0; n < batch_nfuncs; ++n)
        for (fn f : {batch_site_fns[n], batch_plain_fns[n]}) {
            const auto *p = reinterpret_cast<const uint8_t *>(f);
            v.insert(v.end(), p, p + 32);
        }
    return v;
}

// Hits per probe: each probe of a test is an element of one array, its index found from
// its address.
struct probe_set {
    std::vector<struct kprobe> kps;
    std::vector<struct kprobe *> ptrs;
    std::vector<std::atomic<unsigned long>> pre, post;
    explicit probe_set(size_t n) : kps(n), ptrs(n), pre(n), post(n)
    {
        for (size_t i = 0; i < n; ++i)
            ptrs[i] = &kps[i];
    }
    int num() const { return static_cast<int>(kps.size()); }
    unsigned long total_pre() const
    {
        unsigned long t = 0;
        for (const auto &h : pre)
            t += h.load();
        return t;
    }
    unsigned long total_post() const
    {
        unsigned long t = 0;
        for (const auto &h : post)
            t += h.load();
        return t;
    }
    void reset()
    {
        for (auto &h : pre)
            h = 0;
        for (auto &h : post)
            h = 0;
    }
};

probe_set *current;                      // the set the handlers count into
std::atomic<bool> armed_now{false};      // registration returned, unregistration did not
std::atomic<unsigned long> late_hits{0}; // handlers that ran after unregister returned
std::atomic<unsigned long> bad_ip{0};

int pre_handler(struct kprobe *p, struct pt_regs *regs)
{
    if (!armed_now.load()) late_hits.fetch_add(1);
    if (regs->ip != reinterpret_cast<unsigned long>(p->addr) + 1) bad_ip.fetch_add(1);
    current->pre[static_cast<size_t>(p - current->kps.data())].fetch_add(1);
    return 0;
}

void post_handler(struct kprobe *p, struct pt_regs *, unsigned long)
{
    current->post[static_cast<size_t>(p - current->kps.data())].fetch_add(1);
}

void set_probe(probe_set &s, size_t i, kprobe_opcode_t *at, bool post = false)
{
    s.kps[i] = {};
    s.kps[i].addr = at;
    s.kps[i].pre_handler = pre_handler;
    if (post) s.kps[i].post_handler = post_handler;
}

bool listed(const std::string &list, const struct kprobe &p)
{
    char addr[32];
    std::snprintf(addr, sizeof addr, "%016lx", reinterpret_cast<unsigned long>(p.addr));
    return list.find(addr) != std::string::npos;
}

TEST(kprobe_batch, failure_in_the_middle_rolls_back_every_kind)
{
    const auto before = code_bytes();
    // Twelve good probes of every kind, the bad one (inside a patch site's NOP: -EILSEQ),
    // then more good ones that are never reached.
    probe_set s(16);
    for (unsigned i = 0; i < 4; ++i) {
        set_probe(s, i, site_at(i, 0));            // on the patch site
        set_probe(s, 4 + i, site_at(4 + i, 5));    // optimized
        set_probe(s, 8 + i, plain_at(i, 1), true); // int3 with a post handler
    }
    set_probe(s, 12, site_at(20, 2));
    for (unsigned i = 13; i < 16; ++i)
        set_probe(s, i, plain_at(i, 0));
    current = &s;
    armed_now = true;
    EXPECT_EQ(-EILSEQ, register_kprobes(s.ptrs.data(), s.num()));
    EXPECT_EQ(before, code_bytes()) << "armed bytes left behind";
    EXPECT_EQ(0UL, call_all(7));
    EXPECT_EQ(0UL, s.total_pre() + s.total_post());
    for (const struct kprobe &p : s.kps)
        EXPECT_EQ(nullptr, get_kprobe(p.addr));
    const std::string list = dprobe::kprobes_list_text();
    for (const struct kprobe &p : s.kps)
        EXPECT_FALSE(listed(list, p)) << list;
    EXPECT_EQ(-EINVAL, enable_kprobe(&s.kps[0])) << "still registered";

    // The same struct twice in one batch: -EEXIST at the second, the first rolled back.
    probe_set d(3);
    set_probe(d, 0, site_at(30, 5));
    set_probe(d, 1, plain_at(30, 0));
    struct kprobe *twice[4] = {&d.kps[0], &d.kps[1], &d.kps[0], &d.kps[2]};
    set_probe(d, 2, plain_at(31, 0));
    current = &d;
    EXPECT_EQ(-EEXIST, register_kprobes(twice, 4));
    EXPECT_EQ(before, code_bytes());
    EXPECT_EQ(0UL, call_all(7));
    EXPECT_EQ(0UL, d.total_pre());

    // Without the bad one, the same structs register (cleared, as the kernel's KP_CLEAR).
    current = &s;
    set_probe(s, 12, site_at(20, 5));
    for (size_t i = 0; i < s.kps.size(); ++i)
        s.kps[i].flags = 0;
    ASSERT_EQ(0, register_kprobes(s.ptrs.data(), s.num()));
    EXPECT_EQ(0UL, call_all(7));
    for (size_t i = 0; i < s.kps.size(); ++i)
        EXPECT_EQ(1UL, s.pre[i].load()) << "probe " << i;
    unregister_kprobes(s.ptrs.data(), s.num());
    armed_now = false;
    EXPECT_EQ(before, code_bytes());
    EXPECT_EQ(0UL, late_hits.load());
    EXPECT_EQ(0UL, bad_ip.load());
}

TEST(kprobe_batch, one_batch_mixes_sites_optimized_int3_aggregates_and_regions)
{
    const auto before = code_bytes();
    constexpr unsigned k = 8;
    probe_set s(7 * k);
    for (unsigned i = 0; i < k; ++i) {
        set_probe(s, i, site_at(i, 0));          // [FTRACE]
        set_probe(s, k + i, site_at(k + i, 5));  // [OPTIMIZED]
        set_probe(s, 2 * k + i, plain_at(i, 0)); // [OPTIMIZED], two at one address
        set_probe(s, 3 * k + i, plain_at(i, 0));
        set_probe(s, 4 * k + i, plain_at(k + i, 1), true); // int3: a post handler
        // An entry probe with another probe inside its region: the entry stays int3, the
        // inner one is optimized.
        set_probe(s, 5 * k + i, plain_at(2 * k + i, 0));
        set_probe(s, 6 * k + i, plain_at(2 * k + i, 4));
    }
    current = &s;
    armed_now = true;
    ASSERT_EQ(0, register_kprobes(s.ptrs.data(), s.num()));
    for (unsigned i = 0; i < k; ++i) {
        EXPECT_TRUE(kprobe_ftrace(&s.kps[i]));
        EXPECT_TRUE(kprobe_optimized(&s.kps[k + i]))
            << dprobe::kprobe_optimization_status(&s.kps[k + i]);
        EXPECT_TRUE(kprobe_optimized(&s.kps[2 * k + i]));
        EXPECT_TRUE(kprobe_optimized(&s.kps[3 * k + i]));
        EXPECT_EQ(&s.kps[2 * k + i], get_kprobe(plain_at(i, 0)));
        EXPECT_FALSE(kprobe_optimized(&s.kps[4 * k + i]));
        EXPECT_FALSE(kprobe_optimized(&s.kps[5 * k + i]));
        EXPECT_TRUE(kprobe_optimized(&s.kps[6 * k + i]));
    }
    const std::string list = dprobe::kprobes_list_text();
    for (unsigned i = 0; i < k; ++i)
        EXPECT_NE(std::string::npos,
                  list.find("batch_site_" + std::to_string(k + i) + "+0x5    [OPTIMIZED]"))
            << list;

    EXPECT_EQ(0UL, call_all(11));
    for (size_t i = 0; i < s.kps.size(); ++i)
        EXPECT_EQ(1UL, s.pre[i].load()) << "probe " << i;
    EXPECT_EQ(k, s.total_post());

    // Disabled and enabled again in batches: the disabled ones stay quiet.
    std::vector<struct kprobe *> half(s.ptrs.begin(), s.ptrs.begin() + 4 * k);
    ASSERT_EQ(0, disable_kprobes(half.data(), static_cast<int>(half.size())));
    EXPECT_FALSE(kprobe_optimized(&s.kps[k])) << "a disabled probe is not optimized";
    s.reset();
    EXPECT_EQ(0UL, call_all(12));
    EXPECT_EQ(3 * k, s.total_pre());
    ASSERT_EQ(0, enable_kprobes(half.data(), static_cast<int>(half.size())));
    EXPECT_TRUE(kprobe_optimized(&s.kps[k]));
    s.reset();
    EXPECT_EQ(0UL, call_all(13));
    EXPECT_EQ(7 * k, s.total_pre());

    unregister_kprobes(s.ptrs.data(), s.num());
    armed_now = false;
    EXPECT_EQ(before, code_bytes()) << "unregister_kprobes left bytes behind";
    s.reset();
    EXPECT_EQ(0UL, call_all(14));
    EXPECT_EQ(0UL, s.total_pre());
    EXPECT_EQ(0UL, late_hits.load());
    EXPECT_EQ(0UL, bad_ip.load());
}

std::atomic<unsigned long> ret_hits{0};
int ret_handler(struct kretprobe_instance *, struct pt_regs *)
{
    ret_hits.fetch_add(1);
    return 0;
}

TEST(kprobe_batch, kretprobes_register_as_one_batch)
{
    const auto before = code_bytes();
    constexpr unsigned k = 6;
    std::vector<struct kretprobe> rps(2 * k + 1);
    std::vector<struct kretprobe *> ptrs;
    for (unsigned i = 0; i < 2 * k; ++i) {
        rps[i].kp.addr = i < k ? site_at(40 + i, 0) : plain_at(40 + i - k, 0);
        rps[i].handler = ret_handler;
        ptrs.push_back(&rps[i]);
    }
    // A bad one last: everything before it is rolled back.
    rps[2 * k].kp.symbol_name = "no_such_function_for_kretprobes";
    rps[2 * k].handler = ret_handler;
    ptrs.push_back(&rps[2 * k]);
    EXPECT_EQ(-ENOENT, register_kretprobes(ptrs.data(), static_cast<int>(ptrs.size())));
    EXPECT_EQ(before, code_bytes());
    EXPECT_EQ(0UL, call_all(3));
    EXPECT_EQ(0UL, ret_hits.load());
    for (unsigned i = 0; i < 2 * k; ++i)
        EXPECT_EQ(nullptr, rps[i].rh) << "kretprobe " << i << " kept its instances";

    for (unsigned i = 0; i < 2 * k; ++i)
        rps[i].kp.flags = 0;
    ASSERT_EQ(0, register_kretprobes(ptrs.data(), static_cast<int>(2 * k)));
    for (unsigned i = 0; i < k; ++i)
        EXPECT_TRUE(kprobe_ftrace(&rps[i].kp));
    EXPECT_EQ(0UL, call_all(3));
    EXPECT_EQ(2UL * k, ret_hits.load());
    unregister_kretprobes(ptrs.data(), static_cast<int>(2 * k));
    EXPECT_EQ(before, code_bytes());
    EXPECT_EQ(0UL, call_all(3));
    EXPECT_EQ(2UL * k, ret_hits.load());
}

TEST(kprobe_batch, threads_run_the_code_while_batches_arm_and_disarm)
{
    const auto before = code_bytes();
    std::atomic<bool> stop{false};
    std::atomic<unsigned long> wrong{0}, passes{0};
    std::vector<std::thread> ts;
    for (unsigned t = 0; t < 3; ++t)
        ts.emplace_back([&, t] {
            for (unsigned long x = t; !stop.load(std::memory_order_relaxed); x += 3) {
                wrong.fetch_add(call_all(x));
                passes.fetch_add(1);
            }
        });
    // Every kind at once, on every function; int3 ones with and without a post handler.
    const unsigned n = batch_nfuncs;
    probe_set s(4 * n);
    for (unsigned i = 0; i < n; ++i) {
        set_probe(s, i, site_at(i, 0));
        set_probe(s, n + i, site_at(i, 5));
        set_probe(s, 2 * n + i, plain_at(i, 0), i % 2 == 0);
        set_probe(s, 3 * n + i, plain_at(i, 4));
    }
    current = &s;
    for (int round = 0; round < 12; ++round) {
        s.reset();
        armed_now = true;
        ASSERT_EQ(0, register_kprobes(s.ptrs.data(), s.num()));
        // Every probe fires once the batch is armed.
        const unsigned long p0 = passes.load();
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
        while (passes.load() < p0 + 6 && std::chrono::steady_clock::now() < deadline)
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        for (size_t i = 0; i < s.kps.size(); ++i)
            ASSERT_GT(s.pre[i].load(), 0UL) << "round " << round << " probe " << i;
        unregister_kprobes(s.ptrs.data(), s.num());
        armed_now = false;
        // Handlers that still run from here on are late (counted by pre_handler).
        const unsigned long p1 = passes.load();
        while (passes.load() < p1 + 3 && std::chrono::steady_clock::now() < deadline)
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    stop = true;
    for (auto &t : ts)
        t.join();
    EXPECT_EQ(0UL, wrong.load());
    EXPECT_EQ(0UL, late_hits.load());
    EXPECT_EQ(0UL, bad_ip.load());
    EXPECT_EQ(before, code_bytes());
}

} // namespace
