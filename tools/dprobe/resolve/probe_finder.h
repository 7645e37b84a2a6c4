// perf's probe-finder for dprobe: resolves a perf-probe point (FUNC, FUNC+OFF, FUNC:RLN,
// FUNC@SRC, SRC:ALN, FUNC%return) to one address of a binary using its line table, and
// translates C variables at that address into fetch args.
//
// Choices (where perf would make several probes, dprobe makes one or says why not):
// - A line's address is the lowest line-table address that begins a statement of that
//   line inside the function, leaving out the code of other functions inlined into it.
// - A function kept out of line is probed there, even if it is also inlined elsewhere; a
//   function that only exists inlined is probed in its inlined copy when there is one copy.
//   A line that lands in several functions is refused with the list.
// - At a function entry (FUNC, FUNC%return, a line whose code starts there) parameters come
//   from the calling convention ($argN, see dwarf_params.h); local variables have no value
//   yet and are refused. Elsewhere every variable is read from its DWARF location at that
//   address.
#pragma once

#include "tracefs/dwarf/debuginfo.h"
#include "tracefs/dwarf/dwarf_fetch.h"
#include "tools/dprobe/resolve/elf_image.h"
#include "tools/dprobe/resolve/probe_point.h"

#include <string>
#include <vector>

namespace dprobe::tools
{

struct probe_site {
    uint64_t addr = 0;  // file virtual address of the probe
    std::string symbol; // the ELF function containing addr: the place is symbol+offset
    uint64_t offset = 0;
    dwarf_function func;    // the function copy the point is in (its scope)
    Dwarf_Die subprogram{}; // the out-of-line function containing addr (its frame base)
    bool entry = false;     // at the entry of an out-of-line function: parameters by the
                            // calling convention
    bool retprobe = false;
    int line = 0;               // the absolute source line of a line probe, else 0
    const char *file = nullptr; // its file
    std::string event;          // perf's event name: FUNC, FUNC_OFF, FUNC__return, FUNC_L<N>
};

// One variable visible at a site.
struct site_variable {
    std::string name;
    std::string type_name; // C type, as perf's --vars shows it
    bool param = false;
    bool located = false;   // has a value at the site (listed by --vars)
    bool fetchable = false; // ... and a fetch type without naming a member ($vars)
    var_fetch fetch;        // when fetchable
    std::string why;        // when not located or not fetchable
};

class probe_finder
{
  public:
    probe_finder(const debuginfo &di, const elf_image &img) : di_(di), img_(img) {}

    // The copies of function NAME (declared in FILE when not empty), as debuginfo finds
    // them; else, when NAME is a symbol of the binary, the function at its address (an
    // alias: malloc is __libc_malloc in glibc's debug info).
    std::vector<dwarf_function> functions(const std::string &name, const std::string &file) const;

    // Resolves PP (which must name a function or a source line) to one site.
    bool resolve(const perf_probe_point &pp, probe_site &site, std::string *err) const;

    // Translates ARG (a variable reference, arg.is_variable()) at SITE.
    bool translate(const probe_site &site, const perf_probe_arg &arg, var_fetch &out,
                   std::string *err) const;

    // The parameters and local variables at SITE (parameters first, then locals from the
    // function's outermost block inwards), declaration order.
    std::vector<site_variable> variables(const probe_site &site) const;

  private:
    struct found_var;
    bool lookup(const probe_site &site, const std::string &name, found_var &out,
                std::string *err) const;
    bool locate(const probe_site &site, Dwarf_Die *var, fetch_loc &loc, std::string *why) const;
    bool finish(const probe_site &site, fetch_loc loc, Dwarf_Die type, const perf_probe_arg &arg,
                var_fetch &out, std::string *err) const;
    std::optional<std::pair<std::string, int64_t>> symbolize(uint64_t vaddr) const;

    const debuginfo &di_;
    const elf_image &img_;
};

} // namespace dprobe::tools
