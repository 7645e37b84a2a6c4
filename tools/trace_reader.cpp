// The trace file reader (see trace_reader.h).
#include "tools/trace_reader.h"

#include "tools/crc32c.h"

#include "core/ring_buffer_layout.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace dprobe::tracefile
{

namespace
{

template <class T> T get(const char *p)
{
    T v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

bool pread_all(int fd, void *buf, size_t len, uint64_t off)
{
    char *p = static_cast<char *>(buf);
    while (len) {
        ssize_t n = ::pread(fd, p, len, static_cast<off_t>(off));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        p += n;
        len -= static_cast<size_t>(n);
        off += static_cast<uint64_t>(n);
    }
    return true;
}

void for_each_line(std::string_view text, auto &&fn)
{
    size_t pos = 0;
    while (pos < text.size()) {
        size_t nl = text.find('\n', pos);
        std::string_view line = text.substr(pos, nl == std::string_view::npos ? nl : nl - pos);
        pos = nl == std::string_view::npos ? text.size() : nl + 1;
        if (!line.empty()) fn(line);
    }
}

// "tid=12 written=3 ..." into STATS.
thread_stats parse_stats_line(std::string_view line)
{
    thread_stats t;
    size_t pos = 0;
    while (pos < line.size()) {
        size_t sp = line.find(' ', pos);
        std::string_view w = line.substr(pos, sp == std::string_view::npos ? sp : sp - pos);
        pos = sp == std::string_view::npos ? line.size() : sp + 1;
        size_t eq = w.find('=');
        if (eq == std::string_view::npos) continue;
        std::string k(w.substr(0, eq));
        uint64_t v = std::strtoull(std::string(w.substr(eq + 1)).c_str(), nullptr, 10);
        if (k == "tid")
            t.tid = static_cast<int32_t>(v);
        else if (k == "written")
            t.written = v;
        else if (k == "dropped")
            t.dropped = v;
        else if (k == "lost")
            t.lost = v;
        else if (k == "orphans")
            t.orphans = v;
    }
    return t;
}

bool parse_meta_chunk(session &s, uint32_t type, std::string_view p)
{
    switch (type) {
    case CHUNK_SESSION:
        for (auto &[k, v] : parse_kv(p))
            s.info[k] = v;
        return true;
    case CHUNK_OBJECTS:
        parse_objects(s, p);
        return true;
    case CHUNK_EVENT: {
        if (p.size() < 8) return false;
        event_info e;
        e.id = get<uint32_t>(p.data());
        e.flags = get<uint32_t>(p.data() + 4);
        std::string_view rest = p.substr(8);
        std::string *dst[3] = {&e.name, &e.definition, &e.format};
        for (std::string *d : dst) {
            size_t z = rest.find('\0');
            if (z == std::string_view::npos) return false;
            *d = std::string(rest.substr(0, z));
            rest = rest.substr(z + 1);
        }
        s.events[e.id] = std::move(e);
        return true;
    }
    case CHUNK_STATS:
        s.stats.clear();
        for_each_line(p, [&](std::string_view line) {
            if (line.substr(0, 6) == "total ") {
                s.total = parse_stats_line(line.substr(6));
                s.has_total = true;
            } else {
                s.stats.push_back(parse_stats_line(line));
            }
        });
        return true;
    case CHUNK_HIST: {
        size_t nl = p.find('\n');
        if (nl == std::string_view::npos) return false;
        s.hists.emplace_back(std::string(p.substr(0, nl)), std::string(p.substr(nl + 1)));
        return true;
    }
    case CHUNK_END:
        s.end = parse_kv(p);
        if (s.end.empty()) s.end["reason"] = "unknown";
        return true;
    default:
        return true; // unknown chunk types from newer writers are skipped
    }
}

} // namespace

void parse_objects(session &s, std::string_view text)
{
    uint64_t ts = 0;
    for_each_line(text, [&](std::string_view line) {
        if (line.size() > 2 && line[0] == '@' && line[1] == ' ') {
            ts = std::strtoull(std::string(line.substr(2)).c_str(), nullptr, 10);
            return;
        }
        if (line.size() > 2 && line[0] == '=' && line[1] == ' ') {
            std::string rest(line.substr(2));
            char *end = nullptr;
            uint64_t a = std::strtoull(rest.c_str(), &end, 16);
            if (end && *end == ' ') s.names.emplace_back(a, std::string(end + 1));
            return;
        }
        if (line.size() < 4 || (line[0] != '+' && line[0] != '-')) return;
        object_info o;
        o.unloaded = line[0] == '-';
        o.ts = ts;
        std::string rest(line.substr(2));
        char *end = nullptr;
        o.load_bias = std::strtoull(rest.c_str(), &end, 16);
        if (end && *end == ' ') o.path = end + 1;
        s.objects.push_back(std::move(o));
    });
}

std::string session::get(const std::string &key, const std::string &dflt) const
{
    auto it = info.find(key);
    return it == info.end() ? dflt : it->second;
}

trace_reader::~trace_reader()
{
    if (fd_ >= 0) ::close(fd_);
}

bool trace_reader::open(const std::string &path, std::string *err)
{
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) {
        if (err) *err = path + ": " + std::strerror(errno);
        return false;
    }
    struct stat st {
    };
    fstat(fd_, &st);
    if (S_ISDIR(st.st_mode)) {
        if (err) *err = path + ": a directory, not a trace file (-i FILE: what record wrote)";
        return false;
    }
    bytes = static_cast<uint64_t>(st.st_size);
    char fh[k_file_header_size] = {};
    const bool got = bytes >= k_file_header_size && pread_all(fd_, fh, sizeof fh, 0);
    if (!got || std::memcmp(fh, k_magic, sizeof k_magic) != 0) {
        // What it is instead, when that is known: the reader of a trace-cmd file is trace-cmd.
        static const char trace_cmd[] = "\x17\x08\x44tracing";
        char head[sizeof trace_cmd - 1];
        const bool is_trace_cmd = bytes >= sizeof head && pread_all(fd_, head, sizeof head, 0) &&
                                  std::memcmp(head, trace_cmd, sizeof head) == 0;
        const std::string what =
            bytes == 0 ? "an empty file, not a dprobe trace file (nothing was recorded into it)"
            : is_trace_cmd
                ? "a trace-cmd trace.dat, not a dprobe trace file: read it with 'trace-cmd "
                  "report " +
                      path + "'"
            : !got ? "not a dprobe trace file (shorter than its header)"
                   : "not a dprobe trace file (it does not start with dprobe's magic)";
        if (err) *err = path + ": " + what;
        return false;
    }
    version = get<uint32_t>(fh + 8);
    const uint32_t hsize = get<uint32_t>(fh + 12);
    created_realtime_ns = get<uint64_t>(fh + 16);
    if (version != k_version || hsize < k_file_header_size || hsize > bytes) {
        if (err)
            *err = path + ": unsupported dprobe trace file version " + std::to_string(version) +
                   (version < k_version ? " (written by an older dprobe: record it again)" : "");
        return false;
    }
    std::map<uint64_t, size_t> sindex;
    std::map<std::pair<size_t, int32_t>, size_t> tindex;
    uint64_t pos = hsize;
    std::string payload;
    while (pos < bytes) {
        chunk_header h;
        if (bytes - pos < k_chunk_header_size || !pread_all(fd_, &h, sizeof h, pos)) {
            warning = "trace file ends with a partial chunk header (" +
                      std::to_string(bytes - pos) + " bytes ignored)";
            break;
        }
        const uint64_t padded = (uint64_t{h.len} + 7) & ~uint64_t{7};
        if (h.len > k_max_chunk || bytes - pos - k_chunk_header_size < padded) {
            warning = "trace file ends with a torn chunk (" + std::to_string(bytes - pos) +
                      " bytes ignored): the recording was cut short";
            break;
        }
        auto [it, fresh] = sindex.try_emplace(h.session, sessions.size());
        if (fresh) {
            sessions.emplace_back();
            sessions.back().id = h.session;
        }
        const uint64_t at = pos + k_chunk_header_size;
        if (h.type == CHUNK_PAGES) {
            // Only where it is: the pages are read (and checked) when their thread is.
            pages_header ph;
            if (h.len < sizeof ph || !pread_all(fd_, &ph, sizeof ph, at)) {
                warning = "malformed PAGES chunk at offset " + std::to_string(pos);
                break;
            }
            auto [ti, tfresh] = tindex.try_emplace({it->second, ph.tid}, streams.size());
            if (tfresh) {
                thread_stream t;
                t.session = it->second;
                t.tid = ph.tid;
                t.comm.assign(ph.comm, strnlen(ph.comm, sizeof ph.comm));
                if (ph.npages && h.len >= sizeof ph + sizeof(page_header)) {
                    page_header pg;
                    if (pread_all(fd_, &pg, sizeof pg, at + sizeof ph)) t.first_ts = pg.ts;
                }
                streams.push_back(std::move(t));
            }
            thread_stream &t = streams[ti->second];
            if (ph.comm[0])
                t.comm.assign(ph.comm, strnlen(ph.comm, sizeof ph.comm)); // the latest name
            t.chunks.emplace_back(at, h.len);
        } else {
            payload.resize(h.len);
            if (!pread_all(fd_, payload.data(), h.len, at)) {
                warning = "cannot read the chunk at offset " + std::to_string(pos);
                break;
            }
            if (crc32c(0, payload.data(), h.len) != h.crc) {
                warning = "chunk at offset " + std::to_string(pos) +
                          " fails its checksum; the rest of the file is ignored";
                break;
            }
            if (!parse_meta_chunk(sessions[it->second], h.type, payload)) {
                warning = "malformed chunk (type " + std::to_string(h.type) + ") at offset " +
                          std::to_string(pos) + "; the rest of the file is ignored";
                break;
            }
        }
        pos += k_chunk_header_size + padded;
    }
    return true;
}

trace_reader::cursor::cursor(const trace_reader &r, size_t stream) : r_(r), s_(r.streams.at(stream))
{
    for (const auto &[id, ev] : r.sessions.at(s_.session).events) {
        if (!(ev.flags & EVENT_FL_GRAPH_VALUES) || id < GRAPH_ARGS_FIRST_ID ||
            id > GRAPH_ARGS_LAST_ID)
            continue;
        graph_values_.resize(GRAPH_ARGS_LAST_ID - GRAPH_ARGS_FIRST_ID + 1);
        graph_values_[id - GRAPH_ARGS_FIRST_ID] = true;
    }
}

bool trace_reader::cursor::split(event &e)
{
    uint16_t type;
    if (graph_values_.empty() || e.len < sizeof type) return false;
    std::memcpy(&type, e.payload, sizeof type);
    if (type < GRAPH_ARGS_FIRST_ID || type > GRAPH_ARGS_LAST_ID ||
        !graph_values_[type - GRAPH_ARGS_FIRST_ID] ||
        !ftrace_graph_values_split(e.payload, e.len, e.tid, graph_part_, values_part_))
        return false;
    pending_event_ = e;
    pending_event_.lost_before = 0;
    pending_event_.payload = values_part_.data();
    pending_event_.len = static_cast<uint32_t>(values_part_.size());
    pending_ = true;
    e.payload = &graph_part_;
    e.len = sizeof graph_part_;
    return true;
}

bool trace_reader::cursor::load_chunk()
{
    while (chunk_ < s_.chunks.size()) {
        auto [off, len] = s_.chunks[chunk_++];
        buf_.resize(len);
        chunk_header h;
        if (!pread_all(r_.fd_, &h, sizeof h, off - k_chunk_header_size) ||
            !pread_all(r_.fd_, buf_.data(), len, off)) {
            error_ = "cannot read the trace file";
            return false;
        }
        if (crc32c(0, buf_.data(), len) != h.crc) {
            error_ = "a PAGES chunk of thread " + std::to_string(s_.tid) + " at offset " +
                     std::to_string(off - k_chunk_header_size) +
                     " fails its checksum: the thread's later events are left out";
            return false;
        }
        pos_ = sizeof(pages_header);
        pages_left_ = get<uint32_t>(buf_.data() + 4);
        return true;
    }
    return false;
}

bool trace_reader::cursor::next(event &e)
{
    if (pending_) { // the values of the graph record handed out last
        pending_ = false;
        e = pending_event_;
        return true;
    }
    if (!error_.empty()) return false;
    for (;;) {
        if (in_page_) {
            rb::page_walker w{page_, len_, off_, ts_, cpu_};
            rb::event re;
            bool got = w.next(re);
            off_ = w.off;
            ts_ = w.ts;
            cpu_ = w.cpu;
            if (got) {
                if (re.kind == rb::event::LOST) {
                    lost_ += re.lost;
                    continue;
                }
                if (re.kind == rb::event::PADDING) continue;
                e = {re.ts, re.cpu, s_.tid, lost_, re.payload, re.len};
                lost_ = 0;
                split(e);
                return true;
            }
            in_page_ = false;
        }
        if (pages_left_ == 0) {
            if (!load_chunk()) return false;
            continue;
        }
        if (pos_ + sizeof(page_header) > buf_.size()) {
            error_ = "a malformed PAGES chunk of thread " + std::to_string(s_.tid);
            return false;
        }
        page_header ph = get<page_header>(buf_.data() + pos_);
        pos_ += sizeof ph;
        const size_t n = ph.len - ph.off;
        if (ph.len < ph.off || ph.len > rb::k_page_size || pos_ + n > buf_.size()) {
            error_ = "a malformed page of thread " + std::to_string(s_.tid);
            return false;
        }
        // The walker indexes the page from its start: point it OFF bytes before the data.
        page_ = buf_.data() + pos_ - ph.off;
        off_ = ph.off;
        len_ = ph.len;
        ts_ = ph.ts;
        cpu_ = ph.cpu;
        lost_ += ph.lost;
        pos_ += n;
        pages_left_--;
        in_page_ = true;
    }
}

trace_reader::merged::merged(const trace_reader &r)
{
    for (size_t i = 0; i < r.streams.size(); i++) {
        cur_.push_back(std::make_unique<cursor>(r, i));
        head_.emplace_back();
        has_.push_back(false);
        push(i);
    }
}

void trace_reader::merged::push(size_t i)
{
    has_[i] = cur_[i]->next(head_[i]);
    if (!has_[i]) return;
    heap_.push_back(i);
    auto later = [this](size_t a, size_t b) {
        return head_[a].ts != head_[b].ts ? head_[a].ts > head_[b].ts : a > b;
    };
    std::push_heap(heap_.begin(), heap_.end(), later);
}

bool trace_reader::merged::next(event &e, size_t &stream)
{
    if (pending_ >= 0) {
        push(static_cast<size_t>(pending_));
        pending_ = -1;
    }
    if (heap_.empty()) return false;
    auto later = [this](size_t a, size_t b) {
        return head_[a].ts != head_[b].ts ? head_[a].ts > head_[b].ts : a > b;
    };
    std::pop_heap(heap_.begin(), heap_.end(), later);
    size_t i = heap_.back();
    heap_.pop_back();
    e = head_[i];
    stream = i;
    // The event's payload lives in cursor I's chunk: keep it until the next call by moving
    // the cursor on only then.
    pending_ = static_cast<long>(i);
    return true;
}

} // namespace dprobe::tracefile
