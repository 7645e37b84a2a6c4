#include "tools/trace_file.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

namespace dprobe::tracefile {

namespace {

const char *const k_common_fields =
    "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n"
    "\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n"
    "\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n"
    "\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n";

template <class T> void put(std::string &s, T v)
{
    s.append(reinterpret_cast<const char *>(&v), sizeof v);
}
template <class T> T get(const char *p)
{
    T v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

} // namespace

std::string funcgraph_entry_format()
{
    return std::string("name: funcgraph_entry\nID: ") + std::to_string(FUNCGRAPH_ENTRY_ID) +
           "\nformat:\n" + k_common_fields +
           "\tfield:unsigned long func;\toffset:8;\tsize:8;\tsigned:0;\n"
           "\tfield:int depth;\toffset:16;\tsize:4;\tsigned:1;\n\n"
           "print fmt: \"--> %ps (%d)\", (void *)REC->func, REC->depth\n";
}

std::string funcgraph_exit_format()
{
    return std::string("name: funcgraph_exit\nID: ") + std::to_string(FUNCGRAPH_EXIT_ID) +
           "\nformat:\n" + k_common_fields +
           "\tfield:unsigned long func;\toffset:8;\tsize:8;\tsigned:0;\n"
           "\tfield:int depth;\toffset:16;\tsize:4;\tsigned:1;\n"
           "\tfield:unsigned int overrun;\toffset:20;\tsize:4;\tsigned:0;\n"
           "\tfield:unsigned long long calltime;\toffset:24;\tsize:8;\tsigned:0;\n"
           "\tfield:unsigned long long rettime;\toffset:32;\tsize:8;\tsigned:0;\n\n"
           "print fmt: \"<-- %ps (%d) (start: %llx  end: %llx) over: %d\", (void *)REC->func, "
           "REC->depth, REC->calltime, REC->rettime, REC->depth\n";
}

std::string file_header(uint64_t created_realtime_ns)
{
    std::string s(k_magic, sizeof k_magic);
    put<uint32_t>(s, k_version);
    put<uint32_t>(s, k_file_header_size);
    put<uint64_t>(s, created_realtime_ns);
    put<uint64_t>(s, 0);
    return s;
}

std::string make_chunk(chunk_type type, uint64_t session, std::string_view payload)
{
    std::string s;
    size_t padded = (payload.size() + 7) & ~size_t{7};
    s.reserve(k_chunk_header_size + padded);
    put<uint32_t>(s, type);
    put<uint32_t>(s, static_cast<uint32_t>(
                         crc32(0, reinterpret_cast<const Bytef *>(payload.data()),
                               static_cast<uInt>(payload.size()))));
    put<uint64_t>(s, session);
    put<uint32_t>(s, static_cast<uint32_t>(payload.size()));
    put<uint32_t>(s, 0);
    s.append(payload);
    s.append(padded - payload.size(), '\0');
    return s;
}

void append_record(std::string &payload, uint64_t ts, int32_t tid, uint16_t cpu, uint8_t flags,
                   uint64_t lost_before, const void *data, uint32_t len)
{
    record_header h{ts, tid, cpu, flags, 0, len, 0, lost_before};
    payload.append(reinterpret_cast<const char *>(&h), sizeof h);
    payload.append(static_cast<const char *>(data), len);
    payload.append(((len + 7) & ~7u) - len, '\0');
}

std::string event_payload(uint32_t id, std::string_view name, std::string_view definition,
                          std::string_view format)
{
    std::string s;
    put<uint32_t>(s, id);
    put<uint32_t>(s, 0);
    for (std::string_view v : {name, definition, format}) {
        s.append(v);
        s.push_back('\0');
    }
    return s;
}

void append_kv(std::string &out, std::string_view key, std::string_view value)
{
    out.append(key);
    out.push_back('=');
    for (char c : value) {
        if (c == '\n')
            out += "\\n";
        else if (c == '\\')
            out += "\\\\";
        else
            out.push_back(c);
    }
    out.push_back('\n');
}

std::map<std::string, std::string> parse_kv(std::string_view text)
{
    std::map<std::string, std::string> m;
    size_t pos = 0;
    while (pos < text.size()) {
        size_t nl = text.find('\n', pos);
        std::string_view line = text.substr(pos, nl == std::string_view::npos ? nl : nl - pos);
        pos = nl == std::string_view::npos ? text.size() : nl + 1;
        size_t eq = line.find('=');
        if (eq == std::string_view::npos)
            continue;
        std::string v;
        for (size_t i = eq + 1; i < line.size(); i++) {
            if (line[i] == '\\' && i + 1 < line.size()) {
                v.push_back(line[i + 1] == 'n' ? '\n' : line[i + 1]);
                i++;
            } else {
                v.push_back(line[i]);
            }
        }
        m[std::string(line.substr(0, eq))] = std::move(v);
    }
    return m;
}

bool write_all(int fd, const void *data, size_t len) noexcept
{
    const char *p = static_cast<const char *>(data);
    while (len) {
        ssize_t n = ::write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return false;
        }
        p += n;
        len -= static_cast<size_t>(n);
    }
    return true;
}

std::string session::get(const std::string &key, const std::string &dflt) const
{
    auto it = info.find(key);
    return it == info.end() ? dflt : it->second;
}

namespace {

void for_each_line(std::string_view text, auto &&fn)
{
    size_t pos = 0;
    while (pos < text.size()) {
        size_t nl = text.find('\n', pos);
        std::string_view line = text.substr(pos, nl == std::string_view::npos ? nl : nl - pos);
        pos = nl == std::string_view::npos ? text.size() : nl + 1;
        if (!line.empty())
            fn(line);
    }
}

// "tid=12 entries=3 ..." into STATS.
thread_stats parse_stats_line(std::string_view line)
{
    thread_stats t;
    size_t pos = 0;
    while (pos < line.size()) {
        size_t sp = line.find(' ', pos);
        std::string_view w = line.substr(pos, sp == std::string_view::npos ? sp : sp - pos);
        pos = sp == std::string_view::npos ? line.size() : sp + 1;
        size_t eq = w.find('=');
        if (eq == std::string_view::npos)
            continue;
        std::string k(w.substr(0, eq));
        uint64_t v = std::strtoull(std::string(w.substr(eq + 1)).c_str(), nullptr, 10);
        if (k == "tid") t.tid = static_cast<int32_t>(v);
        else if (k == "entries") t.entries = v;
        else if (k == "written") t.written = v;
        else if (k == "read") t.read = v;
        else if (k == "overrun") t.overrun = v;
        else if (k == "dropped") t.dropped = v;
    }
    return t;
}

bool parse_chunk(session &s, uint32_t type, std::string_view p)
{
    switch (type) {
    case CHUNK_SESSION:
        for (auto &[k, v] : parse_kv(p))
            s.info[k] = v;
        return true;
    case CHUNK_OBJECTS:
        for_each_line(p, [&](std::string_view line) {
            if (line.size() < 4 || (line[0] != '+' && line[0] != '-'))
                return;
            object_info o;
            o.unloaded = line[0] == '-';
            std::string rest(line.substr(2));
            char *end = nullptr;
            o.load_bias = std::strtoull(rest.c_str(), &end, 16);
            if (end && *end == ' ')
                o.path = end + 1;
            s.objects.push_back(std::move(o));
        });
        return true;
    case CHUNK_EVENT: {
        if (p.size() < 8)
            return false;
        event_info e;
        e.id = get<uint32_t>(p.data());
        std::string_view rest = p.substr(8);
        std::string *dst[3] = {&e.name, &e.definition, &e.format};
        for (std::string *d : dst) {
            size_t z = rest.find('\0');
            if (z == std::string_view::npos)
                return false;
            *d = std::string(rest.substr(0, z));
            rest = rest.substr(z + 1);
        }
        s.events[e.id] = std::move(e);
        return true;
    }
    case CHUNK_COMM:
        for_each_line(p, [&](std::string_view line) {
            size_t sp = line.find(' ');
            if (sp == std::string_view::npos)
                return;
            s.comms[std::atoi(std::string(line.substr(0, sp)).c_str())] =
                std::string(line.substr(sp + 1));
        });
        return true;
    case CHUNK_RECORDS: {
        size_t pos = 0;
        while (pos + sizeof(record_header) <= p.size()) {
            record_header h;
            std::memcpy(&h, p.data() + pos, sizeof h);
            pos += sizeof h;
            size_t padded = (size_t{h.len} + 7) & ~size_t{7};
            if (pos + h.len > p.size())
                return false;
            record r{h.ts, h.tid, h.cpu, h.flags, h.lost_before,
                     std::string(p.substr(pos, h.len))};
            s.records.push_back(std::move(r));
            pos += padded;
        }
        return pos == p.size();
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
    case CHUNK_END:
        s.end = parse_kv(p);
        if (s.end.empty())
            s.end["reason"] = "unknown";
        return true;
    default:
        return true; // unknown chunk types from newer writers are skipped
    }
}

} // namespace

bool parse_trace(std::string_view bytes, trace_data &data, std::string *err)
{
    data = trace_data{};
    data.bytes = bytes.size();
    if (bytes.size() < k_file_header_size || std::memcmp(bytes.data(), k_magic, sizeof k_magic)) {
        if (err)
            *err = "not a dprobe trace file (bad magic)";
        return false;
    }
    data.version = get<uint32_t>(bytes.data() + 8);
    uint32_t hsize = get<uint32_t>(bytes.data() + 12);
    data.created_realtime_ns = get<uint64_t>(bytes.data() + 16);
    if (data.version != k_version || hsize < k_file_header_size || hsize > bytes.size()) {
        if (err)
            *err = "unsupported dprobe trace file version " + std::to_string(data.version);
        return false;
    }
    std::map<uint64_t, size_t> index;
    size_t pos = hsize;
    while (pos < bytes.size()) {
        if (bytes.size() - pos < k_chunk_header_size) {
            data.warning = "trace file ends with a partial chunk header (" +
                           std::to_string(bytes.size() - pos) + " bytes ignored)";
            break;
        }
        const char *h = bytes.data() + pos;
        uint32_t type = get<uint32_t>(h);
        uint32_t crc = get<uint32_t>(h + 4);
        uint64_t sid = get<uint64_t>(h + 8);
        uint32_t len = get<uint32_t>(h + 16);
        size_t padded = (size_t{len} + 7) & ~size_t{7};
        if (len > k_max_chunk || bytes.size() - pos - k_chunk_header_size < padded) {
            data.warning = "trace file ends with a torn chunk (" +
                           std::to_string(bytes.size() - pos) + " bytes ignored): the recording "
                           "was cut short";
            break;
        }
        std::string_view payload = bytes.substr(pos + k_chunk_header_size, len);
        if (crc32(0, reinterpret_cast<const Bytef *>(payload.data()), len) != crc) {
            data.warning = "chunk at offset " + std::to_string(pos) +
                           " fails its checksum; the rest of the file is ignored";
            break;
        }
        auto [it, fresh] = index.try_emplace(sid, data.sessions.size());
        if (fresh) {
            data.sessions.emplace_back();
            data.sessions.back().id = sid;
        }
        if (!parse_chunk(data.sessions[it->second], type, payload)) {
            data.warning = "malformed chunk (type " + std::to_string(type) + ") at offset " +
                           std::to_string(pos) + "; the rest of the file is ignored";
            break;
        }
        pos += k_chunk_header_size + padded;
    }
    return true;
}

bool read_trace(const std::string &path, trace_data &data, std::string *err)
{
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (err)
            *err = path + ": " + std::strerror(errno);
        return false;
    }
    std::string bytes;
    char buf[1 << 16];
    for (;;) {
        ssize_t n = ::read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        bytes.append(buf, static_cast<size_t>(n));
    }
    ::close(fd);
    std::string why;
    if (!parse_trace(bytes, data, &why)) {
        if (err)
            *err = path + ": " + why;
        return false;
    }
    return true;
}

} // namespace dprobe::tracefile
