// An ELF file mapped read-only, with its symbols (core/symbols.h read_object_file at bias 0)
// and the bytes of its code by virtual address: what `dprobe funcs` and `dprobe probe` need
// to judge a function's entry without running the program.
#pragma once

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
};

// How a function's entry can be traced (dprobe funcs' SITE column).
enum class entry_site { fentry, patchable, optimizable, refused };
const char *entry_site_name(entry_site s);

struct func_site_info {
    const ksym *sym = nullptr;
    entry_site kind = entry_site::refused;
    uintptr_t site = 0; // the probe address: after endbr64 when present
    std::string detail; // fentry: "call" / "GOT call"; patchable: sled form; refused: why
};

// Classifies every function of IMG (aliases collapsed onto the preferred name).
std::vector<func_site_info> classify_functions(const elf_image &img);

} // namespace dprobe::tools
