// The trace file format's writing side (see trace_file.h).
#include "tools/trace_file.h"

#include "tools/crc32c.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <sys/uio.h>

#include <algorithm>
#include <climits>

namespace dprobe::tracefile
{

namespace
{

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
           "\nformat:\n"
           "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n"
           "\tfield:unsigned short depth;\toffset:2;\tsize:2;\tsigned:0;\n"
           "\tfield:unsigned long func;\toffset:4;\tsize:8;\tsigned:0;\n\n"
           "print fmt: \"--> %ps (%d)\", (void *)REC->func, REC->depth & 0x7fff\n";
}

std::string funcgraph_exit_format()
{
    return std::string("name: funcgraph_exit\nID: ") + std::to_string(FUNCGRAPH_EXIT_ID) +
           "\nformat:\n"
           "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n"
           "\tfield:unsigned short depth;\toffset:2;\tsize:2;\tsigned:0;\n"
           "\tfield:unsigned long func;\toffset:4;\tsize:8;\tsigned:0;\n\n"
           "print fmt: \"<-- %ps (%d)%s\", (void *)REC->func, REC->depth & 0x7fff, "
           "REC->depth & 0x8000 ? \" (unwound)\" : \"\"\n";
}

std::string function_format()
{
    return std::string("name: function\nID: ") + std::to_string(FUNCTION_ID) +
           "\nformat:\n"
           "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n"
           "\tfield:unsigned short pad;\toffset:2;\tsize:2;\tsigned:0;\n"
           "\tfield:unsigned long ip;\toffset:4;\tsize:8;\tsigned:0;\n"
           "\tfield:unsigned long parent_ip;\toffset:12;\tsize:8;\tsigned:0;\n\n"
           "print fmt: \" %ps <-- %ps\", (void *)REC->ip, (void *)REC->parent_ip\n";
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
    put<uint32_t>(s, static_cast<uint32_t>(crc32c(0, payload.data(), payload.size())));
    put<uint64_t>(s, session);
    put<uint32_t>(s, static_cast<uint32_t>(payload.size()));
    put<uint32_t>(s, 0);
    s.append(payload);
    s.append(padded - payload.size(), '\0');
    return s;
}

std::string event_payload(uint32_t id, std::string_view name, std::string_view definition,
                          std::string_view format, uint32_t flags)
{
    std::string s;
    put<uint32_t>(s, id);
    put<uint32_t>(s, flags);
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
        if (eq == std::string_view::npos) continue;
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
            if (errno == EINTR) continue;
            return false;
        }
        p += n;
        len -= static_cast<size_t>(n);
    }
    return true;
}

pages_chunk::pages_chunk(uint64_t session, int32_t tid, const char *comm)
{
    ch_.type = CHUNK_PAGES;
    ch_.session = session;
    ph_.tid = tid;
    std::strncpy(ph_.comm, comm ? comm : "", sizeof ph_.comm);
}

void pages_chunk::add(const page_header &h, const char *data)
{
    heads_.push_back(h);
    datas_.push_back(data);
    payload_len_ += sizeof(page_header) + (h.len - h.off);
}

bool pages_chunk::write(int fd)
{
    ph_.npages = static_cast<uint32_t>(heads_.size());
    uint32_t crc = crc32c(0, &ph_, sizeof ph_);
    std::vector<iovec> iov;
    iov.reserve(2 + 2 * heads_.size());
    iov.push_back({&ch_, sizeof ch_});
    iov.push_back({&ph_, sizeof ph_});
    for (size_t i = 0; i < heads_.size(); i++) {
        const page_header &h = heads_[i];
        const char *d = datas_[i] + h.off;
        const uint32_t n = h.len - h.off; // whole events: a multiple of 8
        crc = crc32c(crc, &h, sizeof h);
        crc = crc32c(crc, d, n);
        iov.push_back({const_cast<page_header *>(&h), sizeof h});
        if (n) iov.push_back({const_cast<char *>(d), n});
    }
    ch_.crc = static_cast<uint32_t>(crc);
    ch_.len = static_cast<uint32_t>(payload_len_);
    size_t total = k_chunk_header_size + payload_len_;
    size_t done = 0, first = 0;
    while (done < total) {
        ssize_t w = ::writev(fd, iov.data() + first,
                             static_cast<int>(std::min<size_t>(iov.size() - first, IOV_MAX)));
        if (w < 0) {
            if (errno == EINTR) continue;
            return false;
        }
        done += static_cast<size_t>(w);
        // Past the pieces written (a short write, or more pieces than IOV_MAX).
        size_t left = static_cast<size_t>(w);
        while (first < iov.size() && left >= iov[first].iov_len) {
            left -= iov[first].iov_len;
            first++;
        }
        if (left) {
            iov[first].iov_base = static_cast<char *>(iov[first].iov_base) + left;
            iov[first].iov_len -= left;
        }
    }
    return true;
}

} // namespace dprobe::tracefile
