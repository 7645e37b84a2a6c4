// How many bytes of stack-passed arguments a function takes, from its object's DWARF, so that
// register_jprobe() refuses (-E2BIG) a function whose arguments a jprobe handler would not
// see whole (the handler gets a copy of at most JPROBE_MAX_STACK_SIZE bytes, the kernel's
// MAX_STACK_SIZE, and reading past it would read the caller's locals as parameters), and
// copies no more than the function has (none for most functions).
//
// The parameters are placed as the System V x86-64 ABI does: each one is classified by
// eightbytes (INTEGER or SSE, from its scalar leaves), takes registers while six integer and
// eight vector registers last, and goes to the stack whole otherwise; aggregates over 16
// bytes, long double and anything this file cannot classify are in memory. A function
// returning an aggregate in memory has a hidden first argument. Without DWARF for the
// function (or with a type this file does not know) nothing is refused.
#include "kprobe/kprobe_internal.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

namespace dprobe::kp
{

namespace
{

enum class cls : uint8_t { none, integer, sse };

// The classes of a by-value argument: up to two eightbytes, or in memory.
struct arg_class {
    cls eb[2] = {cls::none, cls::none};
    bool memory = false;
    bool unknown = false;
    uint64_t size = 0;
    uint64_t align = 8;
};

void merge(arg_class &a, uint64_t off, cls c)
{
    if (off >= 16) {
        a.memory = true;
        return;
    }
    cls &e = a.eb[off / 8];
    if (e == cls::none || c == cls::integer) e = c;
}

Dwarf_Die *type_of(Dwarf_Die *die, Dwarf_Die *out)
{
    Dwarf_Attribute a;
    if (!dwarf_attr_integrate(die, DW_AT_type, &a)) return nullptr;
    return dwarf_formref_die(&a, out);
}

uint64_t udata(Dwarf_Die *die, unsigned name, uint64_t dflt)
{
    Dwarf_Attribute a;
    Dwarf_Word w;
    if (!dwarf_attr_integrate(die, name, &a) || dwarf_formudata(&a, &w) != 0) return dflt;
    return w;
}

// The scalar leaves of TYPE, at byte offset OFF of the argument, into A.
void classify(Dwarf_Die *type, uint64_t off, arg_class &a, int depth)
{
    Dwarf_Die t;
    if (depth > 16 || dwarf_peel_type(type, &t) != 0) {
        a.unknown = true;
        return;
    }
    Dwarf_Word size = 0;
    switch (dwarf_tag(&t)) {
    case DW_TAG_base_type: {
        size = udata(&t, DW_AT_byte_size, 0);
        const uint64_t enc = udata(&t, DW_AT_encoding, 0);
        const bool fp = enc == DW_ATE_float || enc == DW_ATE_complex_float;
        if (fp && (size == 16 || size == 32) && enc == DW_ATE_float) {
            a.memory = true; // long double (x87), or __float128 counted the same
            a.align = 16;
        } else if (enc == DW_ATE_complex_float && size == 32) {
            a.memory = true;
            a.align = 16;
        } else {
            for (uint64_t b = 0; b < (size ? size : 1); b += 8)
                merge(a, off + b, fp ? cls::sse : cls::integer);
            if (size == 16) a.align = 16;
        }
        return;
    }
    case DW_TAG_pointer_type:
    case DW_TAG_reference_type:
    case DW_TAG_rvalue_reference_type:
    case DW_TAG_enumeration_type:
        merge(a, off, cls::integer);
        return;
    case DW_TAG_ptr_to_member_type:
        merge(a, off, cls::integer);
        if (dwarf_aggregate_size(&t, &size) == 0 && size > 8) merge(a, off + 8, cls::integer);
        return;
    case DW_TAG_array_type: {
        Dwarf_Die et;
        Dwarf_Word esize = 0;
        if (dwarf_aggregate_size(&t, &size) != 0 || !type_of(&t, &et) ||
            dwarf_aggregate_size(&et, &esize) != 0 || esize == 0) {
            a.unknown = true;
            return;
        }
        if (dwarf_hasattr(&t, DW_AT_GNU_vector)) { // __m128, __m256...: one vector register
            merge(a, off, cls::sse);
            return;
        }
        for (uint64_t o = 0; o < size && !a.memory && !a.unknown; o += esize)
            classify(&et, off + o, a, depth + 1);
        return;
    }
    case DW_TAG_structure_type:
    case DW_TAG_class_type:
    case DW_TAG_union_type: {
        Dwarf_Die m;
        if (dwarf_child(&t, &m) != 0) return; // empty
        do {
            const int tag = dwarf_tag(&m);
            if (tag != DW_TAG_member && tag != DW_TAG_inheritance) continue;
            if (dwarf_hasattr(&m, DW_AT_external)) continue; // a static member
            if (dwarf_hasattr(&m, DW_AT_bit_size) || dwarf_hasattr(&m, DW_AT_data_bit_offset)) {
                merge(a, off + udata(&m, DW_AT_data_member_location, 0), cls::integer);
                continue;
            }
            Dwarf_Die mt;
            if (!type_of(&m, &mt)) {
                a.unknown = true;
                return;
            }
            classify(&mt, off + udata(&m, DW_AT_data_member_location, 0), a, depth + 1);
        } while (!a.memory && !a.unknown && dwarf_siblingof(&m, &m) == 0);
        return;
    }
    default:
        a.unknown = true;
    }
}

arg_class classify_arg(Dwarf_Die *type)
{
    arg_class a;
    Dwarf_Die t;
    Dwarf_Word size = 0;
    if (dwarf_peel_type(type, &t) != 0 || dwarf_aggregate_size(&t, &size) != 0) {
        a.unknown = true;
        return a;
    }
    a.size = size;
    const int tag = dwarf_tag(&t);
    const bool aggregate = tag == DW_TAG_structure_type || tag == DW_TAG_class_type ||
                           tag == DW_TAG_union_type || tag == DW_TAG_array_type;
    // A C++ class that is not trivially copyable goes by invisible reference.
    if (aggregate && udata(&t, DW_AT_calling_convention, 0) == DW_CC_pass_by_reference) {
        a.eb[0] = cls::integer;
        a.size = 8;
        return a;
    }
    if (aggregate && size > 16 && !dwarf_hasattr(&t, DW_AT_GNU_vector)) {
        a.memory = true;
        return a;
    }
    classify(&t, 0, a, 0);
    return a;
}

uint64_t round_up(uint64_t v, uint64_t to)
{
    return (v + to - 1) / to * to;
}

// Bytes of stack arguments of the subprogram FN, or -1 when a type is not understood or the
// function is variadic.
long stack_bytes(Dwarf_Die *fn)
{
    int ints = 6, sses = 8;
    Dwarf_Die rt;
    if (type_of(fn, &rt)) {
        const arg_class r = classify_arg(&rt);
        if (r.unknown) return -1;
        if (r.memory && !(r.align == 16 && r.size == 16)) --ints; // hidden result pointer
    }
    uint64_t stack = 0;
    Dwarf_Die p;
    if (dwarf_child(fn, &p) != 0) return 0;
    bool variadic = false;
    do {
        variadic |= dwarf_tag(&p) == DW_TAG_unspecified_parameters;
        if (dwarf_tag(&p) != DW_TAG_formal_parameter) continue;
        Dwarf_Die pt;
        if (!type_of(&p, &pt)) return -1;
        const arg_class a = classify_arg(&pt);
        if (a.unknown) return -1;
        int ni = 0, ns = 0;
        for (cls c : a.eb) {
            ni += c == cls::integer;
            ns += c == cls::sse;
        }
        if (!a.memory && ni <= ints && ns <= sses) {
            ints -= ni;
            sses -= ns;
            continue;
        }
        stack = round_up(stack, a.align) + round_up(a.size ? a.size : 8, 8);
    } while (dwarf_siblingof(&p, &p) == 0);
    // A variadic call may pass more on the stack: unknown, unless the fixed ones are too many.
    if (variadic && stack <= JPROBE_MAX_STACK_SIZE) return -1;
    return static_cast<long>(stack);
}

// The subprogram DIE whose entry is VADDR, under DIE (namespaces, classes).
bool find_subprogram(Dwarf_Die *die, Dwarf_Addr vaddr, Dwarf_Die *out, int depth)
{
    Dwarf_Die c;
    if (depth > 8 || dwarf_child(die, &c) != 0) return false;
    do {
        const int tag = dwarf_tag(&c);
        if (tag == DW_TAG_subprogram) {
            Dwarf_Addr pc;
            if (dwarf_hasattr(&c, DW_AT_low_pc) && dwarf_entrypc(&c, &pc) == 0 && pc == vaddr) {
                *out = c;
                return true;
            }
        } else if (tag == DW_TAG_namespace || tag == DW_TAG_structure_type ||
                   tag == DW_TAG_class_type) {
            if (find_subprogram(&c, vaddr, out, depth + 1)) return true;
        }
    } while (dwarf_siblingof(&c, &c) == 0);
    return false;
}

} // namespace

long jprobe_stack_bytes(const loaded_object &obj, uintptr_t func)
{
    if (obj.path.empty() || obj.is_vdso) return -1;
    const int fd = ::open(obj.path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    long bytes = -1;
    if (Dwarf *dw = dwarf_begin(fd, DWARF_C_READ)) {
        const Dwarf_Addr vaddr = func - obj.load_bias;
        Dwarf_Die cu, fn;
        bool found = dwarf_addrdie(dw, vaddr, &cu) && find_subprogram(&cu, vaddr, &fn, 0);
        // Without .debug_aranges: every unit that covers the address.
        Dwarf_Off off = 0, next = 0;
        size_t header = 0;
        while (!found && dwarf_nextcu(dw, off, &next, &header, nullptr, nullptr, nullptr) == 0) {
            if (dwarf_offdie(dw, off + header, &cu) && dwarf_haspc(&cu, vaddr) == 1)
                found = find_subprogram(&cu, vaddr, &fn, 0);
            off = next;
        }
        if (found) bytes = stack_bytes(&fn);
        dwarf_end(dw);
    }
    ::close(fd);
    return bytes;
}

} // namespace dprobe::kp
