// The debug information of one ELF file through libdw, at the file's own virtual addresses:
// functions by name and by address, line tables, the scopes around an address, frame bases
// and the call-frame information that gives the CFA at an address. Two users: `dprobe probe`
// (perf's probe-finder: source lines and variables to probe places and fetch args) and the
// dynamic_events parser (argument names and types, the kernel's BTF arguments; see
// tracefs/trace_btf.h), which is why it lives in the tracefs layer.
// A debuginfo is not thread-safe (libdw's DIE walks are not): its users serialise.
#pragma once

#include <elfutils/libdw.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dprobe
{

// One copy of a function in the code: the out-of-line body (DW_TAG_subprogram with code),
// or a copy inlined into another function (DW_TAG_inlined_subroutine).
struct dwarf_function {
    Dwarf_Die cu{};
    Dwarf_Die die{};
    bool inlined = false;
    uint64_t entry = 0; // entry pc
    std::string name;
    const char *decl_file = nullptr; // as the CU's file table names it
    int decl_line = 0;
};

// One row of a line table (end-of-sequence rows are left out).
struct dwarf_line {
    uint64_t addr = 0;
    int line = 0;
    const char *file = nullptr; // owned by libdw
    bool is_stmt = false;
};

class debuginfo
{
  public:
    // Opens PATH, or for a stripped file its separate debug file (found by build id or
    // .gnu_debuglink under /usr/lib/debug, where debug-symbol packages put them, and taken
    // only when it is PATH's: the same build id, or the CRC the debuglink records). nullptr
    // with *err set when the file can't be read or has no DWARF anywhere.
    static std::unique_ptr<debuginfo> open(const std::string &path, std::string *err);
    ~debuginfo();
    debuginfo(const debuginfo &) = delete;
    debuginfo &operator=(const debuginfo &) = delete;

    Dwarf *dwarf() const { return dw_; }
    const std::string &path() const { return path_; }
    // The separate debug file the DWARF came from; empty when it is PATH itself.
    const std::string &debug_path() const { return debug_path_; }

    // Every compilation unit.
    std::vector<Dwarf_Die> units() const;

    // Copies of the function NAME with code, out-of-line ones first; FILE (when not empty)
    // must match the file the function is declared in (see file_matches).
    std::vector<dwarf_function> find_functions(std::string_view name, std::string_view file) const;

    // The out-of-line function whose code contains ADDR.
    std::optional<dwarf_function> function_at(uint64_t addr) const;

    // CU's line table in table order.
    std::vector<dwarf_line> lines(Dwarf_Die *cu) const;

    // The statement rows of F's own source lines: in F's code, in the file F is declared
    // in, outside the copies of other functions inlined into F.
    std::vector<dwarf_line> function_lines(const dwarf_function &f) const;

    // Address ranges of FUNC's code that belong to copies of other functions inlined into
    // it, so line lookups can leave the callees' lines out.
    std::vector<std::pair<uint64_t, uint64_t>> inlined_ranges(Dwarf_Die *func) const;

    // The canonical frame address at PC as DWARF ops (normally DW_OP_bregx SP/BP, OFF), from
    // .eh_frame or .debug_frame. False when no CFI covers PC.
    bool cfa_at(uint64_t pc, std::vector<Dwarf_Op> &ops) const;

    // Where to read FILE (a name from CU's file table): as is when absolute, else under the
    // CU's compilation directory.
    std::string source_path(Dwarf_Die *cu, const char *file) const;

  private:
    debuginfo() = default;
    std::string path_, debug_path_;
    int fd_ = -1, debug_fd_ = -1;
    Elf *elf_ = nullptr; // PATH itself: its .eh_frame
    Dwarf *dw_ = nullptr;
    Dwarf_CFI *cfi_eh_ = nullptr;  // from PATH's .eh_frame (freed by dwarf_cfi_end)
    Dwarf_CFI *cfi_dbg_ = nullptr; // from .debug_frame (owned by dw_)
};

// Whether the file name FULL is SPEC or ends with "/" SPEC (perf's strtailcmp, on path
// component boundaries).
bool file_matches(std::string_view full, std::string_view spec);

// The C name of a type DIE, as perf prints it: "int", "struct item*", "const char*",
// "int[4]"; "void" for none.
std::string dwarf_type_name(Dwarf_Die *type);

} // namespace dprobe
