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
    // A template operator: its own angle brackets stay, its template arguments go.
    EXPECT_EQ(demangle("_ZSteqIcSt11char_traitsIcESaIcEEbRKNSt7__cxx1112basic_stringIT_T0_T1_"
                       "EEPKS5_",
                       demangle_mode::simple),
              "std::operator==");
    EXPECT_EQ(demangle("_ZN9__gnu_cxxeqIPiSt6vectorIiSaIiEEEEbRKNS_17__normal_iteratorIT_T0_"
                       "EESA_",
                       demangle_mode::simple),
              "__gnu_cxx::operator==");
    EXPECT_EQ(demangle_simplify("bool operator<=<int>(x<int> const&, x<int> const&)"),
              "operator<=");
    EXPECT_EQ(demangle_simplify("auto operator<=><int>(x<int> const&, x<int> const&)"),
              "operator<=>");
    EXPECT_EQ(demangle_simplify("bool operator< <int>(x<int> const&, x<int> const&)"), "operator<");
    EXPECT_EQ(demangle_simplify("int* ptr<int>::operator->() const"), "ptr::operator->");
}

TEST(Demangle, LocalEntitiesLoseTheirFunctionsParameters)
{
    // A class local to a member function template, as libstdc++'s basic_string has.
    EXPECT_EQ(demangle_simplify("std::__cxx11::basic_string<char, std::char_traits<char>, "
                                "std::allocator<char> >::_M_construct<char const*>(char const*, "
                                "char const*, std::forward_iterator_tag)::_Guard::_Guard(std::__"
                                "cxx11::basic_string<char, std::char_traits<char>, "
                                "std::allocator<char> >*)"),
              "std::__cxx11::basic_string::_M_construct::_Guard::_Guard");
    EXPECT_EQ(demangle_simplify("f(int) const::Local::get() const"), "f::Local::get");
    EXPECT_EQ(demangle_simplify("main::{lambda()#1}::operator()() const::Inner::run()"),
              "main::{lambda#1}::operator()::Inner::run");
    EXPECT_EQ(demangle_simplify("(anonymous namespace)::g(char)::S::h()"),
              "(anonymous namespace)::g::S::h");
}

TEST(Demangle, FullAndNone)
{
    EXPECT_EQ(demangle("_Z3bari", demangle_mode::full), "bar(int)");
    EXPECT_EQ(demangle("_Z3bari", demangle_mode::none), "_Z3bari");
    // Not mangled names stay as they are.
    EXPECT_EQ(demangle("main", demangle_mode::simple), "main");
    EXPECT_EQ(demangle("_Zbogus", demangle_mode::simple), "_Zbogus");
}
