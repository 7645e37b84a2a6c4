// The tracefs tree back to its boot state (tracefs_reset.h). The order is the kernel
// selftests' initialize_system: what holds other things goes first (instances, the tracer,
// triggers and function commands, which keep events in soft mode and sites patched), then the
// events and filters they held, then the values, and the buffers last.
//
// Invariant: every step goes through the tree as a user's write would (or, for function
// commands, through the call rmdir uses), so a reset exercises the same code a session does
// and cannot leave a state the files would not show.
#include "tracefs/tracefs_reset.h"

#include "tracefs/event_trigger.h"
#include "tracefs/ftrace_commands.h"
#include "tracefs/trace_array.h"
#include "tracefs/tracefs_tree.h"

#include <cstring>
#include <mutex>

namespace dprobe
{

namespace
{

struct value_file {
    std::string path;
    std::string value;
};

// Captured once: the values a new session must find again.
std::vector<value_file> &captured()
{
    static auto *v = new std::vector<value_file>;
    return *v;
}
std::once_flag g_captured;

// Settable files of one value each, besides options/*. tracing_on is written last of all.
constexpr const char *k_value_files[] = {
    "buffer_size_kb",           "trace_clock",         "max_graph_depth", "tracing_thresh",
    "saved_cmdlines_size",      "tracing_cpumask",     "kprobes/enabled", "kprobes/optimization",
    "function_profile_enabled", "stack_tracer_enabled"};

// Files whose content is a list that an empty write with O_TRUNC clears.
constexpr const char *k_list_files[] = {"set_ftrace_filter",  "set_ftrace_notrace",
                                        "set_graph_function", "set_graph_notrace",
                                        "stack_trace_filter", "set_event",
                                        "set_event_pid",      "set_event_notrace_pid",
                                        "set_ftrace_pid",     "set_ftrace_notrace_pid"};

bool exists(const std::string &path)
{
    tracefs_stat st;
    return tracefs_tree::instance().stat(path, st) == 0;
}

// The value a read shows, as a write takes it: the bracketed name of a choice list
// ("[local] global"), else the first word.
std::string value_of(const std::string &text)
{
    if (size_t open = text.find('['); open != std::string::npos) {
        size_t close = text.find(']', open);
        if (close != std::string::npos) return text.substr(open + 1, close - open - 1);
    }
    size_t b = text.find_first_not_of(" \t\n");
    if (b == std::string::npos) return "";
    size_t e = text.find_first_of(" \t\n", b);
    return text.substr(b, e == std::string::npos ? std::string::npos : e - b);
}

class resetter
{
  public:
    std::vector<std::string> failed;

    void write(const std::string &path, const std::string &data, bool trunc = false)
    {
        if (!exists(path)) return;
        if (int r = tree().write_file(path, data, trunc))
            failed.push_back("write '" + data + "' to " + path + ": " + std::strerror(-r));
    }
    void clear(const std::string &path) { write(path, "", true); }
    std::vector<std::string> list(const std::string &path)
    {
        std::vector<std::string> names;
        if (exists(path)) tree().list(path, names);
        return names;
    }
    std::string read(const std::string &path)
    {
        std::string s;
        tree().read_file(path, s);
        return s;
    }

    void remove_instances()
    {
        for (const std::string &name : list("instances"))
            if (int r = tree().rmdir("instances/" + name))
                failed.push_back("rmdir instances/" + name + ": " + std::strerror(-r));
    }

    // Each trigger line of FILE, removed as "!" and the line without its count and
    // annotations (test.d/functions, reset_trigger_file): actions (onmatch, onmax, ...) in
    // pass 0, the others in pass 1. Returns how many lines were left in place; a refusal is
    // noted only when NOTE (the last round).
    size_t remove_triggers(const std::string &file, int pass, bool note)
    {
        size_t left = 0;
        std::string text = read(file);
        size_t pos = 0;
        while (pos < text.size()) {
            size_t nl = text.find('\n', pos);
            std::string line = text.substr(pos, nl == std::string::npos ? nl : nl - pos);
            pos = nl == std::string::npos ? text.size() : nl + 1;
            if (line.empty() || line[0] == '#') continue;
            const bool action =
                line.find(":on") != std::string::npos && line.find('(') != std::string::npos;
            if ((pass == 0) != action) continue;
            std::string cmd = line.substr(0, line.find(" ["));
            if (size_t c = cmd.find(":count="); c != std::string::npos) cmd.erase(c);
            if (cmd.size() > 10 && cmd.compare(cmd.size() - 10, 10, ":unlimited") == 0)
                cmd.erase(cmd.size() - 10);
            if (int r = tree().write_file(file, "!" + cmd, false)) {
                left++;
                if (note)
                    failed.push_back("write '!" + cmd + "' to " + file + ": " + std::strerror(-r));
            }
        }
        return left;
    }

    // Every event's triggers, then its filter, and the groups' filters. A trigger may use
    // another event's (a $var another hist defines, an onmatch() on it, a synthetic event an
    // action generates): the actions of every event go first, then the rest, and a round
    // that leaves some (refused while still used) is followed by another.
    void reset_events()
    {
        std::vector<std::string> triggers, filters;
        for (const std::string &group : list("events")) {
            const std::string g = "events/" + group;
            tracefs_stat st;
            if (tree().stat(g, st) || !st.is_dir) continue;
            for (const std::string &ev : list(g)) {
                const std::string e = g + "/" + ev;
                if (tree().stat(e, st) || !st.is_dir) continue;
                if (exists(e + "/trigger")) triggers.push_back(e + "/trigger");
                if (exists(e + "/filter")) filters.push_back(e + "/filter");
            }
            if (exists(g + "/filter")) filters.push_back(g + "/filter");
        }
        constexpr int k_rounds = 4;
        for (int round = 0; round < k_rounds; round++) {
            size_t left = 0;
            for (int pass = 0; pass < 2; pass++)
                for (const std::string &t : triggers)
                    left += remove_triggers(t, pass, round == k_rounds - 1);
            if (!left) break;
        }
        for (const std::string &f : filters)
            write(f, "0");
    }

  private:
    static tracefs_tree &tree() { return tracefs_tree::instance(); }
};

void capture()
{
    resetter r;
    std::vector<value_file> &v = captured();
    for (const char *f : k_value_files)
        if (exists(f)) v.push_back({f, value_of(r.read(f))});
    for (const std::string &o : r.list("options"))
        v.push_back({"options/" + o, value_of(r.read("options/" + o))});
    v.push_back({"tracing_on", value_of(r.read("tracing_on"))});
}

} // namespace

void tracefs_capture_defaults()
{
    std::call_once(g_captured, capture);
}

std::vector<std::string> tracefs_reset()
{
    tracefs_capture_defaults();
    resetter r;
    r.write("tracing_on", "0");
    r.remove_instances();
    r.write("current_tracer", "nop");
    r.reset_events();
    {
        // Function commands hold events in soft mode and sites patched: gone before the
        // filter is emptied, as rmdir removes an instance's.
        std::lock_guard<std::mutex> g(trace_types_lock());
        ftrace_probes_remove_array(trace_array_top());
        // Event triggers the files could not remove (a write refused): the kernel's
        // clear_event_triggers().
        clear_event_triggers(trace_array_top().id);
    }
    r.write("events/enable", "0");
    for (const char *f : k_list_files)
        r.clear(f);
    r.clear("dynamic_events");
    r.write("snapshot", "0");
    for (const value_file &v : captured())
        r.write(v.path, v.value);
    r.clear("trace");
    r.clear("error_log");
    return r.failed;
}

} // namespace dprobe
