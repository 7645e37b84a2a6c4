// The bytes of code as they were before dprobe first wrote to them, so that the end of a
// session can give the process back its code exactly (the kernel has no counterpart: a module
// it unloads takes its text with it; dprobe patches someone else's text and must restore it).
//
// text_poke (the one writer of code) notes each range just before it writes it. A byte's
// first note holds its original value; later notes of the same byte are redundant and are
// dropped when the journal is compacted. Not the hot path: called under text_poke's lock.
#pragma once

#include "arch/x86_64/text_patching.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace dprobe
{

// Notes the LEN bytes at ADDR as they are now (before a write). text_poke's lock held.
void text_journal_note(uintptr_t addr, size_t len);

// Requests that write every noted byte that differs from its original back, one per run of
// consecutive differing bytes (split where a run is longer than a request holds). Each starts
// where a first write started when it can, so that a thread trapped on a breakpoint of ours
// finds its address among them. text_poke's lock held.
std::vector<arch::text_poke_req> text_journal_restore_reqs();

// Ranges noted so far (after compaction), for tests and the detach report.
size_t text_journal_bytes();

} // namespace dprobe
