// bench/peers: the measurement loop shared by the in-process modes.
//
// A mode traces the common workload (workload.c) in some way. One sample is: an untraced
// run of the workload, the traced run, another untraced run; the sample's figure is the
// traced run's ns per call minus the mean of the two untraced runs around it, and the
// tracer's own hit count over the traced run must equal the calls made. Modes are measured
// in interleaved rounds (every mode once per round), so load on the machine spreads over
// all of them alike. Each mode prints one JSON line; bench/peers/run makes the table.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

extern "C" {
unsigned long leaf_plain(unsigned long);
unsigned long caller_plain(unsigned long);
extern char leaf_plain_nop[], leaf_plain_insn[];
unsigned long leaf_pfe(unsigned long);
unsigned long caller_pfe(unsigned long);
extern char leaf_pfe_nop[], leaf_pfe_insn[];
}

namespace peers
{

using caller_fn = unsigned long (*)(unsigned long);

struct mode {
    std::string tool;        // "dprobe", "uprobe"
    std::string key;         // stable id, used by the table for the ratio column
    std::string name;        // what is measured
    std::string match;       // key of dprobe's matching mode (peers), empty for dprobe's own
    unsigned long calls = 0; // workload calls per run
    caller_fn untraced = nullptr;
    caller_fn traced = nullptr;
    // Attaches the tracer; returns "" or why it could not (the mode is then skipped).
    std::function<std::string()> arm;
    std::function<void()> disarm;
    // Cumulative hits seen by the tracer (entries; for entry+exit modes the exits must
    // match too: return the smaller count). Empty: the mode has no hits to check.
    std::function<uint64_t()> hits;
    // Filled by run_rounds.
    std::string skipped;
    std::vector<double> overhead_ns, untraced_ns;
    uint64_t expected_hits = 0, seen_hits = 0;
    // XINUSE (XGETBV, ECX=1) bits of the upper vector state (2, 5, 6, 7) that one traced
    // call from code with clean upper state left changed; -1 where not measured.
    int64_t xinuse_changed = -1;
};

double now_ns();        // CLOCK_MONOTONIC
double thread_cpu_ns(); // CLOCK_THREAD_CPUTIME_ID
// ns per call of one run of F over CALLS calls: CPU time of the calling thread (user and
// kernel), so that time spent preempted by other load on the machine is left out.
double time_run(caller_fn f, unsigned long calls);
// Runs every mode ROUNDS times, interleaved, then prints each mode as a JSON line.
void run_rounds(std::vector<mode> &modes, int rounds);
void print_json(const mode &m);
std::string json_escape(const std::string &s);

// Tracers (peers_dprobe.cpp, peers_uprobe.cpp). Every mode's `calls` is scaled by SCALE.
void add_dprobe_modes(std::vector<mode> &modes, double scale);
void add_uprobe_modes(std::vector<mode> &modes, double scale);
// The floor (peers_floor.cpp, floor_hook.S): a minimal hand-written hook on the same leaf.
void add_floor_modes(std::vector<mode> &modes, double scale);
void uprobe_cleanup();

// How cost grows (peers_scaling.cpp): hot path with other probes registered, registration
// time for 1 to MAX_FUNCS functions, memory per site and per thread. JSON lines.
void run_scaling(int rounds, unsigned max_funcs);

} // namespace peers
