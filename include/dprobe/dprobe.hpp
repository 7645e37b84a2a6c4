// C++ helpers over the C API: registration tied to an object's lifetime, and fprobes whose
// handlers are lambdas.
//
//   dprobe::function_probe probe("parse_*", nullptr,
//       [](unsigned long ip, unsigned long ret_ip, ftrace_regs *regs) { ...; return 0; },
//       [](unsigned long ip, unsigned long ret_ip, ftrace_regs *regs) { ... });
//   if (!probe) std::cerr << "register_fprobe: " << probe.error() << "\n";
//   // unregistered when `probe` goes out of scope
#pragma once

#include <dprobe/fprobe.h>
#include <dprobe/kprobes.h>

#include <cstddef>
#include <type_traits>
#include <utility>

namespace dprobe
{

// Registers FP on construction and unregisters it on destruction.
class fprobe_registration
{
  public:
    fprobe_registration(struct ::fprobe &fp, const char *filter,
                        const char *notfilter = nullptr) noexcept
        : fp_(&fp), err_(register_fprobe(&fp, filter, notfilter))
    {
    }
    fprobe_registration(const fprobe_registration &) = delete;
    fprobe_registration &operator=(const fprobe_registration &) = delete;
    fprobe_registration(fprobe_registration &&o) noexcept : fp_(o.fp_), err_(o.err_)
    {
        o.fp_ = nullptr;
    }
    ~fprobe_registration() { reset(); }

    // Unregisters now; returns once no handler can still run.
    void reset() noexcept
    {
        if (fp_ && err_ == 0) unregister_fprobe(fp_);
        fp_ = nullptr;
    }
    int error() const noexcept { return err_; }
    explicit operator bool() const noexcept { return fp_ && err_ == 0; }

  private:
    struct ::fprobe *fp_;
    int err_;
};

// An fprobe whose handlers are callables:
//   int on_entry(unsigned long ip, unsigned long ret_ip, ftrace_regs *regs)  (0: call exit)
//   void on_exit(unsigned long ip, unsigned long ret_ip, ftrace_regs *regs)
// Pass nullptr as OnExit for an entry-only probe. The object must not move while
// registered (it is neither copyable nor movable).
template <typename OnEntry, typename OnExit = std::nullptr_t> class function_probe
{
  public:
    function_probe(const char *filter, const char *notfilter, OnEntry on_entry,
                   OnExit on_exit = nullptr)
        : entry_(std::move(on_entry)), exit_(std::move(on_exit))
    {
        holder_.self = this;
        holder_.fp.entry_handler = &entry_thunk;
        if constexpr (!std::is_same_v<OnExit, std::nullptr_t>)
            holder_.fp.exit_handler = &exit_thunk;
        err_ = register_fprobe(&holder_.fp, filter, notfilter);
    }
    function_probe(const function_probe &) = delete;
    function_probe &operator=(const function_probe &) = delete;
    ~function_probe()
    {
        if (err_ == 0) unregister_fprobe(&holder_.fp);
    }

    int error() const noexcept { return err_; }
    explicit operator bool() const noexcept { return err_ == 0; }
    unsigned long nmissed() const noexcept { return holder_.fp.nmissed; }
    void enable() noexcept { enable_fprobe(&holder_.fp); }
    void disable() noexcept { disable_fprobe(&holder_.fp); }

  private:
    struct holder {
        struct ::fprobe fp; // first member: a handler's fprobe pointer is the holder's address
        function_probe *self;
    };
    static_assert(std::is_standard_layout_v<holder>);

    static function_probe *from(struct ::fprobe *fp)
    {
        return reinterpret_cast<holder *>(fp)->self;
    }
    static int entry_thunk(struct ::fprobe *fp, unsigned long ip, unsigned long ret_ip,
                           struct ftrace_regs *regs, void *)
    {
        return from(fp)->entry_(ip, ret_ip, regs);
    }
    static void exit_thunk(struct ::fprobe *fp, unsigned long ip, unsigned long ret_ip,
                           struct ftrace_regs *regs, void *)
    {
        if constexpr (!std::is_same_v<OnExit, std::nullptr_t>) from(fp)->exit_(ip, ret_ip, regs);
    }

    holder holder_{};
    OnEntry entry_;
    OnExit exit_;
    int err_ = -1;
};

} // namespace dprobe

#include <dprobe/typed_probes.hpp>
