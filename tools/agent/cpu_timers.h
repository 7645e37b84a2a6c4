// The program's CPU-time interval timers, stopped while the agent works on the program's
// threads and restarted with the time they had left. Kernel counterpart: none (the agent is
// user space; setitimer(2) is the interface it stays out of the way of).
//
// Why: ITIMER_PROF and ITIMER_VIRTUAL count the CPU time of the whole process, the agent's
// work included, and survive exec. A program built with -pg arms ITIMER_PROF (gmon's profil,
// 10 ms) and installs its SIGPROF handler in its own image only: when such a program execs
// another one, the new image has what is left of those 10 ms to reach its own gmon set-up,
// and SIGPROF's default action kills it. The agent's start in the new image (tens of ms:
// patch sites, ring buffers, tracefs), its exec path (tracefs down) and its exit path must
// not spend that time, or a program that runs fine untraced is killed by SIGPROF (uftrace's
// s-thread-exec.c did exactly this). Across an exec the timers stay stopped and what they had
// left travels in the new image's environment (DPROBE_CPU_TIMERS), which the agent's start
// there re-arms when it is done: the dynamic loader's work on dprobe's object (tens of MB,
// before any code of dprobe runs) is not counted either. A new image the agent does not reach
// (static, or set-user-ID: no LD_PRELOAD) starts with the timers disarmed.
// ITIMER_REAL counts wall time, sleeping included, and is left alone: the program's alarms
// fire when they would.
//
// Invariants: async-signal-safe (setitimer only), no allocation; a timer the program did not
// arm stays disarmed; resume() without a pause() before it does nothing.
#pragma once

#include "tools/agent/sigsafe_text.h"

#include <cstdlib>
#include <sys/time.h>

namespace dprobe::agent
{

struct cpu_timers {
    itimerval prof{};
    itimerval virt{};
    bool paused = false;

    // Disarms both timers, keeping what they had left (and their intervals).
    void pause() noexcept
    {
        static const itimerval zero{};
        if (paused) return;
        setitimer(ITIMER_PROF, &zero, &prof);
        setitimer(ITIMER_VIRTUAL, &zero, &virt);
        paused = true;
    }

    // Re-arms them with what they had left when paused (a disarmed one stays disarmed).
    void resume() noexcept
    {
        if (!paused) return;
        if (armed(prof)) setitimer(ITIMER_PROF, &prof, nullptr);
        if (armed(virt)) setitimer(ITIMER_VIRTUAL, &virt, nullptr);
        paused = false;
    }

    static bool armed(const itimerval &t) noexcept
    {
        return t.it_value.tv_sec != 0 || t.it_value.tv_usec != 0;
    }

    // Carrying paused timers across exec: "DPROBE_CPU_TIMERS=" and eight numbers (value and
    // interval of ITIMER_PROF, then of ITIMER_VIRTUAL; seconds and microseconds each).
    static constexpr const char *k_env = "DPROBE_CPU_TIMERS";
    static constexpr size_t k_env_room = 18 + 8 * 21 + 1;

    bool carried() const noexcept { return paused && (armed(prof) || armed(virt)); }

    // Writes the entry at P (room: k_env_room), '\0' included; returns the end.
    char *encode(char *p) const noexcept
    {
        p = put_str(p, k_env);
        *p++ = '=';
        const long v[8] = {prof.it_value.tv_sec,    prof.it_value.tv_usec,
                           prof.it_interval.tv_sec, prof.it_interval.tv_usec,
                           virt.it_value.tv_sec,    virt.it_value.tv_usec,
                           virt.it_interval.tv_sec, virt.it_interval.tv_usec};
        for (int i = 0; i < 8; i++) {
            if (i) *p++ = '.';
            p = put_ulong(p, v[i] < 0 ? 0ul : static_cast<unsigned long>(v[i]));
        }
        *p++ = '\0';
        return p;
    }

    // Takes what an exec'd predecessor carried (the entry's value) as this pause's saved
    // times, so that resume() arms them. False, and nothing changed, if S is malformed.
    bool adopt(const char *s) noexcept
    {
        long v[8];
        for (int i = 0; i < 8; i++) {
            char *end = nullptr;
            v[i] = std::strtol(s, &end, 10);
            const char want = i == 7 ? '\0' : '.';
            if (end == s || v[i] < 0 || (i & 1 && v[i] >= 1000000) || *end != want) return false;
            s = end + 1;
        }
        prof = {{v[2], v[3]}, {v[0], v[1]}};
        virt = {{v[6], v[7]}, {v[4], v[5]}};
        paused = true;
        return true;
    }
};

// A scope of agent work the program's CPU-time timers do not see.
class cpu_timers_paused
{
  public:
    cpu_timers_paused() noexcept { t_.pause(); }
    ~cpu_timers_paused() { t_.resume(); }
    cpu_timers &timers() noexcept { return t_; }
    cpu_timers_paused(const cpu_timers_paused &) = delete;
    cpu_timers_paused &operator=(const cpu_timers_paused &) = delete;

  private:
    cpu_timers t_;
};

} // namespace dprobe::agent
