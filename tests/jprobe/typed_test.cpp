// The typed C++ probes of <dprobe/dprobe.hpp>: a jprobe, an fprobe (entry with typed
// arguments, exit with the typed return value and the entry's arguments) and a kretprobe,
// by address and by name; errors as exceptions or std::error_code; RAII and moves.
#include "jprobe_targets.h"

#include <dprobe/dprobe.hpp>

#include <gtest/gtest.h>

#include <system_error>
#include <vector>

namespace
{

TEST(typed_jprobe, sees_typed_arguments)
{
    long got[8] = {};
    int hits = 0;
    {
        dprobe::jprobe p{&jp_int8,
                         [&](long a, long b, long c, long d, long e, long f, long g, long h) {
                             long v[] = {a, b, c, d, e, f, g, h};
                             std::copy(v, v + 8, got);
                             ++hits;
                             a = b = g = h = -1; // a copy
                         }};
        EXPECT_TRUE(p);
        EXPECT_EQ(jp_int8(1, 2, 3, 4, 5, 6, 7, 8), 1 + 4 + 9 + 16 + 25 + 36 + 49 + 64);
        EXPECT_EQ(p.get()->nreturned, 0u);
    }
    EXPECT_EQ(hits, 1);
    for (int i = 0; i < 8; ++i)
        EXPECT_EQ(got[i], i + 1);
    jp_int8(1, 2, 3, 4, 5, 6, 7, 8); // unregistered by the destructor
    EXPECT_EQ(hits, 1);
}

TEST(typed_jprobe, struct_by_value_doubles_and_by_name)
{
    double y = 0;
    long a = 0, p7 = 0;
    dprobe::jprobe<long(struct jp_big, struct jp_small, const int *)> p{
        "jp_struct", [&](struct jp_big big, struct jp_small small, const int *p) {
            a = big.a + big.d;
            y = small.y;
            p7 = *p;
        }};
    const int seven = 7;
    EXPECT_EQ(jp_struct({1, 2, 3, 4}, {5, 0.5}, &seven), 1 + 4 + 9 + 16 + 25 + 3 + 49);
    EXPECT_EQ(a, 5);
    EXPECT_EQ(y, 0.5);
    EXPECT_EQ(p7, 7);

    double s = 0;
    dprobe::jprobe d{&jp_dbl10, [&](double a, double b, double c, double d, double e, double f,
                                    double g, double h, double i,
                                    double j) { s = a + b + c + d + e + f + g + h + i + j; }};
    jp_dbl10(1, 2, 3, 4, 5, 6, 7, 8, 9, 10);
    EXPECT_EQ(s, 55);
}

TEST(typed_jprobe, errors_and_moves)
{
    EXPECT_THROW((dprobe::jprobe<long(long)>{"jp_no_such_function", [](long) {}}),
                 std::system_error);
    try {
        dprobe::jprobe<long(long, long, long, long, long, long, long, long, long, long, long, long,
                            long, long)>
            p{"jp_too_many", [](long, long, long, long, long, long, long, long, long, long, long,
                                long, long, long) {}};
        ADD_FAILURE() << "registered";
    } catch (const std::system_error &e) {
        EXPECT_EQ(e.code(), std::errc::argument_list_too_long) << e.what();
    }
    std::error_code ec;
    dprobe::jprobe<long(long)> bad{"jp_no_such_function", [](long) {}, ec};
    EXPECT_EQ(ec, std::errc::no_such_file_or_directory);
    EXPECT_FALSE(bad);

    int hits = 0;
    dprobe::jprobe p{&jp_recursive, [&](long) { ++hits; }};
    dprobe::jprobe q = std::move(p);
    EXPECT_FALSE(p);
    EXPECT_TRUE(q);
    EXPECT_EQ(jp_recursive(1), 2);
    EXPECT_EQ(hits, 1);
    std::vector<dprobe::jprobe<long(long)>> v;
    v.push_back(std::move(q));
    jp_recursive(1);
    EXPECT_EQ(hits, 2);
    v.clear();
    jp_recursive(1);
    EXPECT_EQ(hits, 2);
}

TEST(typed_fprobe, entry_and_exit_handlers)
{
    double in_b = 0, ret = 0, exit_b = 0;
    int in_a = 0;
    std::string e;
    {
        dprobe::fprobe p{&jp_mixed,
                         [&](int a, double b, long, float, const char *s, double) {
                             in_a = a;
                             in_b = b;
                             e = s;
                         },
                         [&](double r, int, double b, long, float, const char *, double) {
                             ret = r;
                             exit_b = b;
                         }};
        EXPECT_DOUBLE_EQ(jp_mixed(3, 0.5, 2, 1.0f, "a", 1.0), 3 + 1 + 6 + 4 + 5 * 'a' + 6);
    }
    EXPECT_EQ(in_a, 3);
    EXPECT_EQ(in_b, 0.5);
    EXPECT_EQ(e, "a");
    EXPECT_DOUBLE_EQ(ret, 3 + 1 + 6 + 4 + 5 * 'a' + 6);
    EXPECT_EQ(exit_b, 0.5);

    // Stack-passed arguments, and a struct in memory.
    long g = 0, h = 0, r8 = 0;
    dprobe::fprobe<long(long, long, long, long, long, long, long, long)> q{
        "jp_int8", nullptr, [&](long r, long, long, long, long, long, long, long gg, long hh) {
            g = gg;
            h = hh;
            r8 = r;
        }};
    EXPECT_EQ(jp_int8(1, 1, 1, 1, 1, 1, 70, 80), 21 + 490 + 640);
    EXPECT_EQ(g, 70);
    EXPECT_EQ(h, 80);
    EXPECT_EQ(r8, 21 + 490 + 640);
}

TEST(typed_kretprobe, typed_return_value)
{
    std::vector<long> rets;
    dprobe::kretprobe k{&jp_thread_target, [&](long r) { rets.push_back(r); }};
    jp_thread_target(2, 1);
    jp_thread_target(3, 1);
    EXPECT_EQ(rets, (std::vector<long>{7, 10}));
    double d = 0;
    dprobe::kretprobe<double(double, double, double, double, double, double, double, double, double,
                             double)>
        kd{"jp_dbl10", [&](double r) { d = r; }};
    jp_dbl10(1, 1, 1, 1, 1, 1, 1, 1, 1, 1);
    EXPECT_EQ(d, 55);
}

// The exit handler of a typed kretprobe may take the entry's arguments after the return value:
// read at the entry (in registers and on the stack) and kept in the call's instance data, so
// the handler sees them as the function got them, whatever its body did to those registers.
TEST(typed_kretprobe, return_value_and_entry_arguments)
{
    struct call {
        double r;
        int a;
        double b;
        long c;
        float d;
        std::string e;
        double f;
    };
    std::vector<call> calls;
    {
        dprobe::kretprobe k{
            &jp_mixed, [&](double r, int a, double b, long c, float d, const char *e, double f) {
                calls.push_back({r, a, b, c, d, e, f});
            }};
        EXPECT_TRUE(k);
        const double r1 = jp_mixed(-7, 0.25, 1L << 33, 1.5f, "xyz", 1e10);
        const double r2 = jp_mixed(4, -8.5, 3, -2.0f, "ab", 0.125);
        ASSERT_EQ(calls.size(), 2u);
        EXPECT_EQ(calls[0].r, r1);
        EXPECT_EQ(calls[0].a, -7);
        EXPECT_EQ(calls[0].b, 0.25);
        EXPECT_EQ(calls[0].c, 1L << 33);
        EXPECT_EQ(calls[0].d, 1.5f);
        EXPECT_EQ(calls[0].e, "xyz");
        EXPECT_EQ(calls[0].f, 1e10);
        EXPECT_EQ(calls[1].r, r2);
        EXPECT_EQ(calls[1].a, 4);
        EXPECT_EQ(calls[1].b, -8.5);
        EXPECT_EQ(calls[1].e, "ab");
        EXPECT_EQ(calls[1].f, 0.125);
        EXPECT_EQ(k.nmissed(), 0);
    }
    jp_mixed(1, 1, 1, 1, "", 1); // unregistered by the destructor
    EXPECT_EQ(calls.size(), 2u);

    // Stack-passed arguments (g and h), by name with an explicit type.
    long g = 0, h = 0, ret = 0;
    std::error_code ec;
    dprobe::kretprobe<long(long, long, long, long, long, long, long, long)> k8{
        "jp_int8",
        [&](long r, long, long, long, long, long, long, long gg, long hh) {
            ret = r;
            g = gg;
            h = hh;
        },
        ec};
    ASSERT_FALSE(ec) << ec.message();
    EXPECT_EQ(jp_int8(1, 1, 1, 1, 1, 1, 70, 80), 21 + 490 + 640);
    EXPECT_EQ(ret, 21 + 490 + 640);
    EXPECT_EQ(g, 70);
    EXPECT_EQ(h, 80);
}

} // namespace
