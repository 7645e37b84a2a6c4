// Shell-style wildcard matching with the semantics of the kernel's lib/glob.c, which is
// what ftrace filters (set_ftrace_filter, fprobe filters) use on symbol names.
#pragma once

#include <string_view>

namespace dprobe
{

// Whole-string match of str against pattern:
//   *      any run of characters (including none)
//   ?      exactly one character
//   [...]  one character of a class: single characters and ranges a-z; [!...] (or [^...])
//          negates; a ']' right after '[' or '[!' is a literal member; a '-' first or last
//          is literal; a class without a closing ']' makes the '[' an ordinary character
//   \c     the character c literally (lib/glob.c escapes too)
// '/' and a leading '.' are not special: these are symbol names, not paths.
bool glob_match(std::string_view pattern, std::string_view str) noexcept;

// True when pattern holds a metacharacter, i.e. is worth glob_match rather than ==
// (the kernel's filter_parse_regex makes the same test).
bool glob_is_pattern(std::string_view pattern) noexcept;

} // namespace dprobe
