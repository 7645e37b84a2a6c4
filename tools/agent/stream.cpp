// Streaming the ring buffer into the trace file: session chunks, the consumer thread, and
// the final flush.
#include "tools/agent/agent.h"

#include "core/dl_notify.h"
#include "core/kthread.h"
#include "core/ring_buffer.h"
#include "core/symbols.h"
#include "core/trace_clock.h"
#include "tools/trace_file.h"
#include "tracefs/probe_parse.h"
#include "tracefs/trace_events.h"

#include <algorithm>
#include <cinttypes>
#include <climits>
#include <csignal>
#include <pthread.h>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

namespace dprobe::agent {

namespace {

constexpr size_t k_flush_bytes = 256 * 1024;

std::string describe(const loaded_object &o)
{
    char bias[32];
    std::snprintf(bias, sizeof bias, "0x%" PRIxPTR " ", o.load_bias);
    return bias + (o.path.empty() ? o.name : o.path);
}

// Objects the loader hook reported (--follow-loads), not yet written: id, description.
// Never destroyed: the consumer thread may still drain while exit() runs destructors.
struct loaded_list {
    std::mutex lock;
    std::vector<std::pair<uint64_t, std::string>> objects;
};
loaded_list &loaded()
{
    static loaded_list *l = new loaded_list;
    return *l;
}

// Inside the loader, at each dlopen: only note them (the chunk is written by the drain).
void objects_loaded(std::span<const object_ptr> added)
{
    loaded_list &l = loaded();
    std::lock_guard<std::mutex> g(l.lock);
    for (const object_ptr &o : added)
        l.objects.emplace_back(o->id, describe(*o));
}

const dl_notifier &objects_notifier()
{
    static const dl_notifier n = {objects_loaded, &loaded().lock};
    return n;
}

std::string read_file(const char *path)
{
    int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return {};
    std::string s;
    char buf[4096];
    ssize_t n;
    while ((n = ::read(fd, buf, sizeof buf)) > 0)
        s.append(buf, static_cast<size_t>(n));
    ::close(fd);
    return s;
}

std::string objects_payload(bool only_new)
{
    agent_state &st = state();
    std::string out;
    auto objs = kallsyms::instance().objects();
    std::vector<std::pair<uint64_t, std::string>> now, came_and_went;
    {
        std::lock_guard<std::mutex> g(loaded().lock);
        came_and_went.swap(loaded().objects);
    }
    auto has = [](const std::vector<std::pair<uint64_t, std::string>> &v, uint64_t id) {
        return std::any_of(v.begin(), v.end(), [&](const auto &p) { return p.first == id; });
    };
    for (const object_ptr &o : *objs) {
        std::string desc = describe(*o);
        now.emplace_back(o->id, desc);
        auto known = std::find_if(st.objects.begin(), st.objects.end(),
                                  [&](const auto &p) { return p.first == o->id; });
        if (!only_new || known == st.objects.end())
            out += "+ " + desc + "\n";
    }
    if (only_new)
        for (const auto &[id, desc] : st.objects)
            if (!has(now, id))
                out += "- " + desc + "\n";
    // Loaded and unloaded again since the last chunk: its records may be in the buffer.
    for (const auto &[id, desc] : came_and_went)
        if (!has(now, id) && !has(st.objects, id))
            out += "+ " + desc + "\n- " + desc + "\n";
    st.objects = std::move(now);
    return out;
}

bool known_event(uint32_t id)
{
    if (id == tracefile::FUNCGRAPH_ENTRY_ID || id == tracefile::FUNCGRAPH_EXIT_ID)
        return true;
    for (const auto &e : state().events)
        if (e.first == id)
            return true;
    return false;
}

// Events created while the program runs (`dprobe ctl`, echo into the FUSE tree): describe
// them in the file when their first records arrive.
void describe_new_events()
{
    agent_state &st = state();
    trace_events &te = trace_events::instance();
    std::string listing = te.listing(ACCEPT_DYNAMIC);
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
        if (id < 0 || known_event(static_cast<uint32_t>(id)))
            continue;
        auto fmt = te.format(cmd.def.group, cmd.def.event);
        if (!fmt)
            continue;
        std::string payload = tracefile::event_payload(
            static_cast<uint32_t>(id), cmd.def.group + "/" + cmd.def.event, line, *fmt);
        st.events.emplace_back(static_cast<uint32_t>(id), payload);
        write_chunk(tracefile::CHUNK_EVENT, payload);
    }
}

} // namespace

void start_session(const char *reason)
{
    agent_state &st = state();
    struct timespec mono {}, real {};
    clock_gettime(CLOCK_MONOTONIC, &mono);
    clock_gettime(CLOCK_REALTIME, &real);
    st.pid = getpid();
    // (pid << 32) | a stamp: an exec'd image keeps the pid but gets a new session.
    st.session = (static_cast<uint64_t>(st.pid) << 32) |
                 static_cast<uint32_t>((mono.tv_sec * 1000000000ull + mono.tv_nsec) >> 8);
    std::string s;
    tracefile::append_kv(s, "pid", std::to_string(st.pid));
    tracefile::append_kv(s, "ppid", std::to_string(getppid()));
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
    tracefile::append_kv(s, "reason", reason);
    std::lock_guard<std::mutex> g(st.lock);
    write_chunk(tracefile::CHUNK_SESSION, s);
    write_chunk(tracefile::CHUNK_OBJECTS, objects_payload(false));
    std::vector<std::string> formats;
    formats.reserve(st.events.size());
    for (const auto &[id, payload] : st.events)
        formats.push_back(payload);
    if (!formats.empty())
        write_chunks(tracefile::CHUNK_EVENT, formats);
    st.comms.clear();
}

int stream_follow_loads(bool on)
{
    if (!on) {
        dl_notifier_remove(&objects_notifier());
        return 0;
    }
    return dl_notifier_add(&objects_notifier());
}

void drain_locked()
{
    agent_state &st = state();
    if (st.out_fd < 0)
        return;
    // New objects (dlopen) first, so report can symbolize the records that follow.
    kallsyms::instance().refresh(); // cheap unless the loader's counters moved
    std::string added = objects_payload(true);
    if (!added.empty())
        write_chunk(tracefile::CHUNK_OBJECTS, added);
    std::string recs, comms;
    uint64_t n = 0, lost = 0;
    bool unknown = false;
    auto flush = [&] {
        if (!comms.empty())
            write_chunk(tracefile::CHUNK_COMM, comms);
        if (!recs.empty())
            write_chunk(tracefile::CHUNK_RECORDS, recs);
        comms.clear();
        recs.clear();
    };
    {
        ring_buffer_reader rd(ring_buffer_reader::CONSUME);
        rb_record rec;
        while (rd.next(rec)) {
            if (st.is_own_tid(rec.tid))
                continue;
            const char *c = rec.comm && *rec.comm ? rec.comm : nullptr;
            auto it = st.comms.find(rec.tid);
            if (it == st.comms.end() || (c && it->second != c)) {
                std::string name = c ? c : "";
                if (name.empty()) {
                    char path[64];
                    std::snprintf(path, sizeof path, "/proc/self/task/%d/comm", rec.tid);
                    name = read_file(path);
                    while (!name.empty() && name.back() == '\n')
                        name.pop_back();
                }
                if (name.empty())
                    name = "<...>";
                st.comms[rec.tid] = name;
                comms += std::to_string(rec.tid) + " " + name + "\n";
            }
            if (rec.len >= 2 && !unknown) {
                uint16_t type;
                std::memcpy(&type, rec.payload, sizeof type);
                unknown = !known_event(type);
            }
            tracefile::append_record(recs, rec.ts, rec.tid, rec.cpu, rec.flags, rec.lost_before,
                                     rec.payload, rec.len);
            n++;
            lost += rec.lost_before;
            if (recs.size() >= k_flush_bytes)
                flush();
        }
    }
    flush();
    if (unknown)
        describe_new_events();
    st.records += n;
    st.lost += lost;
}

namespace {

void send_stat()
{
    agent_state &st = state();
    rb_stats tot = ring_buffer_stats();
    status_send("stat " + std::to_string(st.pid) + " " + std::to_string(st.records) + " " +
                std::to_string(st.lost + tot.dropped) + " " + std::to_string(st.bytes));
}

void consumer_main()
{
    agent_state &st = state();
    // Keep this thread's own activity out of the trace.
    st.add_own_tid(static_cast<int32_t>(gettid()));
    uint64_t last_stat = 0;
    uint64_t last_drain_bytes = 0;
    while (!st.stop.load(std::memory_order_acquire)) {
        // Batch: at most 50 drains a second while the program writes little; a drain that
        // moved a lot means the buffers fill within milliseconds (a tight loop of traced
        // calls fills the default 1408 KB in a few): then drain again after 1 ms.
        const bool busy = last_drain_bytes >= 64 * 1024;
        struct timespec pause {0, (busy ? 1 : 20) * 1000 * 1000};
        nanosleep(&pause, nullptr);
        ring_buffer_wait(100);
        {
            std::lock_guard<std::mutex> g(st.lock);
            const uint64_t before = st.bytes;
            drain_locked();
            last_drain_bytes = st.bytes - before;
        }
        uint64_t now = trace_clock_read(trace_clock_id::mono);
        if (now - last_stat > 250000000ull) {
            send_stat();
            last_stat = now;
        }
    }
}

} // namespace

void start_consumer()
{
    agent_state &st = state();
    st.stop.store(false);
    // The consumer must not inherit the program's signal mask changes later; block the
    // asynchronous signals so they go to the program's threads.
    sigset_t all, old;
    sigfillset(&all);
    for (int s : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP, SIGABRT})
        sigdelset(&all, s);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    if (kthread_run(st.consumer, consumer_main))
        pthread_setname_np(st.consumer.native_handle(), "dprobe-stream");
    else
        std::fprintf(stderr, "dprobe agent: no thread for the trace stream (pid %d): its "
                             "events are not recorded\n",
                     static_cast<int>(getpid()));
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

void stop_consumer()
{
    agent_state &st = state();
    st.stop.store(true, std::memory_order_release);
    if (st.consumer.joinable()) {
        if (st.consumer.get_id() == std::this_thread::get_id())
            st.consumer.detach();
        else
            st.consumer.join();
    }
}

void finish(const char *reason, int value)
{
    agent_state &st = state();
    if (st.finished.exchange(true))
        return;
    ring_buffer_set_tracing_on(false); // what follows is the agent's own work
    stop_consumer();
    std::lock_guard<std::mutex> g(st.lock);
    drain_locked();
    std::string stats;
    char line[256];
    for (const rb_stats &t : ring_buffer_thread_stats()) {
        std::snprintf(line, sizeof line,
                      "tid=%d entries=%" PRIu64 " written=%" PRIu64 " read=%" PRIu64
                      " overrun=%" PRIu64 " dropped=%" PRIu64 "\n",
                      t.tid, t.entries, t.written, t.read, t.overrun, t.dropped);
        stats += line;
    }
    rb_stats tot = ring_buffer_stats();
    std::snprintf(line, sizeof line,
                  "total entries=%" PRIu64 " written=%" PRIu64 " read=%" PRIu64 " overrun=%" PRIu64
                  " dropped=%" PRIu64 "\n",
                  tot.entries, tot.written, tot.read, tot.overrun, tot.dropped);
    stats += line;
    write_chunk(tracefile::CHUNK_STATS, stats);
    std::string end;
    tracefile::append_kv(end, "reason", reason);
    if (std::strcmp(reason, "signal") == 0)
        tracefile::append_kv(end, "signal", std::to_string(value));
    else if (std::strcmp(reason, "exit") == 0)
        tracefile::append_kv(end, "status", std::to_string(value));
    tracefile::append_kv(end, "records", std::to_string(st.records));
    tracefile::append_kv(end, "lost", std::to_string(st.lost + tot.dropped));
    write_chunk(tracefile::CHUNK_END, end);
    status_send("stat " + std::to_string(st.pid) + " " + std::to_string(st.records) + " " +
                std::to_string(st.lost + tot.dropped) + " " + std::to_string(st.bytes));
}

} // namespace dprobe::agent
