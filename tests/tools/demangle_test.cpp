// C++ names as `dprobe report` shows them (tools/dprobe/resolve/demangle.h).
#include "tools/dprobe/resolve/demangle.h"

#include <gtest/gtest.h>

using dprobe::report::demangle;
using dprobe::report::demangle_mode;
using dprobe::report::demangle_simplify;

TEST(Demangle, SimpleDropsParametersAndTemplateArguments)
{
    EXPECT_EQ(demangle("_Z3foov", demangle_mode::simple), "foo");
    EXPECT_EQ(demangle("_ZNSt6vectorIiSaIiEE9push_backERKi", demangle_mode::simple),
              "std::vector::push_back");
    EXPECT_EQ(demangle("_ZN3geo5twiceIiEET_S1_", demangle_mode::simple), "geo::twice");
    EXPECT_EQ(demangle("_ZNK3geo5pointplERKS0_", demangle_mode::simple), "geo::point::operator+");
    EXPECT_EQ(demangle("_ZN12_GLOBAL__N_16hiddenEi", demangle_mode::simple),
              "(anonymous namespace)::hidden");
    EXPECT_EQ(demangle("_ZZ4mainENKUliiE_clEii", demangle_mode::simple),
              "main::{lambda#1}::operator()");
}

TEST(Demangle, Operators)
{
    EXPECT_EQ(
        demangle_simplify(
            "std::ostream& std::operator<< <std::char_traits<char> >(std::ostream&, char const*)"),
        "std::operator<<");
    EXPECT_EQ(demangle_simplify("bool operator<(a const&, a const&)"), "operator<");
    EXPECT_EQ(demangle_simplify("operator new(unsigned long)"), "operator new");
    EXPECT_EQ(demangle_simplify("std::__cxx11::basic_string<char>::_M_create[abi:cxx11](unsigned "
                                "long&, unsigned long)"),
              "std::__cxx11::basic_string::_M_create");
}

TEST(Demangle, FullAndNone)
{
    EXPECT_EQ(demangle("_Z3bari", demangle_mode::full), "bar(int)");
    EXPECT_EQ(demangle("_Z3bari", demangle_mode::none), "_Z3bari");
    // Not mangled names stay as they are.
    EXPECT_EQ(demangle("main", demangle_mode::simple), "main");
    EXPECT_EQ(demangle("_Zbogus", demangle_mode::simple), "_Zbogus");
}
