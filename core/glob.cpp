// A transcription of lib/glob.c over string_views. The end of either view plays the role of
// the C string's NUL, so an embedded NUL is an ordinary character here.
#include "core/glob.h"

namespace dprobe
{

namespace
{
constexpr int kEnd = -1;

inline int at(std::string_view s, size_t i) noexcept
{
    return i < s.size() ? static_cast<unsigned char>(s[i]) : kEnd;
}
} // namespace

bool glob_match(std::string_view pat, std::string_view str) noexcept
{
    // Backtrack to the previous '*' on mismatch and retry one character later in str.
    // Because '*' matches everything, one level of backtracking is always enough.
    size_t p = 0, s = 0;
    size_t back_pat = 0, back_str = 0;
    bool have_back = false;

    for (;;) {
        int c = at(str, s++);
        int d = at(pat, p++);
        bool literal = true;

        switch (d) {
        case '?':
            if (c == kEnd) return false;
            literal = false;
            break;
        case '*':
            if (p >= pat.size()) // trailing '*' matches whatever is left
                return true;
            back_pat = p;
            back_str = --s; // allow a zero-length match
            have_back = true;
            literal = false;
            break;
        case '[': {
            // lib/glob.c would let a negated class consume the terminating NUL; a class
            // always needs a character here.
            if (c == kEnd) goto backtrack;
            int first = at(pat, p);
            bool inverted = first == '!' || first == '^';
            size_t cls = p + (inverted ? 1 : 0);
            int a = at(pat, cls++);
            bool match = false, malformed = false;
            // Spans are a single character or a range a-b; the first may be ']'.
            do {
                int b = a;
                if (a == kEnd) {
                    malformed = true;
                    break;
                }
                if (at(pat, cls) == '-' && at(pat, cls + 1) != ']') {
                    b = at(pat, cls + 1);
                    if (b == kEnd) {
                        malformed = true;
                        break;
                    }
                    cls += 2;
                }
                match |= (c != kEnd && a <= c && c <= b);
            } while ((a = at(pat, cls++)) != ']');
            if (malformed) break; // the '[' is matched as itself below
            if (match == inverted) goto backtrack;
            p = cls;
            literal = false;
            break;
        }
        case '\\':
            d = at(pat, p++);
            break;
        default:
            break;
        }
        if (!literal) continue;
        if (c == d) {
            if (d == kEnd) return true;
            continue;
        }
    backtrack:
        if (c == kEnd || !have_back) return false;
        p = back_pat;
        s = ++back_str;
    }
}

bool glob_is_pattern(std::string_view pattern) noexcept
{
    return pattern.find_first_of("*?[\\") != std::string_view::npos;
}

} // namespace dprobe
