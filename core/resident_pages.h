// Which pages of a process's code and read-only data are resident, before dprobe looks at
// them and after it is done, so that a session that leaves the process gives back the memory
// it made resident. (No kernel counterpart: the kernel reads its own text for free.)
//
// Attaching reads a great deal of code it does not change: every function entry of every
// object, to find patch sites and decide where a jump site can go. Each page read becomes
// resident in the process (some 500 KB of the C library alone), and a page dprobe patched
// and restored stays a private copy of the file's page. `dprobe attach` notes, before it
// touches the process, which pages of each file-backed mapping that cannot be written are
// present (resident_pages_note, from /proc/PID/pagemap) and hands the note to the agent;
// at the end, resident_pages_restore() drops from the process's page tables (madvise
// MADV_DONTNEED) the pages present now that were not then, and every private copy whose bytes
// are the file's again: the next access maps the file's page, with the same bytes.
//
// Invariant: a page is dropped only when its mapping cannot be written now and its bytes are
// the file's (a file page always is; a private copy is compared with the file first), so no
// thread can see a difference but a minor fault.
#pragma once

#include <cstddef>
#include <string>
#include <sys/types.h>

namespace dprobe
{

// The note, as text (a line per mapping: "start end inode offset present-bits-in-hex"), of
// process PID's file mappings that cannot be written, taken from outside. "" when pagemap
// cannot be read. (Offline: the CLI takes it.)
std::string resident_pages_note(pid_t pid);

// The runtime: keeps NOTE (from resident_pages_note) for the end of the session.
void resident_pages_adopt(const std::string &note);

// Drops what became resident since the note, and the private copies that are the file's
// again (mappings the note does not know are left alone). Returns the number of pages
// dropped. After the last write to code, when no dprobe thread can touch code any more.
size_t resident_pages_restore();

} // namespace dprobe
