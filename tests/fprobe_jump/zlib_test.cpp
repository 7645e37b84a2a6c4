// An fprobe with entry and exit handlers on every function of zlib during a compress /
// uncompress round trip of a few megabytes: identical output to an untraced run, and as
// many exits as entries.
#include <dprobe/fprobe.h>
#include <gtest/gtest.h>

#include <atomic>
#include <vector>
#include <zlib.h>

namespace
{

std::atomic<unsigned long> z_entries{0}, z_exits{0};
int z_entry(struct fprobe *, unsigned long, unsigned long, struct ftrace_regs *, void *)
{
    z_entries.fetch_add(1, std::memory_order_relaxed);
    return 0;
}
void z_exit(struct fprobe *, unsigned long, unsigned long, struct ftrace_regs *, void *)
{
    z_exits.fetch_add(1, std::memory_order_relaxed);
}

std::vector<unsigned char> make_input(size_t n)
{
    std::vector<unsigned char> v(n);
    unsigned long x = 88172645463325252UL;
    for (size_t i = 0; i < n; ++i) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        // Compressible but not trivial: text-like bytes with repeats.
        v[i] = static_cast<unsigned char>((i % 97 < 60) ? 'a' + (x % 16) : "dprobe "[i % 7]);
    }
    return v;
}

struct round_trip {
    std::vector<unsigned char> compressed, restored;
};

round_trip run(const std::vector<unsigned char> &in)
{
    round_trip r;
    uLongf clen = compressBound(in.size());
    r.compressed.resize(clen);
    EXPECT_EQ(Z_OK, compress2(r.compressed.data(), &clen, in.data(), in.size(), 6));
    r.compressed.resize(clen);
    // Streaming inflate in small chunks: many calls into zlib's internals.
    r.restored.resize(in.size());
    z_stream zs = {};
    EXPECT_EQ(Z_OK, inflateInit(&zs));
    zs.next_in = r.compressed.data();
    zs.avail_in = static_cast<uInt>(r.compressed.size());
    size_t out = 0;
    int rc;
    do {
        zs.next_out = r.restored.data() + out;
        zs.avail_out = static_cast<uInt>(std::min<size_t>(4096, in.size() - out));
        rc = inflate(&zs, Z_NO_FLUSH);
        out = zs.total_out;
    } while (rc == Z_OK && out < in.size());
    inflateEnd(&zs);
    r.restored.resize(out);
    return r;
}

TEST(fprobe_zlib, every_function_traced_output_identical)
{
    auto input = make_input(4 << 20);
    round_trip plain = run(input);
    ASSERT_EQ(input, plain.restored);
    struct fprobe fp = {};
    fp.entry_handler = z_entry;
    fp.exit_handler = z_exit;
    int n = fprobe_count_ips_from_filter("libz.so.1:*", nullptr);
    ASSERT_EQ(0, register_fprobe(&fp, "libz.so.1:*", nullptr));
    z_entries = z_exits = 0;
    round_trip traced = run(input);
    EXPECT_EQ(0, unregister_fprobe(&fp));
    EXPECT_EQ(plain.compressed, traced.compressed);
    EXPECT_EQ(plain.restored, traced.restored);
    EXPECT_GT(z_entries.load(), 100UL);
    EXPECT_EQ(z_entries.load(), z_exits.load());
    EXPECT_EQ(0UL, fp.nmissed);
    RecordProperty("zlib_functions_probed", n);
    RecordProperty("zlib_calls_traced", static_cast<int>(z_entries.load()));
}

} // namespace
