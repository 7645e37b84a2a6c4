// A process image's session in the trace file: the metadata chunks the agent writes itself
// (SESSION, OBJECTS, EVENT), and the ring buffers it hands to the CLI, which copies their
// pages. Objects and events that appear later (dlopen, dlclose, events created through the
// tracefs) are described as they appear, objects with the time from which they hold.
#include "tools/agent/agent.h"

#include "core/dl_notify.h"
#include "core/ring_buffer.h"
#include "core/symbols.h"
#include "core/trace_clock.h"
#include "tools/trace_file.h"
#include "tracefs/probe_parse.h"
#include "tracefs/trace_events.h"

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <climits>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

namespace dprobe::agent
{

namespace
{

std::string describe(const loaded_object &o)
{
    char bias[32];
    std::snprintf(bias, sizeof bias, "0x%" PRIxPTR " ", o.load_bias);
    return bias + (o.path.empty() ? o.name : o.path);
}

std::string read_file(const char *path)
{
    int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return {};
    std::string s;
    char buf[4096];
    ssize_t n;
    while ((n = ::read(fd, buf, sizeof buf)) > 0)
        s.append(buf, static_cast<size_t>(n));
    ::close(fd);
    return s;
}

// The OBJECTS lines that bring the description up to the loader's list now; "" if nothing
// changed. AT: the time the change holds from (0: the session's start).
std::string objects_payload(uint64_t at)
{
    agent_state &st = state();
    auto objs = kallsyms::instance().objects();
    std::vector<std::pair<uint64_t, std::string>> now;
    std::string lines;
    auto known = [](const std::vector<std::pair<uint64_t, std::string>> &v, uint64_t id) {
        return std::any_of(v.begin(), v.end(), [&](const auto &p) { return p.first == id; });
    };
    for (const object_ptr &o : *objs) {
        now.emplace_back(o->id, describe(*o));
        if (!known(st.objects, o->id)) lines += "+ " + now.back().second + "\n";
    }
    for (const auto &[id, desc] : st.objects)
        if (!known(now, id)) lines += "- " + desc + "\n";
    st.objects = std::move(now);
    if (lines.empty() || !at) return lines;
    return "@ " + std::to_string(at) + "\n" + lines;
}

// "= 0x<address> <name>" lines: the names the graph gives addresses that have no symbol of
// their own (the implementation an IFUNC resolved to is shown under the IFUNC's name).
std::string names_payload()
{
    std::string out;
    char addr[32];
    for (const auto &[a, name] : state().names) {
        std::snprintf(addr, sizeof addr, "0x%" PRIxPTR " ", a);
        out += "= " + std::string(addr) + name + "\n";
    }
    return out;
}

bool known_event(uint32_t id)
{
    for (const auto &e : state().events)
        if (e.first == id) return true;
    return false;
}

// Events created while the program runs (`dprobe ctl`, echo into the FUSE tree): their
// definitions, for report.
void describe_new_events()
{
    agent_state &st = state();
    trace_events &te = trace_events::instance();
    // The tracepoints (USDT static events) too: enabled through their files, or read by t
    // events, their records are in the trace.
    std::string listing = te.listing(ACCEPT_DYNAMIC) + te.usdt_listing();
    size_t pos = 0;
    while (pos < listing.size()) {
        size_t nl = listing.find('\n', pos);
        std::string line = listing.substr(pos, nl == std::string::npos ? nl : nl - pos);
        pos = nl == std::string::npos ? listing.size() : nl + 1;
        dynevent_command cmd;
        parse_options po;
        po.check_files = false;
        auto argv = argv_split(line);
        if (argv.empty() || parse_dynevent(argv, po, cmd) ||
            cmd.kind != dynevent_command::type::create)
            continue;
        int id = te.event_id(cmd.def.group, cmd.def.event);
        if (id < 0 || known_event(static_cast<uint32_t>(id))) continue;
        auto fmt = te.format(cmd.def.group, cmd.def.event);
        if (!fmt) continue;
        std::string payload = tracefile::event_payload(
            static_cast<uint32_t>(id), cmd.def.group + "/" + cmd.def.event, line, *fmt);
        st.events.emplace_back(static_cast<uint32_t>(id), payload);
        write_chunk(tracefile::CHUNK_EVENT, payload);
    }
}

// --follow-loads: inside the loader, at each dlopen and dlclose (its lock held; the
// kallsyms snapshot is up to date). Written at once, stamped: the next events may already
// be in the new object.
void objects_changed(std::span<const object_ptr> added)
{
    agent_state &st = state();
    if (!st.active) return;
    quiet_section q;
    std::lock_guard<fair_mutex> g(st.lock);
    std::string lines = objects_payload(trace_clock_now());
    if (!lines.empty()) write_chunk(tracefile::CHUNK_OBJECTS, lines);
    // The graph's functions there that the fprobe could not take: said, not dropped.
    graph_plan plan;
    funcgraph_objects_added(added, &plan);
    if (plan.int3.empty() && plan.left_out.empty()) return;
    funcgraph_report(std::string(program_invocation_short_name) + " (pid " +
                         std::to_string(getpid()) + ")",
                     plan);
}

const dl_notifier &objects_notifier()
{
    static const dl_notifier n = {objects_changed, &state().lock};
    return n;
}

uint64_t new_session_id()
{
    struct timespec mono {
    };
    clock_gettime(CLOCK_MONOTONIC, &mono);
    // (pid << 32) | a stamp: an exec'd image keeps the pid but gets a new session.
    return (static_cast<uint64_t>(getpid()) << 32) |
           static_cast<uint32_t>((mono.tv_sec * 1000000000ull + mono.tv_nsec) >> 8);
}

std::string session_head(const char *reason)
{
    agent_state &st = state();
    std::string s;
    tracefile::append_kv(s, "pid", std::to_string(st.pid));
    tracefile::append_kv(s, "ppid", std::to_string(getppid()));
    s += st.session_kv;
    tracefile::append_kv(s, "reason", reason);
    return s;
}

void write_session_chunks(const char *reason, const std::string &objects)
{
    agent_state &st = state();
    write_chunk(tracefile::CHUNK_SESSION, session_head(reason));
    write_chunk(tracefile::CHUNK_OBJECTS, objects);
    // One write for the formats of thousands of events.
    std::vector<std::string> formats;
    formats.reserve(st.events.size());
    for (const auto &[id, payload] : st.events)
        formats.push_back(payload);
    if (!formats.empty()) write_chunks(tracefile::CHUNK_EVENT, formats);
}

} // namespace

void start_session(const char *reason)
{
    agent_state &st = state();
    struct timespec real {
    };
    clock_gettime(CLOCK_REALTIME, &real);
    st.pid = getpid();
    st.session = new_session_id();
    std::string s;
    std::string comm = read_file("/proc/self/comm");
    while (!comm.empty() && comm.back() == '\n')
        comm.pop_back();
    tracefile::append_kv(s, "comm", comm);
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    tracefile::append_kv(s, "exe", n > 0 ? std::string(exe, static_cast<size_t>(n)) : "");
    std::string cmdline = read_file("/proc/self/cmdline");
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    while (!cmdline.empty() && cmdline.back() == ' ')
        cmdline.pop_back();
    tracefile::append_kv(s, "argv", cmdline);
    trace_clock_id clk = trace_clock_current();
    tracefile::append_kv(s, "clock", trace_clock_name(clk));
    tracefile::append_kv(s, "clock_in_ns", trace_clock_in_ns(clk) ? "1" : "0");
    tracefile::append_kv(s, "tsc_khz", std::to_string(trace_clock_tsc_khz()));
    tracefile::append_kv(s, "start_realtime_ns",
                         std::to_string(real.tv_sec * 1000000000ull + real.tv_nsec));
    tracefile::append_kv(s, "start_clock_ns", std::to_string(trace_clock_now()));
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    tracefile::append_kv(s, "nr_cpus", std::to_string(cpus > 0 ? cpus : 1));
    std::lock_guard<fair_mutex> g(st.lock);
    st.session_kv = std::move(s);
    st.objects.clear();
    write_session_chunks(reason, objects_payload(0) + names_payload());
}

void fork_session()
{
    agent_state &st = state();
    st.pid = getpid();
    st.session = new_session_id();
    // The parent's objects (the child has the same mappings), from what the parent wrote:
    // the loader's and kallsyms' locks may be held by a parent thread that is not here.
    std::string objects;
    for (const auto &[id, desc] : st.objects)
        objects += "+ " + desc + "\n";
    write_session_chunks("fork", objects + names_payload());
    announce_buffers();
}

bool announce_buffers()
{
    agent_state &st = state();
    const int fd = ring_buffer_export_fd();
    if (st.status_fd < 0 || fd < 0) return false;
    std::string msg = "hello " + std::to_string(st.pid) + " " + std::to_string(st.session);
    iovec iov{msg.data(), msg.size()};
    alignas(cmsghdr) char cbuf[CMSG_SPACE(sizeof(int))] = {};
    msghdr mh{};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = cbuf;
    mh.msg_controllen = sizeof cbuf;
    cmsghdr *cm = CMSG_FIRSTHDR(&mh);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(cm), &fd, sizeof fd);
    // Blocking (with the socket's send time-out): the CLI must have the buffers before
    // they fill.
    for (;;) {
        if (sendmsg(st.status_fd, &mh, MSG_NOSIGNAL) >= 0) return true;
        if (errno != EINTR) return false;
    }
}

void describe_changes_locked(bool events)
{
    kallsyms::instance().refresh(); // cheap unless the loader's counters moved
    std::string lines = objects_payload(trace_clock_now());
    if (!lines.empty()) write_chunk(tracefile::CHUNK_OBJECTS, lines);
    if (events) describe_new_events();
}

int session_follow_loads(bool on)
{
    if (!on) {
        dl_notifier_remove(&objects_notifier());
        return 0;
    }
    return dl_notifier_add(&objects_notifier());
}

void session_describe_loads()
{
    // Listening only: the loader hook stays as it is (a program that asks for nothing keeps
    // ld.so untouched).
    dl_notifier_add(&objects_notifier(), false);
}

} // namespace dprobe::agent
