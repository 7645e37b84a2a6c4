// The process's loaded objects and their symbols: kallsyms and the module list of the
// kernel, for one user-space process. Objects come from dl_iterate_phdr, symbols and
// patch-site tables from the files themselves (libelf).
//
// Threading: kallsyms::refresh() serialises writers with a mutex and publishes an immutable
// snapshot; every reader works on a snapshot it loaded atomically, so lookups never block
// on a refresh and an object_ptr stays valid after its object is dlclose'd.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace dprobe
{

struct ksym {
    uintptr_t addr; // runtime address (load bias applied)
    uint64_t size;
    uint8_t type;     // STT_FUNC, STT_GNU_IFUNC, STT_OBJECT
    uint8_t bind;     // STB_GLOBAL, STB_LOCAL, STB_WEAK
    std::string name; // as in the symbol table (mangled; no @version)
    // A compatibility version ("free@GLIBC_2.2.5" beside "free@@..."): kept for programs
    // linked long ago, never what a new link binds; named last among its aliases.
    bool compat = false;
};

// Whether LIB, the library part of a "lib:sym" spec, names the object NAME (its file's base
// name) at PATH: the name itself ("libz.so.1"), the name up to one of its dots ("libz",
// "libz.so"), the whole path, or a glob ("libpython3*", "*/plugins/*.so": matched against the
// path when it holds a '/', else against the name).
bool object_spec_matches(std::string_view lib, std::string_view name, std::string_view path);

struct loaded_object {
    uint64_t id = 0;  // unique for the life of the process, never reused
    std::string path; // absolute path ("" for the vdso); main program: realpath of /proc/self/exe
    std::string name; // basename of path, "[vdso]" for the vdso: the "module name"
    uintptr_t load_bias = 0; // dlpi_addr
    struct segment {
        uintptr_t start, end; // page-aligned runtime range [start, end)
        int prot;             // PROT_* from p_flags
    };
    std::vector<segment> segments; // PT_LOAD segments, in program-header order
    bool is_main = false, is_vdso = false;
    // DT_SONAME and the DT_NEEDED entries of its dynamic section: which objects it made the
    // loader map (see objects_only_for()).
    std::string soname;
    std::vector<std::string> needed;

    // Defined STT_FUNC/STT_GNU_IFUNC symbols with size > 0, sorted by address and, among
    // aliases, preferred name first (default versions before compatibility ones; global,
    // weak, local; then fewest leading underscores; then name). Exact duplicates removed, aliases
    // kept. From .symtab when the file has one, else .dynsym.
    std::vector<ksym> funcs;
    // Defined STT_OBJECT symbols (TLS skipped: it has no single address), same order.
    std::vector<ksym> data;
    // func_reach[i] / data_reach[i]: the highest end address of funcs[0..i] / data[0..i],
    // so an address search can stop walking back as soon as nothing earlier can contain it.
    std::vector<uintptr_t> func_reach, data_reach;
    // Indices into funcs / data sorted by name, for lookups by name.
    std::vector<uint32_t> func_names, data_names;

    // Runtime addresses of the NOP sleds listed in __patchable_function_entries
    // (-fpatchable-function-entry=N), sorted, zero (discarded) entries dropped.
    std::vector<uintptr_t> patchable_entries;
    // Runtime addresses of GOT slots the dynamic linker fills with &__fentry__
    // (R_X86_64_GLOB_DAT / R_X86_64_JUMP_SLOT against __fentry__): the PIE flavour of -mfentry.
    std::vector<uintptr_t> fentry_got_slots;

    bool contains(uintptr_t addr) const;
    bool is_text(uintptr_t addr) const;
    // The function containing addr (the innermost, under its preferred name), or nullptr.
    const ksym *func_at(uintptr_t addr) const;
    // The data symbol containing addr (or starting exactly at it when its size is 0).
    const ksym *data_at(uintptr_t addr) const;
    std::vector<const ksym *> funcs_named(std::string_view name) const;
    // Whether LIB, the "lib" of a "lib:sym" spec, names this object (object_spec_matches).
    bool matches(std::string_view lib) const;
    const ksym *data_named(std::string_view name) const;
};
using object_ptr = std::shared_ptr<const loaded_object>;

struct sym_hit {
    object_ptr obj;
    const ksym *sym; // points into obj->funcs or obj->data
};

// Parse an ELF file as if it were loaded with the given bias (ignored for ET_EXEC), without
// loading it. Segments, symbols and patch-site tables are filled in; is_main/is_vdso are
// false. Returns nullptr and sets *err when the file cannot be read as ELF.
// DEBUG_FILE: a stripped file takes its symbols from its separate debug file when there is
// one (by build id, or .gnu_debuglink next to it, in .debug/ or under /usr/lib/debug).
// Names are then right everywhere; but a jump site placed by such a symbol may not be safe
// in hand-written code that other functions jump into (glibc's string functions), so the
// process's own symbol table takes them for its main program only.
std::shared_ptr<loaded_object> read_object_file(const std::string &path, uintptr_t load_bias,
                                                std::string *err = nullptr,
                                                bool debug_file = false);
// The same over an ELF image in memory (the vdso); the bytes are copied first.
std::shared_ptr<loaded_object> read_object_image(const void *image, size_t size,
                                                 uintptr_t load_bias, std::string *err = nullptr);

class kallsyms
{
  public:
    static kallsyms &instance();

    struct update {
        std::vector<object_ptr> added, removed;
    };
    // Re-walk dl_iterate_phdr. Objects already known (same name and load bias) are kept as
    // the same object_ptr; new ones are read; vanished ones are reported removed. Cheap when
    // the loader's dlpi_adds/dlpi_subs counters have not moved.
    update refresh();
    // False when refresh()'s lock is held: in a forked child, by a thread of the parent
    // that no longer exists (core/dl_notify.cpp checks).
    bool refresh_lock_free() const;

    // The current objects in dl_iterate_phdr order (main program first). Empty until the
    // first refresh() (instance() does one).
    std::shared_ptr<const std::vector<object_ptr>> objects() const;
    object_ptr object_of(uintptr_t addr) const;

    // "name" looks in every object; "lib:name" only in objects whose name equals lib or
    // starts with lib followed by '.', or whose path equals lib. Offsets are the caller's.
    std::vector<sym_hit> lookup_func(std::string_view spec) const;
    std::vector<sym_hit> lookup_data(std::string_view spec) const;
    // The function (else data symbol) containing addr.
    std::optional<sym_hit> lookup_addr(uintptr_t addr) const;
    // Functions whose name glob-matches filter and not notfilter (empty: exclude nothing).
    // Each may list several globs separated by white space (as set_ftrace_filter takes
    // them), each glob with an optional "lib:" prefix like lookup_func. One hit per address,
    // under its preferred name (funcs' first alias, the name func_at() and every tracefs file
    // give it): a pattern matches that name only, as the kernel matches the one name
    // kallsyms has for an ip; a plain name also matches any alias of the function.
    std::vector<sym_hit> match_funcs(std::string_view filter, std::string_view notfilter) const;
    // The same, in OBJS only.
    std::vector<sym_hit> match_funcs_in(std::span<const object_ptr> objs, std::string_view filter,
                                        std::string_view notfilter) const;

    struct snapshot;

  private:
    friend size_t sprint_symbol(char *, size_t, uintptr_t, bool) noexcept;
    kallsyms();
    std::shared_ptr<const snapshot> load() const;
    struct state;
    std::unique_ptr<state> st_;
};

// Of HITS, one function name's definitions across objects (kallsyms::lookup_func), those a
// reference to the name binds to, as the dynamic linker resolves it: an object's
// compatibility version (step@GLIBC_2.2.5, which glibc keeps for programs linked against an
// old ABI and never binds a new reference to) counts only when nothing else defines the
// name. The rest are kept in order (the main program first). A name defined in several
// objects otherwise stays ambiguous: each is a function of its own.
std::vector<sym_hit> bindable_funcs(std::vector<sym_hit> hits);

// "LIB:NAME" naming HIT's function alone among the loaded objects: its object's name, or its
// path when another loaded object has the same name (NAME: its symbol's).
std::string qualified_func_spec(const sym_hit &hit);

// Kernel %pS: "name+0xoff/0xsize", plus " [objname]" when with_object and the object is not
// the main program; "0x<hex>" for an unknown address. NUL-terminates buf (truncating) and
// returns the length written, like the kernel's sprint_symbol. Does not allocate: it may
// run on a probe's formatting path.
size_t sprint_symbol(char *buf, size_t len, uintptr_t addr, bool with_object = false) noexcept;

} // namespace dprobe
