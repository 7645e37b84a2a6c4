// Objects loaded only for dprobe (core/self_objects): the DT_NEEDED walk on made-up object
// graphs, and the dynamic section read from this process's real objects.
#include "core/self_objects.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

using namespace dprobe;

namespace
{

std::shared_ptr<loaded_object> obj(const std::string &soname, std::vector<std::string> needed,
                                   bool is_main = false)
{
    static uint64_t next_id = 1000;
    auto o = std::make_shared<loaded_object>();
    o->id = next_id++;
    o->name = is_main ? "prog" : soname;
    o->soname = is_main ? "" : soname;
    o->needed = std::move(needed);
    o->is_main = is_main;
    return o;
}

std::vector<std::string> names(const std::vector<object_ptr> &v)
{
    std::vector<std::string> out;
    for (const object_ptr &o : v)
        out.push_back(o->name);
    std::sort(out.begin(), out.end());
    return out;
}

} // namespace

TEST(SelfObjects, OnlyWhatNothingElseNeeds)
{
    // prog -> libc, libfoo; libfoo -> libstdc++; the agent -> Zydis (-> Zycore), libfuse3,
    // libstdc++, libc; plugin (dlopen'ed, nobody's DT_NEEDED) -> liburcu.
    auto prog = obj("", {"libc.so.6", "libfoo.so"}, true);
    auto libc = obj("libc.so.6", {"ld-linux-x86-64.so.2"});
    auto ld = obj("ld-linux-x86-64.so.2", {});
    auto foo = obj("libfoo.so", {"libstdc++.so.6", "libc.so.6"});
    auto cxx = obj("libstdc++.so.6", {"libc.so.6"});
    auto agent = obj("libdprobe-preload.so", {"libZydis.so.4", "libfuse3.so.3", "liburcu.so.8",
                                              "libstdc++.so.6", "libc.so.6"});
    auto zydis = obj("libZydis.so.4", {"libZycore.so.1", "libc.so.6"});
    auto zycore = obj("libZycore.so.1", {"libc.so.6"});
    auto fuse = obj("libfuse3.so.3", {"libc.so.6"});
    auto urcu = obj("liburcu.so.8", {"libc.so.6"});
    auto plugin = obj("plugin.so", {"liburcu.so.8"});
    std::vector<object_ptr> all = {prog,  agent,  libc, ld,   foo,   cxx,
                                   zydis, zycore, fuse, urcu, plugin};
    EXPECT_EQ(names(objects_only_for(agent, all)),
              (std::vector<std::string>{"libZycore.so.1", "libZydis.so.4", "libfuse3.so.3"}));
    // Without the plugin, liburcu is the agent's alone; without libfoo, so is libstdc++.
    std::vector<object_ptr> fewer = {prog, agent, libc, ld, cxx, zydis, zycore, fuse, urcu};
    prog->needed = {"libc.so.6"};
    EXPECT_EQ(names(objects_only_for(agent, fewer)),
              (std::vector<std::string>{"libZycore.so.1", "libZydis.so.4", "libfuse3.so.3",
                                        "libstdc++.so.6", "liburcu.so.8"}));
}

TEST(SelfObjects, ThroughTheProgramsOwnLinkToDprobe)
{
    // A program linked with libdprobe.so: the walk from the program stops at dprobe, so
    // dprobe's own libraries stay dprobe's.
    auto prog = obj("", {"libdprobe.so.0", "libc.so.6"}, true);
    auto dp = obj("libdprobe.so.0", {"libZydis.so.4", "libc.so.6"});
    auto zydis = obj("libZydis.so.4", {"libc.so.6"});
    auto libc = obj("libc.so.6", {});
    std::vector<object_ptr> all = {prog, dp, zydis, libc};
    EXPECT_EQ(names(objects_only_for(dp, all)), (std::vector<std::string>{"libZydis.so.4"}));
    // dprobe linked into the program itself: its libraries are the program's.
    EXPECT_TRUE(objects_only_for(prog, all).empty());
    EXPECT_TRUE(objects_only_for(nullptr, all).empty());
}

TEST(SelfObjects, DynamicSectionOfThisProcess)
{
    auto objs = kallsyms::instance().objects();
    ASSERT_FALSE(objs->empty());
    const object_ptr &main_obj = objs->front();
    ASSERT_TRUE(main_obj->is_main);
    EXPECT_NE(std::find(main_obj->needed.begin(), main_obj->needed.end(), "libc.so.6"),
              main_obj->needed.end());
    auto libc = std::find_if(objs->begin(), objs->end(),
                             [](const object_ptr &o) { return o->name.starts_with("libc.so"); });
    ASSERT_NE(libc, objs->end());
    EXPECT_EQ((*libc)->soname, "libc.so.6");
    // This test links dprobe statically: nothing here is dprobe's alone.
    for (const object_ptr &o : *objs)
        EXPECT_FALSE(loaded_for_dprobe_only(*o)) << o->name;
}
