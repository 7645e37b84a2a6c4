// Internal attributes.
#pragma once

// Code that runs when a probe fires: kept in its own section, which dprobe never probes
// (the kernel's NOKPROBE_SYMBOL / .kprobes.text).
#define DPROBE_NOPROBE __attribute__((section(".text.dprobe_noprobe")))

#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
