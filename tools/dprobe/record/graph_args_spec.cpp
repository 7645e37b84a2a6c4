// -A / -R specs into fetch args (see graph_args_spec.h).
#include "tools/dprobe/record/graph_args_spec.h"

#include <regex>

namespace dprobe::cli
{

namespace
{

// uftrace's format letter (and size) as a fetch type suffix for a scalar, "" for none; for
// /s the caller dereferences.
bool fetch_type(const std::string &fmt, std::string &type, bool &string, std::string *err)
{
    string = false;
    type.clear();
    if (fmt.empty()) return true;
    static const std::regex re("^([diuxscpfSe])(8|16|32|64)?(:.*)?$");
    std::smatch m;
    if (!std::regex_match(fmt, m, re)) {
        *err = "unknown format '/" + fmt + "' (d, i, u, x, s, c, p, with a size: /i32, /u8)";
        return false;
    }
    const char f = m[1].str()[0];
    const std::string bits = m[2].matched ? m[2].str() : "64";
    switch (f) {
    case 'd':
    case 'i':
        type = "s" + bits;
        return true;
    case 'u':
        type = "u" + bits;
        return true;
    case 'x':
        type = "x" + bits;
        return true;
    case 's':
        string = true;
        return true;
    case 'c':
        type = "char";
        return true;
    case 'p':
        type = "symbol";
        return true;
    case 'f':
        *err = "/f: floating-point values are in SSE registers, which fetch args do not read";
        return false;
    default:
        *err = "'/" + fmt + "' (std::string, enums) is not supported: use a fetch arg";
        return false;
    }
}

bool convert(const std::string &item, bool ret, std::string &out, std::string *err)
{
    static const std::regex argn("^(arg([1-9][0-9]*)|retval)(/(.*))?$");
    static const std::regex name(
        "^([A-Za-z_][A-Za-z0-9_]*((->|\\.)[A-Za-z_][A-Za-z0-9_]*)*)(/(.*))?$");
    std::smatch m;
    std::string type;
    bool string = false;
    if (std::regex_match(item, m, argn)) {
        const bool is_ret = m[1].str() == "retval";
        if (is_ret != ret) {
            *err = is_ret ? "retval goes with -R" : m[1].str() + " goes with -A";
            return false;
        }
        if (!fetch_type(m[4].str(), type, string, err)) return false;
        const std::string src = is_ret ? "$retval" : "$arg" + m[2].str();
        out = m[1].str() + "=" + (string ? "+0(" + src + "):string" : src) +
              (type.empty() ? "" : ":" + type);
        return true;
    }
    if (item.rfind("fparg", 0) == 0) {
        *err =
            item + ": floating-point arguments are in SSE registers, which fetch args do not read";
        return false;
    }
    if (!ret && std::regex_match(item, m, name)) {
        // A parameter (or a member through it) by its DWARF name.
        if (!fetch_type(m[5].str(), type, string, err)) return false;
        out = m[1].str() + (string ? ":string" : type.empty() ? "" : ":" + type);
        return true;
    }
    if (item.empty()) {
        *err = "an empty item";
        return false;
    }
    out = item; // a fetch arg, as dynamic_events spells it
    return true;
}

} // namespace

bool graph_args_line(const std::string &spec, bool ret, std::string &line, std::string *err)
{
    const size_t at = spec.find('@');
    if (at == std::string::npos || at == 0 || at + 1 == spec.size()) {
        *err = "'" + spec + "' is not GLOB@" + (ret ? "retval" : "ARG,ARG...");
        return false;
    }
    line = spec.substr(0, at);
    if (line.find(' ') != std::string::npos) {
        *err = "'" + spec + "': the function glob has a space";
        return false;
    }
    std::string rest = spec.substr(at + 1);
    size_t pos = 0;
    while (pos <= rest.size()) {
        size_t comma = rest.find(',', pos);
        if (comma == std::string::npos) comma = rest.size();
        std::string item = rest.substr(pos, comma - pos), fetch;
        if (!convert(item, ret, fetch, err)) {
            *err = "'" + spec + "': " + *err;
            return false;
        }
        line += " " + fetch;
        pos = comma + 1;
    }
    return true;
}

} // namespace dprobe::cli
