// Internal attributes.
#pragma once

// Code that runs when a probe fires: kept in its own section, which dprobe never probes
// (the kernel's NOKPROBE_SYMBOL / .kprobes.text). The name is a C identifier so that the
// linker keeps it as its own output section and defines __start_/__stop_ symbols for it,
// which the kprobe blacklist reads (a .text.* name would be merged into .text).
#define DPROBE_NOPROBE __attribute__((section("dprobe_noprobe_text")))

#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
