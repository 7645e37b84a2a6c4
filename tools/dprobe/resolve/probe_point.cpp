#include "tools/dprobe/resolve/probe_point.h"

#include <cctype>
#include <cerrno>
#include <cstdlib>

namespace dprobe::tools
{

namespace
{

bool is_ident_start(char c)
{
    return std::isalpha(static_cast<unsigned char>(c)) || c == '_';
}

bool fail(std::string *err, std::string msg)
{
    if (err) *err = std::move(msg);
    return false;
}

// A whole decimal/hex/octal number (strtol base 0) that fits in an int.
bool parse_int(std::string_view s, long lo, long hi, long &out)
{
    if (s.empty()) return false;
    std::string t(s);
    char *end = nullptr;
    errno = 0;
    long v = std::strtol(t.c_str(), &end, 0);
    if (errno || *end != '\0' || v < lo || v > hi) return false;
    out = v;
    return true;
}

} // namespace

bool is_c_identifier(std::string_view s)
{
    if (s.empty() || !is_ident_start(s[0])) return false;
    for (char c : s)
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
    return true;
}

bool parse_perf_probe_point(std::string_view text, perf_probe_point &out, std::string *err)
{
    out = perf_probe_point{};
    const std::string whole(text);
    if (text.empty()) return fail(err, "empty probe point");
    if (text.find(';') != std::string_view::npos)
        return fail(err, "'" + whole + "': lazy line patterns (;PTN) are not supported");
    // perf's rule: SRC:ALN when there is no '+', '@' or '%' and a '.' precedes the ':'.
    bool file_spec = false;
    if (text.find_first_of("+@%") == std::string_view::npos) {
        size_t colon = text.find(':');
        if (colon != std::string_view::npos &&
            text.substr(0, colon).find('.') != std::string_view::npos)
            file_spec = true;
    }
    size_t cut = text.find_first_of(":+@%");
    std::string_view head = text.substr(0, cut);
    if (file_spec)
        out.file = std::string(head);
    else
        out.function = std::string(head);
    if (out.function.rfind("0x", 0) == 0)
        return fail(err,
                    "'" + whole + "': probe an address with FUNC+OFF, not an absolute address");
    if (!file_spec && !out.function.empty() && !is_c_identifier(out.function))
        return fail(err, "'" + whole + "': '" + out.function + "' is not a function name");
    bool seen_at = false, seen_plus = false;
    while (cut != std::string_view::npos) {
        char c = text[cut];
        size_t next = text.find_first_of(":+@%", cut + 1);
        std::string_view part = text.substr(
            cut + 1, next == std::string_view::npos ? std::string_view::npos : next - cut - 1);
        switch (c) {
        case ':': {
            long v;
            if (out.has_line || !parse_int(part, 0, INT_MAX, v))
                return fail(err, "'" + whole + "': bad line number '" + std::string(part) + "'");
            out.has_line = true;
            out.line = static_cast<int>(v);
            break;
        }
        case '+': {
            long v;
            if (seen_plus || !parse_int(part, 0, LONG_MAX, v))
                return fail(err, "'" + whole + "': bad offset '" + std::string(part) + "'");
            seen_plus = true;
            out.offset = static_cast<unsigned long>(v);
            break;
        }
        case '@':
            if (seen_at || !out.file.empty())
                return fail(err, "'" + whole + "': SRC@SRC is not allowed");
            if (part.empty()) return fail(err, "'" + whole + "': empty file name after '@'");
            seen_at = true;
            out.file = std::string(part);
            break;
        case '%':
            if (part != "return")
                return fail(err, "'" + whole + "': unknown suffix '%" + std::string(part) +
                                     "' (only %return)");
            out.retprobe = true;
            break;
        }
        cut = next;
    }
    if (out.function.empty() && out.file.empty())
        return fail(err, "'" + whole + "': no function or source file");
    if (out.has_line && seen_plus)
        return fail(err, "'" + whole + "': an offset can't be used with a line number");
    if (out.function.empty() && !out.has_line)
        return fail(err, "'" + whole + "': a source file needs a line number (SRC:LINE)");
    if (seen_plus && out.function.empty())
        return fail(err, "'" + whole + "': an offset needs a function");
    if ((seen_plus || out.has_line) && out.retprobe)
        return fail(err, "'" + whole + "': %return needs the function entry, not a line or offset");
    return true;
}

bool perf_probe_arg::is_variable() const
{
    return !var.empty() && is_ident_start(var[0]);
}

std::string perf_probe_arg::default_name() const
{
    for (auto it = fields.rbegin(); it != fields.rend(); ++it)
        if (!it->is_index) return it->name;
    return var;
}

bool parse_perf_probe_arg(std::string_view text, perf_probe_arg &out, std::string *err)
{
    out = perf_probe_arg{};
    const std::string whole(text);
    std::string_view s = text;
    if (size_t eq = s.find('='); eq != std::string_view::npos) {
        out.name = std::string(s.substr(0, eq));
        if (!is_c_identifier(out.name))
            return fail(err, "'" + whole + "': '" + out.name + "' is not a valid argument name");
        s = s.substr(eq + 1);
    }
    if (size_t colon = s.find(':'); colon != std::string_view::npos) {
        out.type = std::string(s.substr(colon + 1));
        if (out.type.empty()) return fail(err, "'" + whole + "': empty type after ':'");
        s = s.substr(0, colon);
    }
    if (s.empty()) return fail(err, "'" + whole + "': empty argument");
    size_t sep = s.find_first_of("-.[");
    if (!is_ident_start(s[0]) || sep == std::string_view::npos) {
        out.var = std::string(s);
        if (is_ident_start(s[0]) && !is_c_identifier(s))
            return fail(err, "'" + whole + "': '" + out.var + "' is not a variable name");
        return true;
    }
    out.var = std::string(s.substr(0, sep));
    if (!is_c_identifier(out.var))
        return fail(err, "'" + whole + "': '" + out.var + "' is not a variable name");
    s = s.substr(sep);
    while (!s.empty()) {
        perf_probe_field f;
        if (s[0] == '[') {
            size_t close = s.find(']');
            long v;
            if (close == std::string_view::npos ||
                !parse_int(s.substr(1, close - 1), LONG_MIN, LONG_MAX, v))
                return fail(err, "'" + whole + "': an array index must be a number");
            f.is_index = true;
            f.index = v;
            s = s.substr(close + 1);
        } else {
            if (s[0] == '.') {
                s = s.substr(1);
            } else if (s.size() > 1 && s[0] == '-' && s[1] == '>') {
                f.arrow = true;
                s = s.substr(2);
            } else {
                return fail(err, "'" + whole + "': expected '.', '->' or '[' at '" +
                                     std::string(s) + "'");
            }
            size_t end = s.find_first_of("-.[");
            f.name = std::string(s.substr(0, end));
            if (!is_c_identifier(f.name))
                return fail(err, "'" + whole + "': '" + f.name + "' is not a member name");
            s = end == std::string_view::npos ? std::string_view{} : s.substr(end);
        }
        out.fields.push_back(std::move(f));
    }
    return true;
}

bool parse_line_range(std::string_view text, line_range_spec &out, std::string *err)
{
    out = line_range_spec{};
    const std::string whole(text);
    std::string_view name = text;
    if (size_t colon = text.find(':'); colon != std::string_view::npos) {
        name = text.substr(0, colon);
        std::string_view range = text.substr(colon + 1);
        size_t op = range.find_first_of("+-", 1);
        long start, end;
        if (!parse_int(range.substr(0, op), 0, INT_MAX, start))
            return fail(err, "'" + whole + "': bad start line '" +
                                 std::string(range.substr(0, op)) + "'");
        out.start = static_cast<int>(start);
        if (op != std::string_view::npos) {
            if (!parse_int(range.substr(op + 1), 0, INT_MAX, end))
                return fail(err, "'" + whole + "': bad end line '" +
                                     std::string(range.substr(op + 1)) + "'");
            if (range[op] == '+') {
                if (end < 1) return fail(err, "'" + whole + "': +NUM needs at least one line");
                end = start + end - 1;
            }
            if (end < start)
                return fail(err, "'" + whole + "': the start line must not be after the end line");
            out.end = static_cast<int>(end);
        }
    }
    if (size_t at = name.find('@'); at != std::string_view::npos) {
        out.function = std::string(name.substr(0, at));
        out.file = std::string(name.substr(at + 1));
        if (!is_c_identifier(out.function) || out.file.empty())
            return fail(err, "'" + whole + "': expected FUNC@SRC");
    } else if (name.find_first_of("/.") != std::string_view::npos) {
        out.file = std::string(name);
    } else if (is_c_identifier(name)) {
        out.function = std::string(name);
    } else {
        return fail(err,
                    "'" + whole + "': '" + std::string(name) + "' is not a function or file name");
    }
    return true;
}

} // namespace dprobe::tools
