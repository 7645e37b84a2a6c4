// C++ names for report (see demangle.h).
#include "tools/dprobe/resolve/demangle.h"

#include <cxxabi.h>

#include <cstdlib>
#include <cstring>
#include <memory>

namespace dprobe::report
{

namespace
{

bool starts_with_at(const std::string &s, size_t i, const char *p)
{
    return s.compare(i, std::strlen(p), p) == 0;
}

// Removes the "[abi:...]" tags.
std::string drop_abi_tags(std::string s)
{
    for (size_t i; (i = s.find("[abi:")) != std::string::npos;) {
        size_t e = s.find(']', i);
        if (e == std::string::npos) break;
        s.erase(i, e - i + 1);
    }
    return s;
}

// The length of the operator token at S[I] ("<=>", "<<", "==", "<" ...), 0 if none: the angle
// brackets of an operator are not template brackets ("operator==<char>" is "operator==" of
// the template arguments "<char>").
size_t operator_token_len(const std::string &s, size_t i)
{
    for (const char *t : {"<=>", "<<=", ">>=", "<<", ">>", "<=", ">=", "==", "<", ">", "="})
        if (starts_with_at(s, i, t)) return std::strlen(t);
    return 0;
}

// The parameters of an enclosing function in the name of a local entity:
// "f(int, char)::Local::get" -> "f::Local::get" (as uftrace shows it). "operator()" and
// "(anonymous namespace)" are names, not parameters, and stay.
std::string drop_scope_params(std::string s)
{
    for (size_t i = 0; (i = s.find('(', i)) != std::string::npos;) {
        if (starts_with_at(s, i, "(anonymous namespace)")) {
            i += std::strlen("(anonymous namespace)");
            continue;
        }
        if (i >= 8 && s.compare(i - 8, 8, "operator") == 0 && starts_with_at(s, i, "()")) {
            i += 2;
            continue;
        }
        size_t j = i;
        for (int depth = 0; j < s.size(); j++) {
            if (s[j] == '(')
                depth++;
            else if (s[j] == ')' && --depth == 0)
                break;
        }
        if (j == s.size()) break;
        size_t e = j + 1;
        for (bool more = true; more;) {
            more = false;
            for (const char *q : {" const", " volatile", " &&", " &"})
                if (starts_with_at(s, e, q)) {
                    e += std::strlen(q);
                    more = true;
                }
        }
        if (starts_with_at(s, e, "::"))
            s.erase(i, e - i);
        else
            i = j + 1;
    }
    return s;
}

} // namespace

// "{lambda(int, int)#1}" -> "{lambda#1}".
static std::string drop_lambda_params(std::string s)
{
    for (size_t i = 0; (i = s.find("{lambda(", i)) != std::string::npos;) {
        size_t open = i + 7, depth = 0, j = open;
        for (; j < s.size(); j++) {
            if (s[j] == '(')
                depth++;
            else if (s[j] == ')' && --depth == 0)
                break;
        }
        if (j == s.size()) break;
        s.erase(open, j - open + 1);
        i = open;
    }
    return s;
}

std::string demangle_simplify(const std::string &full)
{
    std::string s = drop_lambda_params(drop_abi_tags(full));
    // The parameter list: the last balanced (...) at the end, after cv/ref qualifiers.
    for (const char *q : {" const", " volatile", " &&", " &", " noexcept"})
        while (s.size() > std::strlen(q) &&
               s.compare(s.size() - std::strlen(q), std::string::npos, q) == 0)
            s.erase(s.size() - std::strlen(q));
    if (!s.empty() && s.back() == ')') {
        int depth = 0;
        for (size_t i = s.size(); i-- > 0;) {
            if (s[i] == ')')
                depth++;
            else if (s[i] == '(' && --depth == 0) {
                s.erase(i);
                break;
            }
        }
    }
    // Template arguments, but not the angle brackets of operator<, <<, <=, <=>.
    std::string out;
    int angle = 0;
    for (size_t i = 0; i < s.size(); i++) {
        if (angle == 0 && starts_with_at(s, i, "operator")) {
            size_t j = i + 8 + operator_token_len(s, i + 8);
            out.append(s, i, j - i);
            i = j - 1;
            continue;
        }
        if (s[i] == '<') {
            angle++;
            continue;
        }
        if (s[i] == '>' && angle > 0) {
            angle--;
            continue;
        }
        if (angle == 0) out += s[i];
    }
    while (!out.empty() && out.back() == ' ')
        out.pop_back(); // "operator<< <char>" less its arguments
    out = drop_scope_params(out);
    // A function template's return type comes first: "int max" -> "max" (spaces inside
    // parentheses, "(anonymous namespace)", and after "operator" stay).
    int paren = 0;
    size_t cut = std::string::npos;
    for (size_t i = 0; i < out.size(); i++) {
        if (out[i] == '(')
            paren++;
        else if (out[i] == ')')
            paren--;
        else if (out[i] == ' ' && paren == 0) {
            size_t op = out.rfind("operator", i);
            if (op != std::string::npos && op + 8 == i) continue; // "operator new"
            cut = i;
        }
    }
    if (cut != std::string::npos && cut + 1 < out.size()) out.erase(0, cut + 1);
    return out.empty() ? full : out;
}

std::string demangle(const std::string &name, demangle_mode mode)
{
    if (mode == demangle_mode::none || name.size() < 2 || name[0] != '_' || name[1] != 'Z')
        return name;
    int status = 0;
    std::unique_ptr<char, void (*)(void *)> d(
        abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status), std::free);
    if (status != 0 || !d) return name;
    std::string full = d.get();
    return mode == demangle_mode::full ? full : demangle_simplify(full);
}

} // namespace dprobe::report
