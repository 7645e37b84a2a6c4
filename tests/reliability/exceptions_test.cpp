// C++ exceptions through functions whose exits are hooked (fprobe exits and kretprobes):
// caught by the same handler as without probes, rethrown, rethrown from an exception_ptr,
// unwinding through cleanups that call probed functions, walk the stack or throw and catch
// their own exception. Frames the exception unwound are counted as missed, never left on
// the shadow stack; the frames that return report their exits with the right values.
// backtrace() and _Unwind_Backtrace see the real return addresses, from code running under
// hooked frames and from the handlers themselves.
#include "exc_targets.h"
#include "probe_set.h"

#include "core/ftrace.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <execinfo.h>
#include <unwind.h>
#include <vector>

namespace
{

using rel::probe_kind;
using rel::probe_set;
using rel::shadow_depth;

class exceptions : public ::testing::TestWithParam<probe_kind>
{
};

// The calls go through volatile pointers so the compiler keeps them.
long (*volatile catcher)(long) = exc_catcher;
long (*volatile rethrow_outer)(long) = exc_rethrow_outer;
long (*volatile catch_all_outer)(long, long) = exc_catch_all_outer;
long (*volatile capture)(long) = exc_capture;
long (*volatile rethrow_stored_outer)(long) = exc_rethrow_stored_outer;
long (*volatile middle)(long) = exc_middle;

constexpr int rounds = 50;

TEST_P(exceptions, caught_by_the_same_handler_in_a_probed_function)
{
    const long want_ok = catcher(0), want_throw = catcher(1);
    ASSERT_EQ(1, want_ok);
    ASSERT_EQ(-100, want_throw);
    probe_set ps(GetParam(), {{"exc_catcher", (void *)exc_catcher},
                              {"exc_middle", (void *)exc_middle},
                              {"exc_thrower", (void *)exc_thrower}});
    ASSERT_EQ(0, ps.attach());
    for (int i = 0; i < rounds; ++i) {
        EXPECT_EQ(want_throw, catcher(1));
        EXPECT_EQ(0u, shadow_depth());
        EXPECT_EQ(want_ok, catcher(0));
        EXPECT_EQ(0u, shadow_depth());
    }
    ps.detach();
    EXPECT_EQ(2 * rounds, ps.entries("exc_catcher"));
    EXPECT_EQ(2 * rounds, ps.exits("exc_catcher"));
    EXPECT_EQ(static_cast<unsigned long>(rounds * (want_ok + want_throw)),
              ps.ret_sum("exc_catcher"));
    EXPECT_EQ(2 * rounds, ps.entries("exc_middle"));
    EXPECT_EQ(rounds, ps.exits("exc_middle"));
    EXPECT_EQ(2 * rounds, ps.entries("exc_thrower"));
    EXPECT_EQ(rounds, ps.exits("exc_thrower"));
    EXPECT_EQ(static_cast<unsigned long>(-rounds), ps.ret_sum("exc_thrower"));
    // The unwound activations of exc_middle and exc_thrower: counted, not reported.
    EXPECT_EQ(2UL * rounds, ps.missed());
    EXPECT_EQ(0, ps.bad_ret_ips());
}

TEST_P(exceptions, caught_by_the_caller_of_the_probed_functions)
{
    probe_set ps(GetParam(),
                 {{"exc_middle", (void *)exc_middle}, {"exc_thrower", (void *)exc_thrower}});
    ASSERT_EQ(0, ps.attach());
    int caught = 0;
    for (int i = 0; i < rounds; ++i) {
        try {
            middle(1);
        } catch (const std::runtime_error &) {
            ++caught;
        }
        EXPECT_EQ(0u, shadow_depth());
        EXPECT_EQ(-4, middle(-1));
    }
    ps.detach();
    EXPECT_EQ(rounds, caught);
    EXPECT_EQ(rounds, ps.exits("exc_middle"));
    EXPECT_EQ(static_cast<unsigned long>(-4 * rounds), ps.ret_sum("exc_middle"));
    EXPECT_EQ(2UL * rounds, ps.missed());
}

TEST_P(exceptions, rethrown_from_a_catch_block)
{
    const long want_ok = rethrow_outer(0), want_throw = rethrow_outer(1);
    ASSERT_EQ(-200, want_throw);
    probe_set ps(GetParam(), {{"exc_rethrow_outer", (void *)exc_rethrow_outer},
                              {"exc_rethrower", (void *)exc_rethrower},
                              {"exc_middle", (void *)exc_middle},
                              {"exc_thrower", (void *)exc_thrower}});
    ASSERT_EQ(0, ps.attach());
    exc_rethrows = 0;
    for (int i = 0; i < rounds; ++i) {
        EXPECT_EQ(want_throw, rethrow_outer(1));
        EXPECT_EQ(0u, shadow_depth());
        EXPECT_EQ(want_ok, rethrow_outer(0));
    }
    ps.detach();
    EXPECT_EQ(rounds, exc_rethrows);
    EXPECT_EQ(2 * rounds, ps.exits("exc_rethrow_outer"));
    EXPECT_EQ(static_cast<unsigned long>(rounds * (want_ok + want_throw)),
              ps.ret_sum("exc_rethrow_outer"));
    EXPECT_EQ(rounds, ps.exits("exc_rethrower"));
    // Unwound: thrower, middle, rethrower.
    EXPECT_EQ(3UL * rounds, ps.missed());
    EXPECT_EQ(0, ps.bad_ret_ips());
}

TEST_P(exceptions, rethrown_from_an_exception_ptr)
{
    probe_set ps(GetParam(), {{"exc_capture", (void *)exc_capture},
                              {"exc_rethrow_stored_outer", (void *)exc_rethrow_stored_outer},
                              {"exc_rethrow_stored", (void *)exc_rethrow_stored},
                              {"exc_middle", (void *)exc_middle}});
    ASSERT_EQ(0, ps.attach());
    for (int i = 0; i < rounds; ++i) {
        EXPECT_EQ(-1, capture(1));
        EXPECT_EQ(-400, rethrow_stored_outer(1));
        EXPECT_EQ(0u, shadow_depth());
    }
    ps.detach();
    EXPECT_EQ(rounds, ps.exits("exc_capture"));
    EXPECT_EQ(rounds, ps.exits("exc_rethrow_stored_outer"));
    EXPECT_EQ(static_cast<unsigned long>(-400 * rounds), ps.ret_sum("exc_rethrow_stored_outer"));
    EXPECT_EQ(0, ps.exits("exc_rethrow_stored"));
    EXPECT_EQ(2UL * rounds, ps.missed()); // middle, rethrow_stored
}

// Cleanups run while the exception is in flight; each case is caught by the same handler.
TEST_P(exceptions, cleanups_during_unwinding)
{
    for (long which = 0; which < 3; ++which) {
        SCOPED_TRACE(which);
        const long want_ok = catch_all_outer(which, 0), want_throw = catch_all_outer(which, 1);
        ASSERT_EQ(-300, want_throw);
        probe_set ps(GetParam(), {{"exc_catch_all_outer", (void *)exc_catch_all_outer},
                                  {"exc_dtor_calls_probed", (void *)exc_dtor_calls_probed},
                                  {"exc_dtor_backtrace", (void *)exc_dtor_backtrace},
                                  {"exc_dtor_nested", (void *)exc_dtor_nested},
                                  {"exc_middle", (void *)exc_middle},
                                  {"exc_leaf", (void *)exc_leaf}});
        ASSERT_EQ(0, ps.attach());
        exc_dtor_runs = 0;
        exc_dtor_backtrace_frames = 0;
        for (int i = 0; i < rounds; ++i) {
            EXPECT_EQ(want_throw, catch_all_outer(which, 1));
            EXPECT_EQ(0u, shadow_depth());
            EXPECT_EQ(want_ok, catch_all_outer(which, 0));
        }
        ps.detach();
        EXPECT_EQ(2 * rounds, ps.exits("exc_catch_all_outer"));
        EXPECT_EQ(static_cast<unsigned long>(rounds * (want_ok + want_throw)),
                  ps.ret_sum("exc_catch_all_outer"));
        if (which == 0) {
            // The destructor's call of exc_leaf(5) returns normally, during unwinding too.
            EXPECT_EQ(2 * rounds, ps.exits("exc_leaf"));
            EXPECT_EQ(2UL * rounds * 16, ps.ret_sum("exc_leaf"));
        }
        if (which == 1) {
            EXPECT_GT(exc_dtor_backtrace_frames, 3);
        }
        if (which == 2) {
            EXPECT_EQ(2 * rounds, exc_dtor_runs); // the destructor catches its own, both ways
        }
        EXPECT_EQ(0, ps.bad_ret_ips());
    }
}

// --- Stack walks ----------------------------------------------------------------------------

using walker = int (*)(void **, int);

std::vector<void *> walk_with(walker outer)
{
    void *frames[64];
    int n = outer(frames, 64);
    return std::vector<void *>(frames, frames + n);
}

// The innermost frames of a walk from the leaf: leaf, middle, outer, walk_with (the frames
// after them differ with the call site in the test).
std::vector<void *> inner4(std::vector<void *> w)
{
    w.resize(std::min<size_t>(w.size(), 4));
    return w;
}

TEST_P(exceptions, backtrace_under_hooked_frames_shows_real_callers)
{
    walker volatile outer = exc_bt_outer;
    const auto want = walk_with(outer);
    ASSERT_GE(want.size(), 4u);
    probe_set ps(GetParam(), {{"exc_bt_outer", (void *)exc_bt_outer},
                              {"exc_bt_middle", (void *)exc_bt_middle},
                              {"exc_bt_leaf", (void *)exc_bt_leaf}});
    ASSERT_EQ(0, ps.attach());
    for (int i = 0; i < 3; ++i)
        EXPECT_EQ(inner4(want), inner4(walk_with(outer)));
    ps.detach();
    EXPECT_EQ(3, ps.exits("exc_bt_outer"));
    EXPECT_EQ(3, ps.exits("exc_bt_leaf"));
    EXPECT_EQ(0UL, ps.missed());
}

TEST_P(exceptions, unwind_backtrace_under_hooked_frames_shows_real_callers)
{
    walker volatile outer = exc_uw_outer;
    const auto want = walk_with(outer);
    ASSERT_GE(want.size(), 4u);
    probe_set ps(GetParam(), {{"exc_uw_outer", (void *)exc_uw_outer},
                              {"exc_uw_middle", (void *)exc_uw_middle},
                              {"exc_uw_leaf", (void *)exc_uw_leaf}});
    ASSERT_EQ(0, ps.attach());
    for (int i = 0; i < 3; ++i)
        EXPECT_EQ(inner4(want), inner4(walk_with(outer)));
    ps.detach();
    EXPECT_EQ(3, ps.exits("exc_uw_outer"));
    EXPECT_EQ(0UL, ps.missed());
}

// From the handlers: the walk passes through dprobe's frames and then shows the callers of
// the probed function, none of them the return trampoline.
std::vector<void *> handler_walks[2];
bool use_unwind_backtrace;
void walk_in_handler(bool exit)
{
    void *frames[64];
    int n;
    if (use_unwind_backtrace) {
        struct w {
            void **f;
            int n;
        } st{frames, 0};
        _Unwind_Backtrace(
            [](struct _Unwind_Context *ctx, void *arg) {
                auto *s = static_cast<w *>(arg);
                if (s->n >= 64) return _URC_END_OF_STACK;
                s->f[s->n++] = reinterpret_cast<void *>(_Unwind_GetIP(ctx));
                return _URC_NO_REASON;
            },
            &st);
        n = st.n;
    } else {
        n = backtrace(frames, 64);
    }
    if (handler_walks[exit].empty()) handler_walks[exit].assign(frames, frames + n);
}

TEST_P(exceptions, stack_walks_from_handlers_show_real_callers)
{
    for (bool uw : {false, true}) {
        SCOPED_TRACE(uw ? "_Unwind_Backtrace" : "backtrace");
        use_unwind_backtrace = uw;
        walker volatile outer = exc_bt_outer;
        // Unprobed: [0] in exc_bt_leaf, [1] in exc_bt_middle, [2] in exc_bt_outer, [3] here.
        const auto plain = walk_with(outer);
        ASSERT_GE(plain.size(), 4u);
        probe_set ps(GetParam(), {{"exc_bt_outer", (void *)exc_bt_outer},
                                  {"exc_bt_middle", (void *)exc_bt_middle}});
        ASSERT_EQ(0, ps.attach());
        handler_walks[0].clear();
        handler_walks[1].clear();
        probe_set::set_handler_hook(walk_in_handler);
        // The first handler call is the entry of exc_bt_outer: its caller is in this test.
        walk_with(outer);
        probe_set::set_handler_hook(nullptr);
        ps.detach();
        for (int exit = 0; exit < 2; ++exit) {
            const auto &w = handler_walks[exit];
            ASSERT_FALSE(w.empty());
            for (void *f : w)
                EXPECT_FALSE(dprobe::ftrace_is_return_trampoline(reinterpret_cast<uintptr_t>(f)))
                    << "exit=" << exit;
        }
        // Entry of exc_bt_outer: the walk goes from the entry trampoline to its caller,
        // walk_with (also through a jump site's detour, which has no unwind table).
        EXPECT_NE(std::find(handler_walks[0].begin(), handler_walks[0].end(), plain[3]),
                  handler_walks[0].end());
        // The first exit is exc_bt_middle's: it returns into exc_bt_outer, which returns here.
        auto at = std::find(handler_walks[1].begin(), handler_walks[1].end(), plain[2]);
        ASSERT_NE(at, handler_walks[1].end());
        ASSERT_NE(at + 1, handler_walks[1].end());
        EXPECT_EQ(plain[3], at[1]);
        EXPECT_EQ(0u, shadow_depth());
    }
}

INSTANTIATE_TEST_SUITE_P(kinds, exceptions,
                         ::testing::Values(probe_kind::fprobe, probe_kind::kretprobe),
                         [](const auto &info) { return std::string(rel::kind_name(info.param)); });

} // namespace
