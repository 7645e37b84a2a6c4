// tracing_cpumask text (tracefs/tracing_cpumask.h): the kernel's "%*pb" output and
// bitmap_parse() input and errors, for masks wider than one 32-bit chunk too.
#include "tracefs/tracing_cpumask.h"

#include <gtest/gtest.h>

#include <cerrno>

using dprobe::cpumask_format;
using dprobe::cpumask_parse;

TEST(tracing_cpumask, format_is_the_kernels_pb)
{
    EXPECT_EQ(cpumask_format({3}, 2), "3\n");
    EXPECT_EQ(cpumask_format({~0ull}, 2), "3\n"); // bits past nr_cpu_ids are not shown
    EXPECT_EQ(cpumask_format({2}, 8), "02\n");
    EXPECT_EQ(cpumask_format({0x1ffull}, 12), "1ff\n");
    EXPECT_EQ(cpumask_format({~0ull}, 64), "ffffffff,ffffffff\n");
    EXPECT_EQ(cpumask_format({0x100000002ull}, 40), "01,00000002\n");
    EXPECT_EQ(cpumask_format({0, 1}, 72), "01,00000000,00000000\n");
}

TEST(tracing_cpumask, parse_is_bitmap_parse)
{
    std::vector<uint64_t> m;
    ASSERT_EQ(cpumask_parse("2\n", 2, m), 0);
    EXPECT_EQ(m, std::vector<uint64_t>{2});
    ASSERT_EQ(cpumask_parse("1,00000002", 40, m), 0);
    EXPECT_EQ(m, std::vector<uint64_t>{0x100000002ull});
    ASSERT_EQ(cpumask_parse("  1,2 \n", 40, m), 0); // chunks need no leading zeros
    EXPECT_EQ(m, std::vector<uint64_t>{0x100000002ull});
    ASSERT_EQ(cpumask_parse("1,0,0", 72, m), 0);
    EXPECT_EQ(m, (std::vector<uint64_t>{0, 1}));
    ASSERT_EQ(cpumask_parse("\n", 8, m), 0); // nothing: no CPU
    EXPECT_EQ(m, std::vector<uint64_t>{0});
    ASSERT_EQ(cpumask_parse("AbC", 12, m), 0);
    EXPECT_EQ(m, std::vector<uint64_t>{0xabc});
}

TEST(tracing_cpumask, parse_errors_leave_the_mask_alone)
{
    std::vector<uint64_t> m{7};
    EXPECT_EQ(cpumask_parse("xyz", 8, m), -EINVAL);
    EXPECT_EQ(cpumask_parse("1 2", 8, m), -EOVERFLOW); // white space separates chunks too
    EXPECT_EQ(cpumask_parse("0x3", 8, m), -EINVAL);
    EXPECT_EQ(cpumask_parse("4", 2, m), -EOVERFLOW);          // CPU 2 of 2
    EXPECT_EQ(cpumask_parse("1,0", 32, m), -EOVERFLOW);       // one chunk too many
    EXPECT_EQ(cpumask_parse("123456789", 64, m), -EOVERFLOW); // 9 digits
    EXPECT_EQ(cpumask_parse("1,00000000", 33, m), 0);
    EXPECT_EQ(m, std::vector<uint64_t>{1ull << 32});
    m = {7};
    EXPECT_EQ(cpumask_parse("2,00000000", 33, m), -EOVERFLOW); // CPU 33 of 33
    EXPECT_EQ(m, std::vector<uint64_t>{7});
}
