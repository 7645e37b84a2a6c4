// The flow stress test's probed functions (flow_targets.cpp), built in three site flavours:
// flow_fentry_* (-pg -mfentry), flow_pfe_* (-fpatchable-function-entry=5) and flow_plain_*
// (no site: jump sites). FLOW_NAME (fentry, pfe, plain) and FLOW_FLAVOUR (0, 1, 2) are set
// per build of flow_targets.cpp; FLOW(name) makes the flavour's name of a function.
#pragma once

#include <atomic>
#include <csetjmp>

enum flow_fn {
    flow_thrower,
    flow_catcher,
    flow_jumper,
    flow_setjmper,
    flow_inner,
    flow_middle,
    flow_outer,
    flow_leaf,
    flow_deep,
    flow_exiter,
    flow_canceller,
    flow_nfns
};
constexpr int flow_nflavours = 3;

// Calls made of each function (its body ran), by flavour: for the report.
extern std::atomic<unsigned long> flow_calls[flow_nflavours][flow_nfns];
inline void flow_note_call(int flavour, flow_fn f)
{
    flow_calls[flavour][f].fetch_add(1, std::memory_order_relaxed);
}

#define FLOW_CAT2(a, b) flow_##a##_##b
#define FLOW_CAT(a, b) FLOW_CAT2(a, b)
#define FLOW(name) FLOW_CAT(FLOW_NAME, name)

#define FLOW_DECLARE(fl)                                                                           \
    long flow_##fl##_thrower(int d);                                                               \
    long flow_##fl##_catcher(int d);                                                               \
    long flow_##fl##_jumper(int d, jmp_buf *jb);                                                   \
    long flow_##fl##_setjmper(int d);                                                              \
    long flow_##fl##_inner(int d);                                                                 \
    long flow_##fl##_middle(int d);                                                                \
    long flow_##fl##_outer(int d);                                                                 \
    long flow_##fl##_leaf(long x);                                                                 \
    long flow_##fl##_deep(int d);                                                                  \
    long flow_##fl##_exiter(int d);                                                                \
    long flow_##fl##_canceller(int d);

extern "C" {
FLOW_DECLARE(fentry)
FLOW_DECLARE(pfe)
FLOW_DECLARE(plain)
}
