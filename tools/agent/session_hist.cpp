// The histograms a session was asked for (`--trigger GROUP:EVENT:hist:...`): at its end, the
// events/GROUP/EVENT/hist file of each such event goes into the trace file as a HIST chunk
// (tools/trace_file.h), which `dprobe record` and `dprobe attach` print when the session
// ends and `dprobe report --format hist` prints again. Read while the triggers are still
// there: before tracefs_reset() takes them out (detach), or in the process's last exit
// handler (a recorded program's end).
#include "tools/agent/agent.h"

#include "tools/trace_file.h"
#include "tracefs/event_trigger.h"
#include "tracefs/trace_array.h"

#include <set>
#include <string>
#include <utility>

namespace dprobe::agent
{

void write_session_hists()
{
    std::set<std::pair<std::string, std::string>> done;
    for (const std::string &t : state().config.triggers) {
        size_t a = t.find(':');
        size_t b = a == std::string::npos ? a : t.find(':', a + 1);
        if (b == std::string::npos || t.compare(b + 1, 4, "hist") != 0) continue;
        std::string group = t.substr(0, a), event = t.substr(a + 1, b - a - 1);
        if (!done.emplace(group, event).second) continue;
        std::string text;
        int r =
            with_trace_event_file(trace_array_top(), group, event, [&](const trace_event_file &f) {
                text = event_hist_show(f, false);
                return 0;
            });
        if (r == 0) write_chunk(tracefile::CHUNK_HIST, group + "/" + event + "\n" + text);
    }
}

} // namespace dprobe::agent
