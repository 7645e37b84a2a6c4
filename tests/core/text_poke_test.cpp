// text_poke_stopped: a thread stopped at one of the `from` addresses of the moves continues
// at its `to`, whatever order the caller listed the moves in.
#include "core/text_poke.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

// tp_park spins until tp_release is set and answers 0; a thread moved from any of the loop's
// instructions to tp_escape answers 42 instead. tp_scratch is code the test rewrites (a nop
// over a nop) so that text_poke_stopped has something to write.
extern "C" long tp_park();
extern "C" char tp_park_pause[], tp_park_cmp[], tp_park_jcc[], tp_escape[], tp_scratch[];
extern "C" {
volatile char tp_release;
}

__asm__(".text\n"
        ".globl tp_park, tp_park_pause, tp_park_cmp, tp_park_jcc, tp_escape, tp_scratch\n"
        ".type tp_park, @function\n"
        "tp_park:\n"
        "tp_park_pause: pause\n"
        "tp_park_cmp: cmpb $0, tp_release(%rip)\n"
        "tp_park_jcc: je tp_park_pause\n"
        "  xor %eax, %eax\n"
        "  ret\n"
        ".size tp_park, .-tp_park\n"
        "tp_escape: mov $42, %eax\n"
        "  ret\n"
        "tp_scratch: nop\n"
        "  ret\n");

namespace
{

TEST(text_poke, stopped_thread_moved_whatever_the_order_of_the_moves)
{
    std::atomic<long> result{-1};
    std::atomic<bool> started{false};
    std::thread t([&] {
        started = true;
        result = tp_park();
    });
    while (!started.load())
        std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));

    const auto at = [](const char *p) { return reinterpret_cast<uintptr_t>(p); };
    // The loop's addresses first, then more that sort below them (as a caller appending an
    // out-of-line copy's address to a region's moves produces): a lookup that assumed the
    // list sorted would look among those.
    const dprobe::rip_move moves[] = {
        {at(tp_park_pause), at(tp_escape)},
        {at(tp_park_cmp), at(tp_escape)},
        {at(tp_park_jcc), at(tp_escape)},
        {0x1000, 0x2000},
        {0x3000, 0x4000},
        {0x5000, 0x6000},
        {0x7000, 0x8000},
        {0x9000, 0xa000},
    };
    dprobe::text_poke_req r;
    r.addr = at(tp_scratch);
    r.len = 1;
    r.bytes[0] = 0x90;
    ASSERT_EQ(0, dprobe::text_poke_stopped({&r, 1}, moves));

    // Moved: it returns at once. Not moved: it spins until released.
    for (int i = 0; i < 5000 && result.load() < 0; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    tp_release = 1;
    t.join();
    EXPECT_EQ(42, result.load()) << "the parked thread was not moved";
}

} // namespace
