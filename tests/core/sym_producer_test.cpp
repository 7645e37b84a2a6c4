// core/sym_producer: which compile units' callers may rely on a callee's clobbers (-fipa-ra),
// from DW_AT_producer. The trampoline that keeps all vector registers for such a patch site is
// tested in tests/vector_state (fprobe_*_attr_pfe).
#include "core/sym_producer.h"

#include <gtest/gtest.h>

using dprobe::producer_allows_ipa_ra;

TEST(sym_producer, gcc_at_o2_without_the_option_allows_it)
{
    EXPECT_TRUE(producer_allows_ipa_ra("GNU C17 12.2.0 -mtune=generic -march=x86-64 -g -O2"));
    EXPECT_TRUE(producer_allows_ipa_ra("GNU C++17 12.2.0 -mtune=generic -O3 -fPIC"));
    EXPECT_TRUE(producer_allows_ipa_ra("GNU C11 12.2.0 -g -Os"));
    EXPECT_TRUE(producer_allows_ipa_ra("GNU GIMPLE 12.2.0 -mtune=generic -O2 -flto"));
    // The last level counts.
    EXPECT_TRUE(producer_allows_ipa_ra("GNU C17 12.2.0 -O0 -O2"));
    // Asked for explicitly, whatever else.
    EXPECT_TRUE(producer_allows_ipa_ra("GNU C17 12.2.0 -O2 -pg -fipa-ra"));
}

TEST(sym_producer, options_that_turn_it_off)
{
    EXPECT_FALSE(producer_allows_ipa_ra("GNU C17 12.2.0 -g -O2 -fpatchable-function-entry=5"));
    EXPECT_FALSE(producer_allows_ipa_ra("GNU C17 12.2.0 -g -O2 -fpatchable-function-entry=5,0"));
    EXPECT_FALSE(producer_allows_ipa_ra("GNU C17 12.2.0 -mfentry -g -O2 -pg"));
    EXPECT_FALSE(producer_allows_ipa_ra("GNU C17 12.2.0 -g -O2 -fno-ipa-ra"));
    EXPECT_FALSE(producer_allows_ipa_ra("GNU C17 12.2.0 -g -O2 -O1"));
    EXPECT_FALSE(producer_allows_ipa_ra("GNU C17 12.2.0 -g -Og"));
    EXPECT_FALSE(producer_allows_ipa_ra("GNU C17 12.2.0 -g")); // no -O: -O0
    EXPECT_FALSE(producer_allows_ipa_ra("GNU C17 12.2.0 -g -O2 -O0"));
}

TEST(sym_producer, options_are_whole_words)
{
    // "-pgx" or "-fpatchable-function-entry-foo" are not the options (and an option's value
    // such as a path can hold "-pg").
    EXPECT_TRUE(producer_allows_ipa_ra("GNU C17 12.2.0 -O2 -pgx"));
    EXPECT_TRUE(producer_allows_ipa_ra("GNU C17 12.2.0 -O2 -I/x-pg"));
}

TEST(sym_producer, clang_has_no_ipa_ra_unless_asked)
{
    EXPECT_FALSE(producer_allows_ipa_ra("Debian clang version 14.0.6"));
    EXPECT_FALSE(producer_allows_ipa_ra("clang version 18.1.8 (https://github.com/llvm/...)"));
    EXPECT_TRUE(producer_allows_ipa_ra("clang version 18.1.8 -mllvm -enable-ipra"));
}

TEST(sym_producer, anything_unknown_may_rely_on_it)
{
    EXPECT_TRUE(producer_allows_ipa_ra(""));
    EXPECT_TRUE(producer_allows_ipa_ra("GNU AS 2.40"));
    EXPECT_TRUE(producer_allows_ipa_ra("rustc version 1.70.0"));
}
