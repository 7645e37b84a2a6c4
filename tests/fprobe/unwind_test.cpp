// Unwinders see real return addresses through hooked frames: C++ exceptions thrown through
// functions with exit handlers, and backtrace() from inside an exit handler.
#include <dprobe/fprobe.h>
#include <execinfo.h>
#include <gtest/gtest.h>

extern "C" int unwind_outer(int v);
extern "C" int unwind_middle(int v);
extern "C" int unwind_thrower(int v);
extern "C" void *unwind_where_am_i_called_from();
extern "C" void *unwind_caller_of_where();

namespace
{

int entries, exits;
int count_entry(struct fprobe *, unsigned long, unsigned long, struct ftrace_regs *, void *)
{
    ++entries;
    return 0;
}
void count_exit(struct fprobe *, unsigned long, unsigned long, struct ftrace_regs *, void *)
{
    ++exits;
}

TEST(fprobe_unwind, exception_through_hooked_frames)
{
    using fn = int (*)(int);
    fn volatile outer = unwind_outer;
    const int want_ok = outer(0), want_throw = outer(1);
    struct fprobe fp = {};
    fp.entry_handler = count_entry;
    fp.exit_handler = count_exit;
    ASSERT_EQ(0, register_fprobe(&fp, "unwind_*", "unwind_*where*"));
    entries = exits = 0;
    for (int i = 0; i < 100; ++i) {
        EXPECT_EQ(want_throw, outer(1));
        EXPECT_EQ(want_ok, outer(0));
    }
    // Thrown: outer, middle and thrower enter; only outer returns. Not thrown: all three.
    EXPECT_EQ(100 * 3 + 100 * 3, entries);
    EXPECT_EQ(100 * 1 + 100 * 3, exits);
    // The exits that never came (middle and thrower, unwound) are counted as missed.
    EXPECT_EQ(100UL * 2, fp.nmissed);
    EXPECT_EQ(0, unregister_fprobe(&fp));
}

// With an unwound_handler, the calls an exception unwound are reported there, innermost
// first, with their own entry data, instead of being counted as missed.
unsigned long unwound_ips[8];
int nunwound;
int note_entry(struct fprobe *, unsigned long ip, unsigned long, struct ftrace_regs *, void *data)
{
    ++entries;
    *static_cast<unsigned long *>(data) = ip;
    return 0;
}
void note_unwound(struct fprobe *, void *data)
{
    if (nunwound < 8) unwound_ips[nunwound] = *static_cast<unsigned long *>(data);
    ++nunwound;
}

TEST(fprobe_unwind, exception_reported_to_unwound_handler)
{
    using fn = int (*)(int);
    fn volatile outer = unwind_outer;
    const int want_throw = outer(1);
    struct fprobe fp = {};
    fp.entry_handler = note_entry;
    fp.exit_handler = count_exit;
    fp.unwound_handler = note_unwound;
    fp.entry_data_size = sizeof(unsigned long);
    ASSERT_EQ(0, register_fprobe(&fp, "unwind_*", "unwind_*where*"));
    entries = exits = nunwound = 0;
    EXPECT_EQ(want_throw, outer(1));
    EXPECT_EQ(3, entries);
    EXPECT_EQ(1, exits);
    ASSERT_EQ(2, nunwound);
    // thrower (the innermost) first, then middle; outer caught it and returned.
    const auto thrower = reinterpret_cast<unsigned long>(&unwind_thrower);
    const auto middle = reinterpret_cast<unsigned long>(&unwind_middle);
    // The entry ip is the site, at or just after the symbol (endbr64).
    EXPECT_LE(thrower, unwound_ips[0]);
    EXPECT_GT(thrower + 8, unwound_ips[0]);
    EXPECT_LE(middle, unwound_ips[1]);
    EXPECT_GT(middle + 8, unwound_ips[1]);
    EXPECT_EQ(0UL, fp.nmissed);
    EXPECT_EQ(0, unregister_fprobe(&fp));
}

void *real_return;
bool found_in_backtrace;
int inner_exits;
void backtrace_exit(struct fprobe *, unsigned long, unsigned long ret_ip, struct ftrace_regs *,
                    void *)
{
    // Two functions are probed; the inner one returns to real_return.
    if (ret_ip != reinterpret_cast<unsigned long>(real_return)) return;
    ++inner_exits;
    void *frames[32];
    int n = backtrace(frames, 32);
    for (int i = 0; i < n; ++i)
        if (frames[i] == real_return) found_in_backtrace = true;
}

TEST(fprobe_unwind, backtrace_from_exit_handler_sees_real_caller)
{
    using fn = void *(*)();
    fn volatile caller = unwind_caller_of_where;
    real_return = caller(); // unprobed: the return address inside unwind_caller_of_where
    struct fprobe fp = {};
    fp.entry_handler = count_entry;
    fp.exit_handler = backtrace_exit;
    // Probe both, so the handler's stack has two hooked frames below it.
    ASSERT_EQ(0, register_fprobe(&fp, "unwind_*where*", nullptr));
    found_in_backtrace = false;
    inner_exits = 0;
    // (The probed function's own __builtin_return_address(0) now reads the return
    // trampoline, as with any return hooking; unwinders and handlers see the real address.)
    caller();
    EXPECT_EQ(1, inner_exits);
    EXPECT_TRUE(found_in_backtrace);
    // And the stack is hooked again afterwards: exits keep coming.
    inner_exits = 0;
    caller();
    EXPECT_EQ(1, inner_exits);
    EXPECT_EQ(0, unregister_fprobe(&fp));
}

} // namespace
