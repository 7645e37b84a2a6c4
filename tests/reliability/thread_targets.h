// Targets of the thread-exit tests (thread_targets.cpp).
#pragma once

#include <atomic>

extern std::atomic<int> thr_dtor_runs;

extern "C" {
long thr_exit_leaf(long v);
long thr_exit_middle(long v);
long thr_exit_outer(long v);
long thr_cancel_leaf(int fd);
long thr_cancel_middle(int fd);
long thr_cancel_outer(int fd);
unsigned long thr_spin_leaf(unsigned long x);
unsigned long thr_spin(unsigned long x);
}
