// core/proc_maps: /proc/PID/maps as the kernel writes it, and the file offsets of this
// process's own executable.
#include "core/proc_maps.h"

#include <gtest/gtest.h>

#include <dlfcn.h>
#include <limits.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <string>

namespace
{

std::string self_exe()
{
    char buf[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
}

__attribute__((noinline)) int pm_marker(int x)
{
    return x * 3 + 1;
}

} // namespace

TEST(proc_maps, this_process_has_its_executable_stack_and_anonymous_mappings)
{
    const std::string exe = self_exe();
    ASSERT_FALSE(exe.empty());
    const uintptr_t code = reinterpret_cast<uintptr_t>(&pm_marker);
    void *anon = mmap(nullptr, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(anon, MAP_FAILED);
    bool code_found = false, stack_found = false, anon_found = false;
    for (const dprobe::proc_map &m : dprobe::read_proc_maps()) {
        ASSERT_LT(m.start, m.end);
        ASSERT_EQ(m.perms.size(), 4u) << m.perms;
        if (code >= m.start && code < m.end) {
            code_found = true;
            EXPECT_EQ(m.path, exe);
            EXPECT_TRUE(m.executable() && m.readable() && !m.writable()) << m.perms;
            EXPECT_EQ(m.prot(), PROT_READ | PROT_EXEC);
            EXPECT_NE(m.inode, 0u);
        }
        stack_found |= m.path == "[stack]";
        if (m.start == reinterpret_cast<uintptr_t>(anon)) {
            anon_found = true;
            EXPECT_EQ(m.path, "");
            EXPECT_EQ(m.prot(), PROT_READ);
        }
    }
    munmap(anon, 4096);
    EXPECT_TRUE(code_found);
    EXPECT_TRUE(stack_found);
    EXPECT_TRUE(anon_found);
    // Another process's, by pid: the same view of ourselves.
    int err = 0;
    EXPECT_FALSE(dprobe::read_proc_maps(getpid(), &err).empty());
    EXPECT_EQ(err, 0);
}

TEST(proc_maps, a_process_that_does_not_exist_is_an_error)
{
    int err = 0;
    EXPECT_TRUE(dprobe::read_proc_maps(0x7ffffff0, &err).empty());
    EXPECT_EQ(err, ENOENT);
}

TEST(proc_maps, file_offsets_map_to_addresses_and_back)
{
    const std::string exe = self_exe();
    const uintptr_t code = reinterpret_cast<uintptr_t>(&pm_marker);
    uint64_t off = 0;
    for (const dprobe::proc_map &m : dprobe::read_proc_maps())
        if (code >= m.start && code < m.end) off = m.offset + (code - m.start);
    ASSERT_NE(off, 0u);
    auto addr = dprobe::file_offset_to_addr(exe, off);
    ASSERT_TRUE(addr.has_value());
    EXPECT_EQ(*addr, code);
    EXPECT_EQ(pm_marker(*addr ? 1 : 0), 4);
    EXPECT_TRUE(dprobe::file_mapped(exe));
    EXPECT_FALSE(dprobe::file_mapped("/nonexistent/file.so"));
    EXPECT_FALSE(dprobe::file_offset_to_addr("/nonexistent/file.so", 0).has_value());
    EXPECT_FALSE(dprobe::file_offset_to_addr(exe, 1ull << 40).has_value());
}
