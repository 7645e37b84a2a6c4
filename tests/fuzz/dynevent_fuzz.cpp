// Fuzz target for the dynamic_events path short of registering a probe: command lines
// through the parser and fetch-arg compiler (with the error_log of rejected lines), then for
// each accepted probe what the tracefs does with it: the listing (which must parse back to
// itself), @SYM resolution, the `format` file (which libtraceevent must accept), a record
// filled from registers that point at readable and unreadable memory (into a buffer of
// exactly the size the length pass asked for), its `trace` text, and event filters compiled
// against its fields and run on that record.
//
// Input: text. Lines starting with '&' are event filter expressions for the last accepted
// probe; the other lines are dynamic_events commands. A first byte below 8 selects which
// kinds the file accepts (bit 0 kprobe, 1 uprobe, 2 fprobe), as kprobe_events and
// uprobe_events do.
#include "tests/fuzz/fuzz_driver.h"
#include "tracefs/error_log.h"
#include "tracefs/event_filter.h"
#include "tracefs/event_format.h"
#include "tracefs/fetch_arg.h"
#include "tracefs/probe_parse.h"

#include <traceevent/event-parse.h>

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

using namespace dprobe;

namespace
{

[[noreturn]] void fail(const char *what, const std::string &detail)
{
    std::fprintf(stderr, "dynevent_fuzz: invariant broken: %s\n  %s\n", what, detail.c_str());
    std::abort();
}
#define CHECK(c, detail)                                                                           \
    do {                                                                                           \
        if (!(c)) fail(#c, detail);                                                                \
    } while (0)

// Memory the fetch programs read: one readable page between two unreadable ones, so a
// dereference past it faults (the nofault path) instead of reading whatever follows.
struct scratch_pages {
    uint8_t *page = nullptr;
    size_t size = 0;
    scratch_pages()
    {
        size = static_cast<size_t>(sysconf(_SC_PAGESIZE));
        void *m = mmap(nullptr, 3 * size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) std::abort();
        page = static_cast<uint8_t *>(m) + size;
        if (mprotect(page, size, PROT_READ | PROT_WRITE)) std::abort();
    }
};

scratch_pages &scratch()
{
    static scratch_pages s;
    return s;
}

// Registers: mostly pointers into the scratch page (strings, structures), some raw values
// from the input (garbage pointers), the stack pointer inside the page.
void fill_regs(pt_regs &r, std::string_view input)
{
    scratch_pages &s = scratch();
    // The page holds the input repeated, with a NUL every 61 bytes so strings end.
    for (size_t i = 0; i < s.size; ++i)
        s.page[i] =
            input.empty() ? 0 : (i % 61 == 60 ? 0 : static_cast<uint8_t>(input[i % input.size()]));
    uint64_t h = 1469598103934665603ULL;
    for (unsigned char c : input)
        h = (h ^ c) * 1099511628211ULL;
    auto *w = reinterpret_cast<unsigned long *>(&r);
    for (size_t i = 0; i < sizeof r / sizeof *w; ++i) {
        h = h * 6364136223846793005ULL + 1442695040888963407ULL;
        switch ((h >> 60) & 3) {
        case 0:
            w[i] = h; // garbage
            break;
        case 1:
            w[i] = (h >> 8) & 0xff; // small number
            break;
        default:
            w[i] = reinterpret_cast<unsigned long>(s.page + ((h >> 16) % s.size));
            break;
        }
    }
    r.sp = reinterpret_cast<unsigned long>(s.page + s.size / 2);
}

std::string argv_text(std::span<const std::string> argv)
{
    return join_argv(argv);
}

void check_log(const error_log &log)
{
    CHECK(log.size() <= error_log::max_entries, "");
    for (const auto &e : log.entries()) {
        CHECK(e.err != probe_err::NONE, e.command);
        CHECK(e.pos <= e.command.size() + 1, e.command + " pos " + std::to_string(e.pos));
        CHECK(e.loc.size() <= error_log::max_loc_len, e.loc);
    }
    const std::string text = log.read();
    CHECK(log.entries().empty() == text.empty(), text);
}

// The listing of DEF parses back to the same listing.
void check_listing(const probe_definition &def, const parse_options &opts)
{
    // "p 0x10+0" is a kprobe on the symbol "0x10" (the kernel parses it so too): no such
    // symbol can exist, registering fails, and there is no listing to read back.
    unsigned long long n;
    if (def.place.kind == probe_place::form::symbol && kstrtoull(def.place.symbol, 0, n) == 0)
        return;
    const std::string listing = def.listing();
    const auto argv = argv_split(listing);
    dynevent_command again;
    const probe_error e = parse_dynevent(argv, opts, again);
    CHECK(e.ok(), listing + " -> " + probe_err_name(e.err) + " at " + std::to_string(e.index) +
                      ":" + std::to_string(e.offset));
    CHECK(again.kind == dynevent_command::type::create, listing);
    CHECK(again.def.listing() == listing, listing + " -> " + again.def.listing());
    CHECK(again.def.args_size == def.args_size, listing);
}

void check_format(const probe_definition &def)
{
    const std::string format = probe_format_file(def, 1000);
    tep_handle *tep = tep_alloc();
    CHECK(tep, "tep_alloc");
    tep_set_long_size(tep, 8);
    tep_set_file_bigendian(tep, TEP_LITTLE_ENDIAN);
    const tep_errno r = tep_parse_event(tep, format.data(), format.size(), def.group.c_str());
    tep_free(tep);
    // libtraceevent's tokenizer turns mac80211's STA_PR_FMT, VIF_PR_FMT and LOCAL_PR_FMT into
    // format strings wherever they appear, so an event or a field with one of those names
    // (which the kernel accepts as well) has a format it cannot read. Not dprobe's to change.
    for (const char *quirk : {"STA_PR_FMT", "VIF_PR_FMT", "LOCAL_PR_FMT"})
        if (r != 0 && format.find(quirk) != std::string::npos) return;
    CHECK(r == 0, def.listing() + "\n" + format);
}

void run_probe(probe_definition &def, std::span<const std::string> filters, std::string_view input)
{
    // @SYM resolves into the scratch page, @+OFFSET too.
    uint8_t *page = scratch().page;
    fetch_resolver resolver;
    resolver.symbol = [page](std::string_view name) -> std::optional<uintptr_t> {
        if (name.empty() || name[0] == 'Z') return std::nullopt; // an unknown symbol now and then
        return reinterpret_cast<uintptr_t>(page + name.size() * 8);
    };
    resolver.file_offset = [page](uint64_t off) -> std::optional<uintptr_t> {
        return reinterpret_cast<uintptr_t>(page) + off;
    };
    if (resolve_fetch_args(def.args, resolver, 2)) return;

    pt_regs regs;
    fill_regs(regs, input);
    std::vector<uint8_t> edata(def.entry_data_size() + 1);
    store_entry_args(def.entry_args, &regs, edata.data());
    fetch_context ctx;
    ctx.regs = &regs;
    ctx.edata = edata.data();

    // The two passes of trace_probe_write(): the length, then the record in exactly that.
    const probe_event_layout l = probe_layout(def);
    CHECK(l.fixed_size >= l.args_off && l.args_off >= TRACE_ENTRY_HEADER_SIZE, def.listing());
    const size_t len = l.fixed_size + trace_args_dynamic_size(def.args, ctx);
    std::vector<uint8_t> rec(len);
    const size_t used = probe_record_store(rec.data(), len, def, ctx, 1000, 42, 0x401000,
                                           def.is_return ? 0x402000 : 0);
    CHECK(used <= len, def.listing());
    const std::string text = format_probe_record(def, rec.data(), used, nullptr);
    CHECK(!text.empty(), def.listing());

    const auto fields = probe_filter_fields(def);
    for (const std::string &f : filters) {
        filter_parse_error err;
        auto flt = event_filter::compile(f, fields, err);
        if (!flt) {
            CHECK(err.err != filter_err::NONE, f);
            CHECK(err.pos >= 0 && static_cast<size_t>(err.pos) <= f.size() + 1,
                  f + " pos " + std::to_string(err.pos));
            const std::string shown = filter_error_text(f, err);
            CHECK(!shown.empty(), f);
            continue;
        }
        event_filter::context fc;
        fc.comm = "fuzz";
        (void)flt->match(rec.data(), used, fc);
    }
}

} // namespace

// LeakSanitizer: libtraceevent 1.7 leaks a token while it parses a `print fmt` naming a field
// STA_PR_FMT, VIF_PR_FMT or LOCAL_PR_FMT (its special case for mac80211's macros), with every
// allocation made and lost inside tep_parse_event(); found by this target. Not dprobe's leak.
extern "C" const char *__lsan_default_suppressions()
{
    return "leak:libtraceevent.so\n";
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const bool once = (fetch_install_fault_handler(), true);
    (void)once;
    std::string_view in(reinterpret_cast<const char *>(data), size);
    parse_options opts;
    opts.check_files = false; // no file system access from arbitrary paths
    if (!in.empty() && static_cast<unsigned char>(in[0]) < 8) {
        const unsigned mask = static_cast<unsigned char>(in[0]);
        opts.accept = mask ? mask : static_cast<unsigned>(ACCEPT_DYNAMIC);
        in.remove_prefix(1);
    }
    if (in.size() > 8192) return 0;

    std::vector<std::string> commands, filters;
    for (size_t at = 0; at <= in.size();) {
        size_t nl = in.find('\n', at);
        if (nl == std::string_view::npos) nl = in.size();
        std::string line(in.substr(at, nl - at));
        if (!line.empty() && line[0] == '&')
            filters.push_back(line.substr(1));
        else
            commands.push_back(line);
        at = nl + 1;
    }

    // The write() path: the whole buffer through trace_parse_run_command().
    error_log log;
    std::vector<probe_definition> defs;
    std::string body;
    for (const auto &c : commands)
        body += c + "\n";
    trace_parse_run_command(body, [&](std::span<const std::string> argv) {
        dynevent_command cmd;
        const int r = parse_dynevent_logged(argv, opts, log, cmd);
        CHECK(r <= 0, argv_text(argv));
        if (r == 0 && cmd.kind == dynevent_command::type::create) defs.push_back(cmd.def);
        return 0; // go on with the next line
    });
    check_log(log);

    // Each line on its own, with the error reported where it points.
    for (const auto &c : commands) {
        const auto argv = argv_split(c);
        if (argv.empty()) continue;
        dynevent_command cmd;
        const char *loc = nullptr;
        const probe_error e = parse_dynevent(argv, opts, cmd, &loc);
        if (e) {
            CHECK(e.errnum > 0, c);
            if (e.logged()) {
                CHECK(loc != nullptr, c);
                CHECK(e.index >= 0 && e.offset >= 0, c);
                CHECK(probe_error_pos(argv, e) <= join_argv(argv).size() + 1, c);
            }
            continue;
        }
        if (cmd.kind == dynevent_command::type::remove) {
            for (const auto &d : defs)
                (void)delete_matches(cmd.del, d);
            continue;
        }
        probe_definition &def = cmd.def;
        uint32_t off = 0;
        for (const probe_arg &a : def.args) {
            CHECK(a.offset == off, def.listing());
            off += a.field_size();
        }
        CHECK(off == def.args_size, def.listing());
        check_listing(def, opts);
        check_format(def);
        // The kernel's append rules against the probes accepted so far.
        std::vector<const probe_definition *> same;
        for (const auto &d : defs)
            if (d.group == def.group && d.event == def.event) same.push_back(&d);
        if (!same.empty()) (void)check_append(same, def);
        run_probe(def, filters, in);
    }
    return 0;
}

#ifdef DPROBE_FUZZ_STANDALONE
// Pseudo-random command lines for the standalone driver: the grammar's pieces, shuffled and
// now and then damaged.
void dprobe_fuzz_generate(std::vector<uint8_t> &out, fuzz_rng &rng)
{
    static const char *const heads[] = {
        "p",   "r",        "r4",   "r0x10", "f",    "p:grp/ev", "r:ev",     "f:fprobes/x",
        "p:x", "-:grp/ev", "-:ev", "-:",    "!p:x", "p:",       "r99999:e", "f:g/",
    };
    static const char *const places[] = {
        "do_work",
        "do_work+4",
        "do_work+0x10",
        "libc.so.6:malloc",
        "0x401000",
        "do_work%return",
        "/bin/sh:0x46420",
        "/bin/sh:0x10(0x20)",
        "/bin/sh:0x10%return",
        "parse_*",
        "sym-1",
        "lib:sym+0x100000000",
        "a:b:c",
    };
    static const char *const fetches[] = {
        "%ax",         "%di",       "%ip",   "%sp",         "$stack",  "$stack3", "$retval",
        "$comm",       "$COMM",     "$arg1", "$arg6",       "$arg9",   "+8(%di)", "-4(%si)",
        "+0(+8(%di))", "+u0(%dx)",  "@sym",  "@sym+8",      "@0x1000", "@+0x20",  "\\123",
        "\\-1",        "\\\"str\"", "$arg*", "+0($stack1)", "%r15",
    };
    static const char *const types[] = {
        "",        "",          ":u8",      ":s16",    ":u32",       ":x64",
        ":s64",    ":string",   ":ustring", ":symbol", ":symstr",    ":char",
        ":b3@2/8", ":b4@28/32", ":u8[4]",   ":x16[2]", ":string[2]", ":u64[64]",
    };
    static const char *const filters[] = {
        "&a == 1",
        "&a > 0 && b < 2",
        "&arg1 ~ \"x*\"",
        "&!(a & 4)",
        "&common_pid != 0",
        "&COMM == \"fuzz\"",
        "&(a == 1 || b == 2) && c",
        "&s ~ \"!a?[bc]*\"",
        "&CPU < 4",
        "&__probe_ip == 0x401000",
        "&a == 'x",
        "&(((a == 1)",
    };
    auto pick = [&rng](const auto &arr) { return std::string(arr[rng.next() % std::size(arr)]); };
    std::string s;
    if (rng.next() % 4 == 0) s += static_cast<char>(rng.next() % 8);
    for (uint64_t lines = 1 + rng.next() % 3; lines; --lines) {
        s += pick(heads) + " " + pick(places);
        for (uint64_t n = rng.next() % 5; n; --n) {
            if (rng.next() % 2)
                s += " " + std::string(1, static_cast<char>('a' + n)) + "=";
            else
                s += " ";
            s += pick(fetches) + pick(types);
        }
        s += "\n";
        if (rng.next() % 2) s += pick(filters) + "\n";
    }
    for (uint64_t n = rng.next() % 3; n && !s.empty(); --n) {
        const size_t at = rng.next() % s.size();
        switch (rng.next() % 3) {
        case 0:
            s[at] = static_cast<char>(rng.next());
            break;
        case 1:
            s.erase(at, 1 + rng.next() % 4);
            break;
        default:
            s.insert(at, s.substr(rng.next() % s.size(), rng.next() % 8));
            break;
        }
    }
    out.assign(s.begin(), s.end());
}
#endif
