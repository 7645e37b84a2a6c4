#include "tracefs/error_log.h"

#include <cstdio>
#include <ctime>

namespace dprobe
{
namespace
{

#define C(name, text) #name,
constexpr const char *err_names[] = {"NONE", DPROBE_PROBE_ERRORS};
#undef C
#define C(name, text) text,
constexpr const char *err_texts[] = {"", DPROBE_PROBE_ERRORS};
#undef C

constexpr size_t n_errs = sizeof(err_names) / sizeof(err_names[0]);

constexpr const char cmd_prefix[] = "  Command: ";

uint64_t monotonic_ns()
{
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

} // namespace

const char *probe_err_name(probe_err e) noexcept
{
    auto i = static_cast<size_t>(e);
    return i < n_errs ? err_names[i] : "NONE";
}

const char *probe_err_text(probe_err e) noexcept
{
    auto i = static_cast<size_t>(e);
    return i < n_errs ? err_texts[i] : "";
}

probe_err probe_err_from_name(std::string_view name) noexcept
{
    for (size_t i = 1; i < n_errs; i++)
        if (name == err_names[i]) return static_cast<probe_err>(i);
    return probe_err::NONE;
}

std::string join_argv(std::span<const std::string> argv)
{
    std::string cmd;
    for (size_t i = 0; i < argv.size(); i++) {
        if (i) cmd += ' ';
        cmd += argv[i];
    }
    return cmd;
}

size_t probe_error_pos(std::span<const std::string> argv, const probe_error &err)
{
    size_t pos = 0;
    if (err.index < 0 || static_cast<size_t>(err.index) >= argv.size()) {
        // Past the last token and the space that would follow it.
        for (const auto &a : argv)
            pos += a.size() + 1;
        return pos;
    }
    for (int i = 0; i < err.index; i++)
        pos += argv[static_cast<size_t>(i)].size() + 1;
    return pos + static_cast<size_t>(err.offset < 0 ? 0 : err.offset);
}

void error_log::append(std::string_view loc, std::span<const std::string> argv,
                       const probe_error &err)
{
    if (!err.logged()) return;
    append_raw(loc, err.err, join_argv(argv), probe_error_pos(argv, err), monotonic_ns(),
               err.detail);
}

void error_log::append_raw(std::string_view loc, probe_err err, std::string command, size_t pos,
                           uint64_t ts_ns, std::string detail)
{
    entry e;
    e.detail = std::move(detail);
    e.ts_ns = ts_ns;
    e.loc = std::string(loc.substr(0, max_loc_len));
    e.err = err;
    e.command = std::move(command);
    e.pos = static_cast<uint16_t>(pos); // wraps like the kernel's u16
    std::lock_guard<std::mutex> g(lock_);
    if (entries_.size() == max_entries) entries_.pop_front();
    entries_.push_back(std::move(e));
}

void error_log::append_message(std::string_view loc, std::string_view message, std::string command,
                               size_t pos)
{
    entry e;
    e.ts_ns = monotonic_ns();
    e.loc = std::string(loc.substr(0, max_loc_len));
    e.err = probe_err::NONE;
    e.command = std::move(command);
    e.pos = static_cast<uint16_t>(pos);
    e.message = std::string(message);
    std::lock_guard<std::mutex> g(lock_);
    if (entries_.size() == max_entries) entries_.pop_front();
    entries_.push_back(std::move(e));
}

std::string error_log::format_entry(const entry &e)
{
    char stamp[48];
    std::snprintf(stamp, sizeof(stamp), "[%5llu.%06u] ",
                  static_cast<unsigned long long>(e.ts_ns / 1000000000ull),
                  static_cast<unsigned>((e.ts_ns % 1000000000ull) / 1000));
    std::string s = stamp;
    s += e.loc;
    s += ": error: ";
    s += e.message.empty() ? std::string(probe_err_text(e.err)) : e.message;
    s += '\n';
    s += cmd_prefix;
    s += e.command;
    s += '\n';
    s.append(sizeof(cmd_prefix) - 1 + e.pos, ' ');
    s += "^\n";
    return s;
}

std::string error_log::read() const
{
    std::lock_guard<std::mutex> g(lock_);
    std::string out;
    for (const auto &e : entries_)
        out += format_entry(e);
    return out;
}

void error_log::clear()
{
    std::lock_guard<std::mutex> g(lock_);
    entries_.clear();
}

size_t error_log::size() const
{
    std::lock_guard<std::mutex> g(lock_);
    return entries_.size();
}

std::deque<error_log::entry> error_log::entries() const
{
    std::lock_guard<std::mutex> g(lock_);
    return entries_;
}

} // namespace dprobe
