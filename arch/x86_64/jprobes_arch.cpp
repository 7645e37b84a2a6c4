// jprobes, the x86-64 part in C++ (see jprobes_arch.h): the layouts jprobe_tramp.S reads,
// the vector arguments of an int3 entry from its signal frame, whether a site's frame kept
// them at full width, the table of jprobe_return()'s sites, and its end under ASan.
#include "arch/x86_64/jprobes_arch.h"

#include "arch/x86_64/ext_state.h"
#include "arch/x86_64/ftrace_arch.h"
#include "arch/x86_64/ftrace_frame.h"

#include <dprobe/kprobes.h>

#include <cpuid.h>
#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

// Called from a probe hit: in the section dprobe never probes (arch does not include core).
#define JPROBE_NOPROBE __attribute__((section("dprobe_noprobe_text")))

namespace dprobe::arch
{

// The offsets jprobe_tramp.S spells (JC_*, JD_*, JRS_*, KP_KIND, JP_*).
static_assert(offsetof(jprobe_call, desc) == 64 && offsetof(jprobe_call, frame_slot) == 56);
static_assert(offsetof(jprobe_desc, entry) == 0 && offsetof(jprobe_desc, kp) == 8 &&
              offsetof(jprobe_desc, nreturned) == 16 && offsetof(jprobe_desc, stack_len) == 24 &&
              offsetof(jprobe_desc, direct) == 32 && offsetof(jprobe_desc, nsites) == 40 &&
              offsetof(jprobe_desc, sites) == 48 && sizeof(jprobe_ret_site) == 24 &&
              offsetof(jprobe_ret_site, slot_off) == 8 &&
              offsetof(jprobe_ret_site, from_rbp) == 16 && offsetof(jprobe_desc, may_jump) == 144);
static_assert(offsetof(::kprobe, ainsn.kind) == 96 && sizeof(::kprobe::ainsn.kind) == 4);
static_assert(JPROBE_DIRECT_UNKNOWN_LEN == 2 && JPROBE_DIRECT_VECTOR == 4 &&
              JPROBE_STACK_MAX == 64);
static_assert(offsetof(::jprobe, kp) == 0 && offsetof(::jprobe, nreturned) == 128 &&
              offsetof(::jprobe, jh) == 136);

namespace
{

// Where the signal frame's XSAVE area (standard format) keeps the upper halves of ymm0-15
// (YMM_Hi128) and of zmm0-15 (ZMM_Hi256): CPUID leaf 0xd, sub-leaves 2 and 6 (read once: in
// a virtual machine CPUID traps).
struct xsave_offsets {
    uint32_t ymm_hi = 0, zmm_hi = 0;
};
xsave_offsets read_xsave_offsets() noexcept
{
    xsave_offsets o;
    unsigned a, b, c, d;
    if (__get_cpuid_count(0xd, 2, &a, &b, &c, &d) && a == 256) o.ymm_hi = b;
    if (__get_cpuid_count(0xd, 6, &a, &b, &c, &d) && a == 512) o.zmm_hi = b;
    return o;
}
const xsave_offsets xsave_off = read_xsave_offsets();

constexpr unsigned long k_uc_fp_xstate = 0x1;
constexpr uint32_t k_fp_xstate_magic1 = 0x46505853;
constexpr size_t k_sw_bytes = 464, k_xsave_header = 512;

} // namespace

JPROBE_NOPROBE jprobe_vectors uc_jprobe_vectors(const ucontext_t *uc, void *buf) noexcept
{
    const auto *fp = reinterpret_cast<const unsigned char *>(uc->uc_mcontext.fpregs);
    if (!fp) return {nullptr, 16, false};
    const jprobe_vectors narrow{fp + offsetof(struct _libc_fpstate, _xmm), 16, false};
    const unsigned v = vector_size();
    uint32_t magic, xstate_size;
    uint64_t xstate_bv;
    std::memcpy(&magic, fp + k_sw_bytes, sizeof magic);
    std::memcpy(&xstate_size, fp + k_sw_bytes + 16, sizeof xstate_size);
    std::memcpy(&xstate_bv, fp + k_xsave_header, sizeof xstate_bv);
    if (v == 16 || !(uc->uc_flags & k_uc_fp_xstate) || magic != k_fp_xstate_magic1 ||
        !xsave_off.ymm_hi || xstate_size < xsave_off.ymm_hi + 256)
        return narrow;
    // A component whose XSTATE_BV bit is clear is in its initial state: zeros.
    const bool ymm = xstate_bv & 4;
    const bool zmm =
        v == 64 && (xstate_bv & 0x40) && xsave_off.zmm_hi && xstate_size >= xsave_off.zmm_hi + 512;
    // Word by word: a loop of bytes or memcpy may become a call of the C library's memcpy,
    // which may be probed (this runs in the SIGTRAP hook).
    using word = uint64_t __attribute__((may_alias));
    const auto *xmm = static_cast<const word *>(narrow.vec);
    const auto *yh = reinterpret_cast<const word *>(fp + xsave_off.ymm_hi);
    const auto *zh = reinterpret_cast<const word *>(fp + xsave_off.zmm_hi);
    auto *out = static_cast<word *>(buf);
    const unsigned w = v / 8; // words per register
    uint64_t upper = 0;
    for (unsigned i = 0; i < 8; ++i) {
        word *r = out + i * w;
        r[0] = xmm[2 * i];
        r[1] = xmm[2 * i + 1];
        r[2] = ymm ? yh[2 * i] : 0;
        r[3] = ymm ? yh[2 * i + 1] : 0;
        upper |= r[2] | r[3];
        if (v == 64) {
            for (unsigned j = 0; j < 4; ++j) {
                r[4 + j] = zmm ? zh[4 * i + j] : 0;
                upper |= r[4 + j];
            }
        }
    }
    const bool live = upper != 0;
    // As the trampolines do: the full width only when the upper halves are in use.
    return live ? jprobe_vectors{out, v, true} : narrow;
}

JPROBE_NOPROBE bool fregs_vec_wide(const struct ftrace_regs *fregs) noexcept
{
    if (!fregs->vec || fregs->vec_size == 16) return false;
    uint32_t wide;
    std::memcpy(&wide, reinterpret_cast<const char *>(fregs) + FR_VWIDE, sizeof wide);
    return wide != 0;
}

} // namespace dprobe::arch

extern "C" {

__attribute__((visibility("hidden"))) unsigned long
    dprobe_jprobe_ret_table[size_t{1} << dprobe::arch::JPROBE_RET_TABLE_BITS][2];

__attribute__((visibility("hidden"))) __thread void *dprobe_jprobe_frame
    __attribute__((tls_model("initial-exec")));

// jprobe_return() leaves the handler's frames without returning, as longjmp does: their
// redzones must go. Through dprobe_ext_guarded(): a light handler's jprobe_return() runs with
// the extended state unsaved, and the sanitizer's runtime is not known to leave it alone (so
// jprobe_return() stays light, and handlers calling it can be, under ASan too).
JPROBE_NOPROBE void dprobe_jprobe_no_return()
{
#if defined(__SANITIZE_ADDRESS__)
    dprobe_ext_guarded(0, 0, 0, [](long, long, long) -> long {
        __asan_handle_no_return();
        return 0;
    });
#endif
}
}
