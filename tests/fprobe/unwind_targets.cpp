// C++ targets for the unwinding tests: exceptions thrown through probed frames.
#include <stdexcept>

extern "C" {
__attribute__((noinline)) int unwind_thrower(int v)
{
    if (v > 0) throw std::runtime_error("boom");
    return v - 1;
}
__attribute__((noinline)) int unwind_middle(int v)
{
    return unwind_thrower(v) + 1;
}
__attribute__((noinline)) int unwind_outer(int v)
{
    try {
        return unwind_middle(v) * 2;
    } catch (const std::runtime_error &) {
        return -100;
    }
}
__attribute__((noinline)) void *unwind_where_am_i_called_from()
{
    return __builtin_return_address(0);
}
__attribute__((noinline)) void *unwind_caller_of_where()
{
    void *r = unwind_where_am_i_called_from();
    __asm__ volatile("" ::: "memory");
    return r;
}
}
