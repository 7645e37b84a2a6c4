// Table tests for glob_match: the cases of the kernel's lib/globtest.c plus the
// user-space additions ([^...], end-of-string in classes, string_view bounds).
#include "core/glob.h"

#include <gtest/gtest.h>

#include <string>

using dprobe::glob_is_pattern;
using dprobe::glob_match;

namespace
{

struct glob_case {
    bool expected;
    const char *pat;
    const char *str;
};

// From lib/globtest.c (the kernel's own self-test).
const glob_case kernel_cases[] = {
    // Some basic tests
    {true, "a", "a"},
    {false, "a", "b"},
    {false, "a", "aa"},
    {false, "a", ""},
    {true, "", ""},
    {false, "", "a"},
    // Simple character class tests
    {true, "[a]", "a"},
    {false, "[a]", "b"},
    {false, "[!a]", "a"},
    {true, "[!a]", "b"},
    {true, "[ab]", "a"},
    {true, "[ab]", "b"},
    {false, "[ab]", "c"},
    {true, "[!ab]", "c"},
    {true, "[a-c]", "b"},
    {false, "[a-c]", "d"},
    // Corner cases in character class parsing
    {true, "[a-c-e-g]", "-"},
    {false, "[a-c-e-g]", "d"},
    {true, "[a-c-e-g]", "f"},
    {true, "[]a-ceg-ik[]", "a"},
    {true, "[]a-ceg-ik[]", "]"},
    {true, "[]a-ceg-ik[]", "["},
    {true, "[]a-ceg-ik[]", "h"},
    {false, "[]a-ceg-ik[]", "f"},
    {false, "[!]a-ceg-ik[]", "h"},
    {false, "[!]a-ceg-ik[]", "]"},
    {true, "[!]a-ceg-ik[]", "f"},
    // Simple wild cards
    {true, "?", "a"},
    {false, "?", "aa"},
    {false, "??", "a"},
    {true, "?x?", "axb"},
    {false, "?x?", "abx"},
    {false, "?x?", "xab"},
    // Asterisk wild cards (backtracking)
    {false, "*??", "a"},
    {true, "*??", "ab"},
    {true, "*??", "abc"},
    {true, "*??", "abcd"},
    {false, "??*", "a"},
    {true, "??*", "ab"},
    {true, "??*", "abc"},
    {true, "??*", "abcd"},
    {false, "?*?", "a"},
    {true, "?*?", "ab"},
    {true, "?*?", "abc"},
    {true, "?*?", "abcd"},
    {true, "*b", "b"},
    {true, "*b", "ab"},
    {false, "*b", "ba"},
    {true, "*b", "bb"},
    {true, "*b", "abb"},
    {true, "*b", "bab"},
    {true, "*bc", "abbc"},
    {true, "*bc", "bc"},
    {true, "*bc", "bbc"},
    {true, "*bc", "bcbc"},
    // Multiple asterisks (complex backtracking)
    {true, "*ac*", "abacadaeafag"},
    {true, "*ac*ae*ag*", "abacadaeafag"},
    {true, "*a*b*[bc]*[ef]*g*", "abacadaeafag"},
    {false, "*a*b*[ef]*[cd]*g*", "abacadaeafag"},
    {true, "*abcd*", "abcabcabcabcdefg"},
    {true, "*ab*cd*", "abcabcabcabcdefg"},
    {true, "*abcd*abcdef*", "abcabcdabcdeabcdefg"},
    {false, "*abcd*", "abcabcabcabcefg"},
    {false, "*ab*cd*", "abcabcabcabcefg"},
};

// What this implementation adds or pins down.
const glob_case extra_cases[] = {
    // '^' negates like '!'.
    {false, "[^a]", "a"},
    {true, "[^a]", "b"},
    {true, "[^]]", "x"},
    {false, "[^]]", "]"},
    // ']' first (after '[' or '[!') is a member; '-' first or last is literal.
    {true, "[]]", "]"},
    {false, "[]]", "a"},
    {true, "[!]]", "a"},
    {false, "[!]]", "]"},
    {true, "[-a]", "-"},
    {true, "[a-]", "-"},
    {true, "[a-]", "a"},
    {false, "[a-]", "b"},
    // A range whose end is ']' is a literal '-' followed by the closing bracket.
    {true, "[a-]x", "-x"},
    // An unterminated class makes '[' an ordinary character.
    {true, "[", "["},
    {false, "[", "a"},
    {true, "a[b", "a[b"},
    {true, "[a-", "[a-"},
    {true, "*[", "xx["},
    {false, "[!", "!"},
    {true, "[!", "[!"},
    // A class (negated or not) needs a character: it never matches the end of the string.
    {false, "a[!b]", "a"},
    {false, "a[^b]", "a"},
    {false, "a[b]", "a"},
    {false, "[!a]", ""},
    // Backslash escapes the next character, as in lib/glob.c.
    {true, "a\\*b", "a*b"},
    {false, "a\\*b", "axb"},
    {true, "\\[x]", "[x]"},
    {false, "\\[x]", "x"},
    {true, "a\\?", "a?"},
    {false, "a\\?", "ab"},
    // '*' alone and at the ends; '/' and '.' are not special.
    {true, "*", ""},
    {true, "*", "anything"},
    {true, "**", "x"},
    {true, "a*", "a"},
    {true, "*a", "a"},
    {false, "a*", "ba"},
    {true, "*/*", "usr/lib"},
    {true, "*", ".hidden"},
    // Typical ftrace filters on symbol names.
    {true, "parse_*", "parse_line"},
    {false, "parse_*", "do_parse_line"},
    {true, "*_debug*", "parse_debug_dump"},
    {true, "vfs_[rw]*", "vfs_read"},
    {true, "vfs_[rw]*", "vfs_write"},
    {false, "vfs_[rw]*", "vfs_open"},
    {true, "_Z*3foo*", "_ZN2ns3fooEv"},
    {true, "sym[0-9][0-9]", "sym42"},
    {false, "sym[0-9][0-9]", "sym4x"},
    // Ranges compare unsigned bytes.
    {true, "[\x80-\xff]", "\xe9"},
    {false, "[a-z]", "\xe9"},
};

void run_table(const glob_case *begin, const glob_case *end)
{
    for (const glob_case *c = begin; c != end; ++c)
        EXPECT_EQ(glob_match(c->pat, c->str), c->expected)
            << "glob_match(\"" << c->pat << "\", \"" << c->str << "\")";
}

} // namespace

TEST(glob, kernel_globtest_table)
{
    run_table(std::begin(kernel_cases), std::end(kernel_cases));
}

TEST(glob, extra_table)
{
    run_table(std::begin(extra_cases), std::end(extra_cases));
}

TEST(glob, respects_view_bounds)
{
    // Only the viewed bytes take part: a longer buffer behind the view must not leak in.
    std::string buf = "foo_barXYZ";
    std::string_view s(buf.data(), 7);
    EXPECT_TRUE(glob_match("foo_*", s));
    EXPECT_TRUE(glob_match("*bar", s));
    EXPECT_FALSE(glob_match("*Z", s));
    std::string pbuf = "f*Z";
    EXPECT_TRUE(glob_match(std::string_view(pbuf.data(), 2), s));
    // An embedded NUL is an ordinary character, not the end.
    EXPECT_TRUE(glob_match(std::string_view("a?c", 3), std::string_view("a\0c", 3)));
    EXPECT_FALSE(glob_match("a", std::string_view("a\0", 2)));
}

TEST(glob, long_inputs_backtrack_linearly)
{
    // Single-level backtracking keeps this quadratic at worst; it must simply finish.
    std::string s(20000, 'a');
    EXPECT_FALSE(glob_match("*a*a*a*a*a*b", s));
    s.back() = 'b';
    EXPECT_TRUE(glob_match("*a*a*a*a*a*b", s));
}

TEST(glob, is_pattern)
{
    EXPECT_FALSE(glob_is_pattern(""));
    EXPECT_FALSE(glob_is_pattern("do_work"));
    EXPECT_FALSE(glob_is_pattern("libc.so.6"));
    EXPECT_TRUE(glob_is_pattern("do_*"));
    EXPECT_TRUE(glob_is_pattern("do_wor?"));
    EXPECT_TRUE(glob_is_pattern("do_[wx]ork"));
    EXPECT_TRUE(glob_is_pattern("do\\_work"));
}
