// jprobes, the x86-64 part: what the generic code asks of the entry trampolines' frames
// (see jprobes_arch.h).
#include "arch/x86_64/jprobes_arch.h"

#include "arch/x86_64/ftrace_frame.h"

#include <cstdint>
#include <cstring>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

// Called from a probe hit: in the section dprobe never probes (arch does not include core).
#define JPROBE_NOPROBE __attribute__((section("dprobe_noprobe_text")))

namespace dprobe::arch
{

JPROBE_NOPROBE bool fregs_vec_wide(const struct ftrace_regs *fregs) noexcept
{
    if (!fregs->vec || fregs->vec_size == 16) return false;
    uint32_t wide;
    std::memcpy(&wide, reinterpret_cast<const char *>(fregs) + FR_VWIDE, sizeof wide);
    return wide != 0;
}

} // namespace dprobe::arch

extern "C" {

__attribute__((visibility("hidden"))) __thread void *dprobe_jprobe_frame
    __attribute__((tls_model("initial-exec")));

// jprobe_return() leaves the handler's frames without returning, as longjmp does: their
// redzones must go.
JPROBE_NOPROBE void dprobe_jprobe_no_return()
{
#if defined(__SANITIZE_ADDRESS__)
    __asan_handle_no_return();
#endif
}
}
