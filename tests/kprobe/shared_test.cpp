// kprobes through libdprobe.so (the way programs link it): probes fire, the library itself is
// on the blacklist as a whole, and the list names objects.
#include "targets.h"

#include <dprobe/kprobes.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <dlfcn.h>
#include <link.h>
#include <string>

namespace
{

unsigned (*volatile target)(unsigned) = kprobe_target;
std::atomic<int> hits;

int count_pre(struct kprobe *p, struct pt_regs *regs)
{
    if (regs->ip == reinterpret_cast<unsigned long>(p->addr) + 1) ++hits;
    return 0;
}

int count_ret(struct kretprobe_instance *, struct pt_regs *regs)
{
    if (regs_return_value(regs) == 30 / DIV_FACTOR) ++hits;
    return 0;
}

TEST(kprobe_shared, probes_fire_through_the_shared_library)
{
    struct kprobe p = {};
    p.symbol_name = "kprobe_target";
    p.pre_handler = count_pre;
    p.post_handler = [](struct kprobe *, struct pt_regs *, unsigned long) {};
    struct kretprobe rp = {};
    rp.kp.symbol_name = "kprobe_target";
    rp.handler = count_ret;
    ASSERT_EQ(0, register_kprobe(&p));
    ASSERT_EQ(0, register_kretprobe(&rp));
    hits = 0;
    EXPECT_EQ(10u, target(30));
    EXPECT_EQ(2, hits.load());
    unregister_kretprobe(&rp);
    unregister_kprobe(&p);
    EXPECT_EQ(10u, target(30));
    EXPECT_EQ(2, hits.load());
}

TEST(kprobe_shared, the_library_is_blacklisted_as_a_whole)
{
    // Any address in libdprobe's code, exported or not.
    void *api = dlsym(RTLD_DEFAULT, "register_kprobe");
    ASSERT_NE(nullptr, api);
    Dl_info info{};
    ASSERT_NE(0, dladdr(api, &info));
    EXPECT_NE(std::string::npos, std::string(info.dli_fname).find("libdprobe"));
    struct kprobe p = {};
    p.addr = static_cast<kprobe_opcode_t *>(api);
    EXPECT_EQ(-EINVAL, register_kprobe(&p));
    EXPECT_TRUE(within_kprobe_blacklist(reinterpret_cast<unsigned long>(api)));
    EXPECT_TRUE(within_kprobe_blacklist(
        reinterpret_cast<unsigned long>(dlsym(RTLD_DEFAULT, "kprobe_running"))));
    EXPECT_FALSE(within_kprobe_blacklist(reinterpret_cast<unsigned long>(kprobe_target)));
    const std::string bl = dprobe::kprobes_blacklist_text();
    EXPECT_NE(std::string::npos, bl.find("\tlibdprobe.so")) << bl;
}

} // namespace
