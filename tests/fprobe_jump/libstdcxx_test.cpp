// An fprobe with entry and exit handlers on a glob of libstdc++ (every std:: member function,
// "_ZNS*": strings, streams, locales, containers' out-of-line code) while a workload uses
// strings, containers, iostreams and exceptions: the output is identical to an untraced run
// and every traced call returns (entries == exits). (The glob leaves out std::__throw_* and
// __cxa_throw, whose frames are unwound rather than returned from.)
#include <dprobe/fprobe.h>
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace
{

std::atomic<unsigned long> s_entries{0}, s_exits{0};
int s_entry(struct fprobe *, unsigned long, unsigned long, struct ftrace_regs *, void *)
{
    s_entries.fetch_add(1, std::memory_order_relaxed);
    return 0;
}
void s_exit(struct fprobe *, unsigned long, unsigned long, struct ftrace_regs *, void *)
{
    s_exits.fetch_add(1, std::memory_order_relaxed);
}

__attribute__((noinline)) std::string workload()
{
    std::ostringstream out;
    std::map<std::string, int> counts;
    std::vector<std::string> words;
    std::istringstream in("the quick brown fox jumps over the lazy dog the end");
    for (std::string w; in >> w;) {
        words.push_back(w);
        ++counts[w];
    }
    for (auto &[w, n] : counts)
        out << w << '=' << n << ' ';
    out << '\n' << std::hex << 255 << ' ' << std::dec << 3.25 << ' ' << words.size() << '\n';
    for (int i = 0; i < 50; ++i) {
        try {
            if (i % 3 == 0) throw std::runtime_error("error " + std::to_string(i));
            std::string s = words.at(static_cast<size_t>(i)); // throws out_of_range past 11
            out << s.substr(0, 2);
        } catch (const std::out_of_range &e) {
            out << '!';
        } catch (const std::exception &e) {
            out << '[' << e.what() << ']';
        }
    }
    std::string big;
    for (int i = 0; i < 1000; ++i)
        big += std::to_string(i * i);
    out << '\n' << big.size() << ' ' << big.substr(100, 20) << '\n';
    return out.str();
}

TEST(fprobe_libstdcxx, glob_of_std_functions_changes_nothing)
{
    const std::string want = workload();
    struct fprobe fp = {};
    fp.entry_handler = s_entry;
    fp.exit_handler = s_exit;
    int n = fprobe_count_ips_from_filter("libstdc++.so.6:_ZNS*", nullptr);
    ASSERT_GT(n, 1000);
    ASSERT_EQ(0, register_fprobe(&fp, "libstdc++.so.6:_ZNS*", nullptr));
    s_entries = s_exits = 0;
    std::string got = workload();
    std::string got2 = workload();
    ASSERT_EQ(0, unregister_fprobe(&fp));
    EXPECT_EQ(want, got);
    EXPECT_EQ(want, got2);
    EXPECT_GT(s_entries.load(), 1000UL);
    EXPECT_EQ(s_entries.load(), s_exits.load());
    EXPECT_EQ(0UL, fp.nmissed);
    RecordProperty("libstdcxx_functions_probed", n);
}

} // namespace
