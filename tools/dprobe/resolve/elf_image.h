// An ELF file mapped read-only, with its symbols (core/symbols.h read_object_file at bias 0)
// and the bytes of its code by virtual address: what `dprobe funcs` and `dprobe probe` need
// to judge a function's entry without running the program.
#pragma once

#include "arch/x86_64/insn_analysis.h"

#include "core/symbols.h"
#include "tools/unique_mapping.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace dprobe::tools
{

class elf_image
{
  public:
    // Opens PATH. On failure returns nullptr and sets *err to a message naming the file.
    static std::unique_ptr<elf_image> open(const std::string &path, std::string *err);
    elf_image(const elf_image &) = delete;
    elf_image &operator=(const elf_image &) = delete;

    const std::string &path() const { return path_; } // as given
    const std::string &real_path() const { return real_; }
    // The module name a `lib:sym` place uses: basename of the real path.
    std::string module_name() const;
    const loaded_object &object() const { return *obj_; }
    // Whether the file has a full symbol table (.symtab): a stripped one has only the
    // functions it exports (.dynsym), its debug file the others.
    bool has_symtab() const { return has_symtab_; }

    // The file bytes of virtual address VADDR, available for at least *AVAIL bytes inside
    // one executable PT_LOAD segment; nullptr when VADDR is not file-backed code.
    const uint8_t *code_at(uintptr_t vaddr, size_t *avail = nullptr) const;
    // The file's bytes at their virtual addresses, in any PT_LOAD segment (code, jump
    // tables), for the analysis the runtime makes on the live text.
    const arch::mem_view &memory() const { return view_; }

  private:
    elf_image() = default;
    std::string path_, real_;
    std::shared_ptr<loaded_object> obj_;
    unique_mapping mapping_; // the file, read-only
    const uint8_t *map_ = nullptr;
    size_t size_ = 0;
    bool has_symtab_ = false;
    struct load {
        uint64_t vaddr, filesz, offset;
        bool exec;
    };
    std::vector<load> loads_;
    struct file_view final : arch::mem_view {
        const elf_image *img = nullptr;
        bool read(uintptr_t addr, void *out, size_t len) const noexcept override;
    } view_;
};

// How a function's entry is traced (dprobe funcs' SITE column), as `dprobe record` does it:
// a compiled-in site, a jump site (core/jump_plan.h, the same decision), an int3 entry, or
// not at all (a function dprobe never hooks, a cold fragment).
enum class entry_site { fentry, patchable, jump, int3, untraced };
const char *entry_site_name(entry_site s);

struct func_site_info {
    const ksym *sym = nullptr;
    entry_site kind = entry_site::int3;
    uintptr_t site = 0; // the probe address: after endbr64 when present
    std::string detail; // fentry: "call" / "GOT call"; patchable: sled form; jump: the
                        // region; int3, untraced: why
};

// Classifies every function of IMG (aliases collapsed onto the preferred name).
std::vector<func_site_info> classify_functions(const elf_image &img);

} // namespace dprobe::tools
