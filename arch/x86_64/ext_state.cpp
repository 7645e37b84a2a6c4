#include "arch/x86_64/ext_state.h"

#include "arch/x86_64/ftrace_arch.h"
#include "arch/x86_64/plt_bind.h"
#include "arch/x86_64/uaccess.h"

#include <Zydis/Zydis.h>

#include <algorithm>
#include <cpuid.h>
#include <cstdio>
#include <dlfcn.h>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <vector>

extern "C" {
__attribute__((visibility("hidden"))) unsigned long dprobe_xsave_size;
__attribute__((visibility("hidden"))) unsigned char dprobe_have_xsavec;
__attribute__((visibility("hidden"))) unsigned char dprobe_have_avx;
__attribute__((visibility("hidden"))) __thread unsigned dprobe_ext_unsaved
    __attribute__((tls_model("initial-exec")));
}

namespace dprobe::arch
{

namespace
{

__attribute__((constructor)) void detect_xsave()
{
    unsigned a, b, c, d;
    // CPUID.(EAX=0DH, ECX=0): EBX = bytes needed by XSAVE for the features enabled in XCR0.
    dprobe_xsave_size = __get_cpuid_count(0xd, 0, &a, &b, &c, &d) ? b : 1024;
    dprobe_xsave_size = (dprobe_xsave_size + 63) & ~63UL;
    dprobe_have_xsavec = __get_cpuid_count(0xd, 1, &a, &b, &c, &d) && (a & 2);
    // AVX enabled by the OS (XCR0 has the SSE and AVX state): vzeroupper exists.
    if (__get_cpuid(1, &a, &b, &c, &d) && (c & bit_OSXSAVE) && (c & bit_AVX)) {
        uint32_t lo, hi;
        __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
        dprobe_have_avx = (lo & 6) == 6;
    }
}

// Instruction categories of integer code. Anything else (x87, SSE, AVX*, MMX, KMASK,
// XSAVE, AES, SHA, ...) may read or write the extended state. Categories here that also
// hold vector forms (DATAXFER has movd/movq, CONVERT has cvtsi2sd, ...) are caught by the
// operand check.
bool integer_category(ZydisInstructionCategory c)
{
    switch (c) {
    case ZYDIS_CATEGORY_ADOX_ADCX:
    case ZYDIS_CATEGORY_BINARY:
    case ZYDIS_CATEGORY_BITBYTE:
    case ZYDIS_CATEGORY_BMI1:
    case ZYDIS_CATEGORY_BMI2:
    case ZYDIS_CATEGORY_CALL:
    case ZYDIS_CATEGORY_CET:
    case ZYDIS_CATEGORY_CMOV:
    case ZYDIS_CATEGORY_COND_BR:
    case ZYDIS_CATEGORY_CONVERT:
    case ZYDIS_CATEGORY_DATAXFER:
    case ZYDIS_CATEGORY_FLAGOP:
    case ZYDIS_CATEGORY_LOGICAL:
    case ZYDIS_CATEGORY_LZCNT:
    case ZYDIS_CATEGORY_MISC:
    case ZYDIS_CATEGORY_NOP:
    case ZYDIS_CATEGORY_POP:
    case ZYDIS_CATEGORY_PREFETCH:
    case ZYDIS_CATEGORY_PUSH:
    case ZYDIS_CATEGORY_RDPID:
    case ZYDIS_CATEGORY_RDRAND:
    case ZYDIS_CATEGORY_RDSEED:
    case ZYDIS_CATEGORY_RET:
    case ZYDIS_CATEGORY_ROTATE:
    case ZYDIS_CATEGORY_SEMAPHORE:
    case ZYDIS_CATEGORY_SETCC:
    case ZYDIS_CATEGORY_SHIFT:
    case ZYDIS_CATEGORY_STRINGOP:
    case ZYDIS_CATEGORY_SYSCALL:
    case ZYDIS_CATEGORY_UNCOND_BR:
    case ZYDIS_CATEGORY_WIDENOP:
        return true;
    default:
        return false;
    }
}

// Instructions of other categories that only touch general registers and memory.
bool integer_mnemonic(ZydisMnemonic m)
{
    switch (m) {
    case ZYDIS_MNEMONIC_RDTSC:
    case ZYDIS_MNEMONIC_RDTSCP:
    case ZYDIS_MNEMONIC_RDPMC:
    case ZYDIS_MNEMONIC_XGETBV:
    case ZYDIS_MNEMONIC_CPUID:
    case ZYDIS_MNEMONIC_PAUSE:
    case ZYDIS_MNEMONIC_LFENCE:
    case ZYDIS_MNEMONIC_MFENCE:
    case ZYDIS_MNEMONIC_SFENCE:
        return true;
    default:
        return false;
    }
}

// Register classes integer code uses.
bool integer_register(ZydisRegister r)
{
    if (r == ZYDIS_REGISTER_NONE) return true;
    switch (ZydisRegisterGetClass(r)) {
    case ZYDIS_REGCLASS_GPR8:
    case ZYDIS_REGCLASS_GPR16:
    case ZYDIS_REGCLASS_GPR32:
    case ZYDIS_REGCLASS_GPR64:
    case ZYDIS_REGCLASS_FLAGS:
    case ZYDIS_REGCLASS_IP:
    case ZYDIS_REGCLASS_SEGMENT:
        return true;
    default:
        return false; // x87, MMX, XMM/YMM/ZMM, TMM, masks, MXCSR, control, ...
    }
}

// Why the instruction may touch the extended state, or nullptr.
const char *ext_use(const ZydisDecodedInstruction &zi, const ZydisDecodedOperand *ops)
{
    if (!integer_category(zi.meta.category) && !integer_mnemonic(zi.mnemonic))
        return "its kind may use the extended state";
    for (unsigned i = 0; i < zi.operand_count; ++i) {
        const ZydisDecodedOperand &o = ops[i];
        if (o.type == ZYDIS_OPERAND_TYPE_REGISTER && !integer_register(o.reg.value))
            return "it has an extended-state register operand";
        if (o.type == ZYDIS_OPERAND_TYPE_MEMORY &&
            (!integer_register(o.mem.base) || !integer_register(o.mem.index)))
            return "it addresses memory through a vector register";
    }
    return nullptr;
}

// Why the instruction may touch the x87 stack or the MMX registers, or nullptr.
const char *x87_use(const ZydisDecodedInstruction &zi, const ZydisDecodedOperand *ops)
{
    switch (zi.meta.category) {
    case ZYDIS_CATEGORY_X87_ALU:
    case ZYDIS_CATEGORY_FCMOV:
    case ZYDIS_CATEGORY_MMX:
    case ZYDIS_CATEGORY_AMD3DNOW:
    case ZYDIS_CATEGORY_XSAVE:
    case ZYDIS_CATEGORY_XSAVEOPT:
        return "its kind may use the x87 stack";
    default:
        break;
    }
    for (unsigned i = 0; i < zi.operand_count; ++i) {
        const ZydisDecodedOperand &o = ops[i];
        if (o.type != ZYDIS_OPERAND_TYPE_REGISTER) continue;
        const ZydisRegisterClass c = ZydisRegisterGetClass(o.reg.value);
        if (c == ZYDIS_REGCLASS_X87 || c == ZYDIS_REGCLASS_MMX)
            return "it has an x87 or MMX register operand";
    }
    return nullptr;
}

// Why the instruction may touch extended state other than the vector registers 0-15 and
// the MXCSR, or nullptr: x87 or MMX (as above), mask registers, AMX tiles, or a write to a
// vector register 16-31 (reading one, or a mask register, changes nothing).
const char *vector_use(const ZydisDecodedInstruction &zi, const ZydisDecodedOperand *ops)
{
    if (const char *why = x87_use(zi, ops)) return why;
    if (zi.meta.category == ZYDIS_CATEGORY_KMASK || zi.meta.category == ZYDIS_CATEGORY_AMX_TILE)
        return "its kind uses mask registers or AMX tiles";
    for (unsigned i = 0; i < zi.operand_count; ++i) {
        const ZydisDecodedOperand &o = ops[i];
        if (o.type != ZYDIS_OPERAND_TYPE_REGISTER || !(o.actions & ZYDIS_OPERAND_ACTION_MASK_WRITE))
            continue;
        const ZydisRegisterClass c = ZydisRegisterGetClass(o.reg.value);
        if (c == ZYDIS_REGCLASS_MASK || c == ZYDIS_REGCLASS_TMM)
            return "it writes a mask register or an AMX tile";
        if ((c == ZYDIS_REGCLASS_XMM || c == ZYDIS_REGCLASS_YMM || c == ZYDIS_REGCLASS_ZMM) &&
            ZydisRegisterGetId(o.reg.value) >= 16)
            return "it writes a vector register 16-31";
    }
    return nullptr;
}

// Up to 15 readable bytes at ADDR (fewer before an unreadable page).
size_t read_code(uintptr_t addr, uint8_t (&buf)[ZYDIS_MAX_INSTRUCTION_LENGTH])
{
    if (copy_from_user_nofault(buf, reinterpret_cast<const void *>(addr), sizeof buf) == 0)
        return sizeof buf;
    size_t n = 0;
    while (n < sizeof buf &&
           copy_from_user_nofault(buf + n, reinterpret_cast<const void *>(addr + n), 1) == 0)
        ++n;
    return n;
}

std::string at(const char *mnemonic, uintptr_t pc, const char *what)
{
    char b[160];
    std::snprintf(b, sizeof b, "%s at %#lx: %s", mnemonic, static_cast<unsigned long>(pc), what);
    return b;
}

// Functions known to touch no extended state (x87, MMX, vectors) that the scan cannot
// follow: the C library's clock_gettime runs the vDSO through a pointer (an indirect call),
// and the kernel builds the vDSO without x87, MMX or SSE code (-mno-80387 -mno-mmx -mno-sse).
// The trace clock reads it for the POSIX clocks, so every handler that stamps events
// reaches it. Its address as a PLT entry binds it (an interposer's, if any).
uintptr_t ext_free_leaf;

// Functions of the C library's own allocator, known to leave the x87 stack and the MMX
// registers alone: integer C code (x86-64 compilers use SSE for float and double, the x87
// only for long double, which the allocator never computes with), and the memset/memcpy it
// calls are vector code. The scan cannot show it: a first allocation initialises the
// allocator, which reads its tunables through a callback pointer. Every ring-buffer writer
// reaches calloc (a thread's first event registers its exit with pthread_setspecific, which
// may allocate, through the C library's own PLT entry, bound lazily), so without this every
// exit handler that records would set a long double result aside on every return. Only the
// C library's own definitions count: a program that interposes its own allocator has it
// scanned like any other code.
constexpr const char *libc_alloc_names[] = {"malloc", "calloc", "realloc", "free"};
uintptr_t libc_alloc_leaves[4];
uintptr_t libc_alloc_slots[4];  // the C library's GOT slots for its own calls of them
uintptr_t libc_alloc_global[4]; // what those slots bind to (the global definitions)

// All looked up when the runtime is loaded: the lookups take the dynamic linker's lock,
// which a scan must not (see plt_bind.h).
__attribute__((constructor)) void find_leaves()
{
    ext_free_leaf = reinterpret_cast<uintptr_t>(dlsym(RTLD_DEFAULT, "clock_gettime"));
    void *libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
    if (!libc) return;
    for (size_t i = 0; i < std::size(libc_alloc_names); ++i) {
        libc_alloc_leaves[i] = reinterpret_cast<uintptr_t>(dlsym(libc, libc_alloc_names[i]));
        libc_alloc_slots[i] = plt_jump_slot("libc.so.6", libc_alloc_names[i]).value_or(0);
        libc_alloc_global[i] =
            reinterpret_cast<uintptr_t>(dlsym(RTLD_DEFAULT, libc_alloc_names[i]));
    }
    dlclose(libc);
}

bool is_ext_free_leaf(uintptr_t target)
{
    return target && target == ext_free_leaf;
}

bool is_x87_free_libc_alloc(uintptr_t target)
{
    return target && std::find(std::begin(libc_alloc_leaves), std::end(libc_alloc_leaves),
                               target) != std::end(libc_alloc_leaves);
}

// For a GOT slot not bound yet: the function the C library's allocator call through it will
// reach (the global definition, as the resolver will bind it, looked up at load), or 0 when
// the slot is not one of those calls.
uintptr_t libc_alloc_slot_target(uintptr_t slot)
{
    for (size_t i = 0; i < std::size(libc_alloc_names); ++i)
        if (slot && slot == libc_alloc_slots[i]) return libc_alloc_global[i];
    return 0;
}

} // namespace

ext_state_scan ext_state_scan_code(uintptr_t root, bool root_calls_vetted, size_t max_insns,
                                   ext_scope scope)
{
    ext_state_scan res;
    ZydisDecoder dec;
    if (!ZYAN_SUCCESS(ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64))) {
        res.why = "no decoder";
        return res;
    }
    struct item {
        uintptr_t pc;
        bool in_root;
    };
    std::vector<item> work{{root, true}};
    std::unordered_set<uintptr_t> seen, functions{root};
    while (!work.empty()) {
        item it = work.back();
        work.pop_back();
        for (uintptr_t pc = it.pc;;) {
            if (!seen.insert(pc).second) break; // this path joins code already scanned
            if (++res.insns > max_insns) {
                res.why = "more than " + std::to_string(max_insns) + " instructions to scan";
                return res;
            }
            uint8_t buf[ZYDIS_MAX_INSTRUCTION_LENGTH];
            const size_t avail = read_code(pc, buf);
            ZydisDecodedInstruction zi;
            ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
            if (!avail || !ZYAN_SUCCESS(ZydisDecoderDecodeFull(&dec, buf, avail, &zi, ops))) {
                res.why = at("code", pc, avail ? "does not decode" : "is not readable");
                return res;
            }
            const char *name = ZydisMnemonicGetString(zi.mnemonic);
            const uintptr_t next = pc + zi.length;
            const bool rel = zi.raw.imm[0].is_relative;
            uintptr_t target = 0;
            if (rel) ZydisCalcAbsoluteAddress(&zi, &ops[0], pc, &target);
            if (zi.mnemonic == ZYDIS_MNEMONIC_INT3) {
                res.why = at(name, pc, "a probe or a trap: what runs there is not known");
                return res;
            }
            if (zi.mnemonic == ZYDIS_MNEMONIC_UD0 || zi.mnemonic == ZYDIS_MNEMONIC_UD1 ||
                zi.mnemonic == ZYDIS_MNEMONIC_UD2 || zi.mnemonic == ZYDIS_MNEMONIC_HLT)
                break; // faults: the kernel saves the state around signal handlers
            if (zi.meta.branch_type == ZYDIS_BRANCH_TYPE_FAR || zi.mnemonic == ZYDIS_MNEMONIC_INT ||
                zi.mnemonic == ZYDIS_MNEMONIC_INTO || zi.mnemonic == ZYDIS_MNEMONIC_INT1 ||
                zi.mnemonic == ZYDIS_MNEMONIC_XBEGIN || zi.mnemonic == ZYDIS_MNEMONIC_IRET ||
                zi.mnemonic == ZYDIS_MNEMONIC_IRETD || zi.mnemonic == ZYDIS_MNEMONIC_IRETQ) {
                res.why = at(name, pc, "unusual control transfer");
                return res;
            }
            const char *why = scope == ext_scope::all   ? ext_use(zi, ops)
                              : scope == ext_scope::x87 ? x87_use(zi, ops)
                                                        : vector_use(zi, ops);
            if (why) {
                res.why = at(name, pc, why);
                return res;
            }
            const ZydisInstructionCategory cat = zi.meta.category;
            if (cat == ZYDIS_CATEGORY_RET) break;
            // x87 and vector scopes: a call or jump to a PLT entry continues at the function
            // its GOT slot holds once bound (a handler's calls of libdprobe or libc, TLS
            // lookups). A slot still leading to the lazy-binding resolver (a library linked
            // without -z now, such as the C library calling its own exported functions)
            // continues at the function the resolver will bind: the resolver itself saves
            // and restores the whole extended state around its lookup.
            if (scope != ext_scope::all && rel &&
                (cat == ZYDIS_CATEGORY_CALL || cat == ZYDIS_CATEGORY_UNCOND_BR)) {
                if (auto got = plt_got_slot(target)) {
                    uintptr_t bound = 0;
                    if (copy_from_user_nofault(&bound, reinterpret_cast<const void *>(*got),
                                               sizeof bound) != 0) {
                        res.why = at(name, pc, "a PLT entry whose GOT slot is not readable");
                        return res;
                    }
                    if (!bound) {
                        // An undefined weak symbol, bound to nothing for good (glibc does
                        // not bind it later): calling it would fault, so no thread runs
                        // this path (the code tests the symbol first).
                        if (cat == ZYDIS_CATEGORY_UNCOND_BR) break;
                        pc = next;
                        continue;
                    }
                    if (plt_slot_unbound(target, bound)) {
                        // Not bound yet: followed only where the slot is known to be one of
                        // the C library's own calls of its allocator (found at load time).
                        bound = libc_alloc_slot_target(*got);
                        if (!bound) {
                            res.why = at(name, pc, "a call through a PLT entry not bound yet");
                            return res;
                        }
                    }
                    target = bound;
                }
            }
            if (scope != ext_scope::all && rel &&
                (cat == ZYDIS_CATEGORY_CALL || cat == ZYDIS_CATEGORY_UNCOND_BR) &&
                (is_ext_free_leaf(target) ||
                 (scope == ext_scope::x87 && is_x87_free_libc_alloc(target)))) {
                if (cat == ZYDIS_CATEGORY_UNCOND_BR) break; // a tail call: it returns for us
                pc = next;
                continue;
            }
            // A guarded call: what it calls runs with the extended state saved whenever it
            // was not (dprobe_ext_guarded).
            if (rel && target == reinterpret_cast<uintptr_t>(&dprobe_ext_guarded) &&
                (cat == ZYDIS_CATEGORY_CALL || cat == ZYDIS_CATEGORY_UNCOND_BR)) {
                if (cat == ZYDIS_CATEGORY_UNCOND_BR) break;
                pc = next;
                continue;
            }
            if (cat == ZYDIS_CATEGORY_CALL) {
                if (!rel && !(it.in_root && root_calls_vetted)) {
                    res.why = at(name, pc, "indirect call: the callee is not known");
                    return res;
                }
                if (rel && functions.insert(target).second) work.push_back({target, false});
                pc = next;
            } else if (cat == ZYDIS_CATEGORY_UNCOND_BR || cat == ZYDIS_CATEGORY_COND_BR) {
                if (!rel) {
                    res.why = at(name, pc, "indirect jump: the target is not known");
                    return res;
                }
                if (cat == ZYDIS_CATEGORY_COND_BR) work.push_back({target, it.in_root});
                pc = cat == ZYDIS_CATEGORY_COND_BR ? next : target;
            } else {
                pc = next;
            }
        }
    }
    res.functions = functions.size();
    res.clean = true;
    return res;
}

bool ext_state_clean(uintptr_t root, bool root_calls_vetted, ext_scope scope)
{
    static std::mutex mu;
    static std::unordered_map<uintptr_t, bool> cache[2][3];
    auto &c = cache[root_calls_vetted][static_cast<int>(scope)];
    {
        std::lock_guard<std::mutex> g(mu);
        auto it = c.find(root);
        if (it != c.end()) return it->second;
    }
    const bool clean = ext_state_scan_code(root, root_calls_vetted, 20000, scope).clean;
    std::lock_guard<std::mutex> g(mu);
    c[root] = clean;
    return clean;
}

} // namespace dprobe::arch
