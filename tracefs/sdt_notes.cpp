// SDT notes and their operands (see sdt_notes.h).
#include "tracefs/sdt_notes.h"

#include "arch/x86_64/insn_bytes.h"
#include "arch/x86_64/reg_names.h"
#include "core/symbols.h"
#include "tracefs/fetch_arg.h"

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <memory>

namespace dprobe
{

namespace
{

constexpr uint32_t NT_STAPSDT = 3;

struct load_segment {
    uint64_t vaddr, offset, filesz;
};

bool to_file_offset(const std::vector<load_segment> &loads, uint64_t vaddr, uint64_t &off)
{
    for (const load_segment &l : loads) {
        if (vaddr >= l.vaddr && vaddr < l.vaddr + l.filesz) {
            off = vaddr - l.vaddr + l.offset;
            return true;
        }
    }
    return false;
}

// The pt_regs name of an assembler's register operand (without '%'); false for registers
// pt_regs does not hold as such.
bool pt_regs_name(std::string_view r, std::string &out)
{
    const char *pt = arch::asm_reg_to_pt_regs(r);
    if (!pt) return false;
    out = pt;
    return true;
}

bool parse_int(std::string_view s, long long &v)
{
    return !s.empty() && kstrtoll(s, 0, v) == 0;
}

std::string signed_text(long long v)
{
    return v < 0 ? "-" + std::to_string(-static_cast<unsigned long long>(v))
                 : "+" + std::to_string(v);
}

// The symbols of PATH at their link-time addresses, read once per file.
std::shared_ptr<loaded_object> symbols_of(const std::string &path)
{
    static std::map<std::string, std::shared_ptr<loaded_object>> cache;
    auto it = cache.find(path);
    if (it != cache.end()) return it->second;
    auto o = read_object_file(path, 0);
    cache.emplace(path, o);
    return o;
}

// "sym", "sym+8", "8+sym", "sym-8" to the symbol's address plus the offset.
bool symbol_address(std::string_view text, const std::string &path, uint64_t &addr)
{
    std::string_view name = text;
    long long off = 0;
    size_t op = text.find_first_of("+-");
    if (op != std::string_view::npos) {
        std::string_view a = text.substr(0, op), b = text.substr(op + 1);
        long long n;
        if (parse_int(a, n) && text[op] == '+') { // "8+sym"
            name = b;
            off = n;
        } else if (parse_int(b, n)) { // "sym+8", "sym-8"
            name = a;
            off = text[op] == '-' ? -n : n;
        } else {
            return false;
        }
    }
    auto o = symbols_of(path);
    if (!o || name.empty()) return false;
    const ksym *s = o->data_named(name);
    if (!s) {
        auto f = o->funcs_named(name);
        s = f.empty() ? nullptr : f.front();
    }
    if (!s) return false;
    addr = s->addr + static_cast<uint64_t>(off);
    return true;
}

bool fail(std::string *why, std::string msg)
{
    if (why) *why = std::move(msg);
    return false;
}

// The fetch (without type) of operand OP of probe P.
bool operand_fetch(std::string_view op, const sdt_probe &p, const std::string &path,
                   std::string &out, std::string *why)
{
    std::string reg;
    if (op.starts_with("%")) {
        if (!pt_regs_name(op.substr(1), reg))
            return fail(why, "register " + std::string(op) + " is not one fetch args read");
        out = "%" + reg;
        return true;
    }
    if (op.starts_with("$")) {
        long long v;
        if (!parse_int(op.substr(1), v))
            return fail(why, "constant " + std::string(op) + " is not a number");
        out = "\\" + std::to_string(v);
        return true;
    }
    size_t lp = op.find('(');
    std::string_view disp = op.substr(0, lp);
    if (lp == std::string_view::npos) {
        // An absolute address: a symbol (non-PIC code) or a number.
        long long v;
        uint64_t a;
        if (parse_int(disp, v)) {
            out = "@" + std::to_string(v);
            return true;
        }
        if (!symbol_address(disp, path, a))
            return fail(why, "'" + std::string(disp) + "' is no symbol of " + path);
        // %ip is where a trap on the probe's int3 reports, as after the kernel's int3.
        out = signed_text(static_cast<long long>(a - arch::int3_trap_ip(p.pc))) + "(%ip)";
        return true;
    }
    size_t rp = op.find(')', lp);
    if (rp == std::string_view::npos || rp + 1 != op.size())
        return fail(why, "operand " + std::string(op) + " is not one the assembler writes");
    std::string_view inner = op.substr(lp + 1, rp - lp - 1);
    if (inner.find(',') != std::string_view::npos)
        return fail(why, "base+index addressing " + std::string(op) +
                             " has no fetch-arg form (a fetch adds no two registers)");
    if (!inner.starts_with("%") || !pt_regs_name(inner.substr(1), reg))
        return fail(why, "base register " + std::string(inner) + " is not one fetch args read");
    long long v = 0;
    if (reg == "ip") {
        uint64_t a;
        if (!symbol_address(disp, path, a))
            return fail(why, "'" + std::string(disp) + "' (rip-relative) is no symbol of " + path);
        out = signed_text(static_cast<long long>(a - arch::int3_trap_ip(p.pc))) + "(%ip)";
        return true;
    }
    if (!disp.empty() && !parse_int(disp, v))
        return fail(why, "displacement '" + std::string(disp) + "' off %" + reg +
                             " is a link-time symbol: its run-time address is unknown");
    out = signed_text(v) + "(%" + reg + ")";
    return true;
}

} // namespace

bool read_sdt_probes(const std::string &path, std::vector<sdt_probe> &out, std::string *err)
{
    out.clear();
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        *err = path + ": " + std::strerror(errno);
        return false;
    }
    elf_version(EV_CURRENT);
    Elf *e = elf_begin(fd, ELF_C_READ_MMAP, nullptr);
    if (!e || elf_kind(e) != ELF_K_ELF) {
        if (e) elf_end(e);
        ::close(fd);
        *err = path + ": not an ELF file";
        return false;
    }
    std::vector<load_segment> loads;
    size_t nph = 0;
    elf_getphdrnum(e, &nph);
    for (size_t i = 0; i < nph; i++) {
        GElf_Phdr ph;
        if (gelf_getphdr(e, static_cast<int>(i), &ph) && ph.p_type == PT_LOAD)
            loads.push_back({ph.p_vaddr, ph.p_offset, ph.p_filesz});
    }
    size_t shstrndx = 0;
    elf_getshdrstrndx(e, &shstrndx);
    uint64_t base_addr = 0;
    bool have_base = false;
    std::vector<Elf_Scn *> notes;
    for (Elf_Scn *scn = nullptr; (scn = elf_nextscn(e, scn));) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh)) continue;
        const char *n = elf_strptr(e, shstrndx, sh.sh_name);
        if (!n) continue;
        if (std::strcmp(n, ".stapsdt.base") == 0) {
            base_addr = sh.sh_addr;
            have_base = true;
        } else if (std::strcmp(n, ".note.stapsdt") == 0 && sh.sh_type == SHT_NOTE) {
            notes.push_back(scn);
        }
    }
    for (Elf_Scn *scn : notes) {
        Elf_Data *d = elf_getdata(scn, nullptr);
        size_t off = 0, name_off, desc_off;
        GElf_Nhdr nh;
        while (d && (off = gelf_getnote(d, off, &nh, &name_off, &desc_off)) > 0) {
            const char *owner = static_cast<const char *>(d->d_buf) + name_off;
            if (nh.n_type != NT_STAPSDT || nh.n_namesz != 8 || std::strcmp(owner, "stapsdt") != 0 ||
                nh.n_descsz < 3 * 8)
                continue;
            const char *desc = static_cast<const char *>(d->d_buf) + desc_off;
            uint64_t words[3];
            std::memcpy(words, desc, sizeof words);
            const char *p = desc + sizeof words, *end = desc + nh.n_descsz;
            sdt_probe sp;
            auto next = [&](std::string &s) {
                const char *z = static_cast<const char *>(std::memchr(p, 0, end - p));
                if (!z) return false;
                s.assign(p, z);
                p = z + 1;
                return true;
            };
            std::string args;
            if (!next(sp.provider) || !next(sp.name)) continue;
            next(args);
            // Prelink moved the file by the difference between .stapsdt.base's address now
            // and when the note was written.
            const uint64_t adjust = have_base ? base_addr - words[1] : 0;
            sp.pc = words[0] + adjust;
            sp.semaphore = words[2] ? words[2] + adjust : 0;
            if (!to_file_offset(loads, sp.pc, sp.pc_offset)) continue;
            if (sp.semaphore && !to_file_offset(loads, sp.semaphore, sp.sem_offset))
                sp.semaphore = 0;
            for (size_t i = 0; i < args.size();) {
                size_t sp_ = args.find(' ', i);
                std::string a = args.substr(i, sp_ == std::string::npos ? sp_ : sp_ - i);
                if (!a.empty()) sp.args.push_back(a);
                i = sp_ == std::string::npos ? args.size() : sp_ + 1;
            }
            out.push_back(std::move(sp));
        }
    }
    elf_end(e);
    ::close(fd);
    return true;
}

std::string sdt_arg_fetch(const std::string &spec, int index, const sdt_probe &p,
                          const std::string &path, std::string *why)
{
    size_t at = spec.find('@');
    if (at == std::string::npos || at == 0) {
        // Old notes carry bare operands; their size is unknown: the default type.
        std::string f;
        if (!operand_fetch(spec, p, path, f, why)) return "";
        return "arg" + std::to_string(index) + "=" + f;
    }
    std::string_view sz = std::string_view(spec).substr(0, at);
    bool is_signed = sz.starts_with("-");
    if (is_signed) sz.remove_prefix(1);
    bool is_float = sz.ends_with("f");
    if (is_float) sz.remove_suffix(1);
    long long bytes = 0;
    if (!parse_int(sz, bytes) || (bytes != 1 && bytes != 2 && bytes != 4 && bytes != 8)) {
        if (why) *why = "size '" + std::string(spec.substr(0, at)) + "' is not 1, 2, 4 or 8";
        return "";
    }
    std::string_view op = std::string_view(spec).substr(at + 1);
    if (is_float && op.starts_with("%xmm")) {
        if (why)
            *why = "a floating-point value in " + std::string(op) +
                   ": fetch args read the general registers only";
        return "";
    }
    std::string f;
    if (!operand_fetch(op, p, path, f, why)) return "";
    // A float in a general register or memory: its bits.
    std::string type = (is_float ? "x" : is_signed ? "s" : "u") + std::to_string(bytes * 8);
    return "arg" + std::to_string(index) + "=" + f + ":" + type;
}

} // namespace dprobe
