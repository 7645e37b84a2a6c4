// hist triggers below the trigger file: tracing_map (exact counts from several threads, the
// bound and its drops, sorting) and hist_trigger_data on records laid out like a probe
// event's (the common header, then fields), its hist text compared with what the kernel's
// trace_events_hist.c prints for the same keys, values and modifiers, and its parse errors
// with the kernel's names and caret columns (trigger-hist-syntax-errors.tc's cases among
// them). The trigger file, real probes and named/paused triggers: hist_trigger_test.cpp.
#include "tracefs/trace_events_hist.h"

#include "core/symbols.h"
#include "tracefs/probe_types.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <sys/prctl.h>
#include <thread>
#include <vector>

using namespace dprobe;

extern "C" __attribute__((noipa, used)) int hist_map_target(int x)
{
    asm volatile("" ::: "memory");
    return x + 1;
}

namespace
{

// A record: common header (type, flags, preempt count, pid), a u32 `a` at 8, an s64 `s` at
// 16, a u64 `ip` at 24, a __data_loc string `name` at 32 (its bytes from 36).
constexpr size_t REC = 36 + 64;
using ft = filter_field::type;
const std::vector<filter_field> fields = {
    {"a", ft::number, 8, 4, false},
    {"s", ft::number, 16, 8, true},
    {"ip", ft::number, 24, 8, false},
    {"name", ft::dyn_string, 32, 4, false},
    {"CPU", ft::cpu, 0, 4, true},
    {"cpu", ft::cpu, 0, 4, true},
    {"COMM", ft::comm, 0, 16, false},
    {"comm", ft::comm, 0, 16, false},
    {"common_type", ft::number, 0, 2, false},
    {"common_flags", ft::number, 2, 1, false},
    {"common_preempt_count", ft::number, 3, 1, false},
    {"common_pid", ft::number, 4, 4, true},
};

struct rec_t {
    uint8_t b[REC] = {};
    size_t len = 36;
};

rec_t rec(int32_t pid, uint32_t a, int64_t s = 0, uint64_t ip = 0, const char *name = "")
{
    rec_t r;
    std::memcpy(r.b + 4, &pid, 4);
    std::memcpy(r.b + 8, &a, 4);
    std::memcpy(r.b + 16, &s, 8);
    std::memcpy(r.b + 24, &ip, 8);
    uint32_t len = static_cast<uint32_t>(std::strlen(name) + 1);
    uint32_t dl = make_data_loc(len, 36);
    std::memcpy(r.b + 32, &dl, 4);
    std::memcpy(r.b + 36, name, len);
    r.len = 36 + len;
    return r;
}

std::unique_ptr<hist_trigger_data> make(const std::string &param)
{
    std::unique_ptr<hist_trigger_data> hd;
    hist_error err;
    int r = hist_trigger_data::create(param, "hist:" + param, fields, hd, err);
    EXPECT_EQ(r, 0) << param << ": " << hist_err_name(err.err) << " at " << err.pos;
    return hd;
}

void hit(hist_trigger_data &hd, const rec_t &r, unsigned n = 1)
{
    hist_hit_ctx ctx;
    for (unsigned i = 0; i < n; i++)
        hd.hit(r.b, r.len, ctx);
}

hist_error fail(const std::string &param)
{
    std::unique_ptr<hist_trigger_data> hd;
    hist_error err;
    int r = hist_trigger_data::create(param, "hist:" + param, fields, hd, err);
    EXPECT_LT(r, 0) << param;
    EXPECT_EQ(-r, err.errnum);
    EXPECT_EQ(hd, nullptr);
    return err;
}

// "hist:keys=...:sort=^junk" -> the caret's column and the command without it.
std::pair<std::string, unsigned> caret(const std::string &s)
{
    size_t at = s.find('^');
    return {s.substr(0, at) + s.substr(at + 1), static_cast<unsigned>(at)};
}

} // namespace

TEST(TracingMap, ExactCountsFromSeveralThreads)
{
    std::unique_ptr<tracing_map> m;
    ASSERT_EQ(tracing_map::create(TRACING_MAP_BITS_DEFAULT, 8, 0, m), 0);
    ASSERT_EQ(m->add_sum_field(), 0);
    ASSERT_EQ(m->add_sum_field(), 1);
    ASSERT_EQ(m->add_key_field(0, tracing_map_cmp_num(8, false)), 2);
    ASSERT_EQ(m->init(), 0);
    constexpr unsigned threads = 4, per = 200000, keys = 97;
    std::vector<std::thread> ts;
    for (unsigned t = 0; t < threads; t++)
        ts.emplace_back([&, t] {
            for (unsigned i = 0; i < per; i++) {
                uint64_t k = (i + t) % keys;
                tracing_map_elt *e = m->insert(&k);
                ASSERT_NE(e, nullptr);
                tracing_map::update_sum(e, 0, 1);
                tracing_map::update_sum(e, 1, k);
            }
        });
    for (auto &t : ts)
        t.join();
    EXPECT_EQ(m->hits(), uint64_t{threads} * per);
    EXPECT_EQ(m->drops(), 0u);
    tracing_map_sort_key sk{0, false};
    auto entries = m->sort_entries({&sk, 1});
    ASSERT_EQ(entries.size(), keys); // one element per key, even when threads race on it
    uint64_t total = 0;
    for (const tracing_map_elt *e : entries) {
        uint64_t k;
        std::memcpy(&k, e->key, 8);
        uint64_t n = tracing_map::read_sum(e, 0);
        // Thread t hits key k at i = k - t (mod keys): per / keys times, or once more.
        uint64_t expect = 0;
        for (unsigned t = 0; t < threads; t++)
            expect += per / keys + ((k + keys - t) % keys < per % keys ? 1 : 0);
        EXPECT_EQ(n, expect) << "key " << k;
        EXPECT_EQ(tracing_map::read_sum(e, 1), n * k);
        total += n;
    }
    EXPECT_EQ(total, uint64_t{threads} * per);
    for (size_t i = 1; i < entries.size(); i++) // hitcount ascending
        EXPECT_LE(tracing_map::read_sum(entries[i - 1], 0), tracing_map::read_sum(entries[i], 0));
}

TEST(TracingMap, BoundedAndCountsDrops)
{
    std::unique_ptr<tracing_map> m;
    EXPECT_EQ(tracing_map::create(TRACING_MAP_BITS_MIN - 1, 8, 0, m), -EINVAL);
    EXPECT_EQ(tracing_map::create(TRACING_MAP_BITS_MAX + 1, 8, 0, m), -EINVAL);
    ASSERT_EQ(tracing_map::create(TRACING_MAP_BITS_MIN, 8, 0, m), 0);
    m->add_sum_field();
    m->add_key_field(0, tracing_map_cmp_num(8, false));
    ASSERT_EQ(m->init(), 0);
    unsigned got = 0;
    for (uint64_t k = 0; k < 300; k++)
        got += m->insert(&k) != nullptr;
    EXPECT_EQ(got, 128u);
    EXPECT_EQ(m->hits(), 128u);
    EXPECT_EQ(m->drops(), 172u);
    uint64_t k = 5; // an existing key is still found when the map is full
    EXPECT_NE(m->insert(&k), nullptr);
    EXPECT_NE(m->lookup(&k), nullptr);
    k = 299;
    EXPECT_EQ(m->lookup(&k), nullptr);
    m->clear();
    EXPECT_EQ(m->hits(), 0u);
    EXPECT_EQ(m->drops(), 0u);
    EXPECT_EQ(m->lookup(&(k = 5)), nullptr);
    EXPECT_NE(m->insert(&k), nullptr);
}

TEST(HistData, PidKeyAsTheKernelPrintsIt)
{
    auto hd = make("keys=common_pid:vals=hitcount");
    ASSERT_TRUE(hd);
    EXPECT_EQ(hd->print_spec(""), "hist:keys=common_pid:vals=hitcount:sort=hitcount:size=2048");
    hit(*hd, rec(10, 1), 3);
    hit(*hd, rec(20, 1));
    EXPECT_EQ(hd->show(), "{ common_pid:         20 } hitcount:          1\n"
                          "{ common_pid:         10 } hitcount:          3\n"
                          "\n"
                          "Totals:\n"
                          "    Hits: 4\n"
                          "    Entries: 2\n"
                          "    Dropped: 0\n");
}

TEST(HistData, CompoundLog2KeyValuesAndSort)
{
    auto hd = make("keys=a.log2,common_pid:vals=hitcount,s:sort=s.descending:size=100");
    ASSERT_TRUE(hd);
    // size= is rounded up to a power of two.
    EXPECT_EQ(hd->print_spec(""),
              "hist:keys=a.log2,common_pid:vals=hitcount,s:sort=s.descending:size=128");
    hit(*hd, rec(10, 5, 100));
    hit(*hd, rec(10, 6, 200)); // 5 and 6 both round up to 2^3
    hit(*hd, rec(10, 100, 1000));
    hit(*hd, rec(11, 1, 7));
    EXPECT_EQ(hd->show(),
              "{ a: ~ 2^7 , common_pid:         10 } hitcount:          1  s:       1000\n"
              "{ a: ~ 2^3 , common_pid:         10 } hitcount:          2  s:        300\n"
              "{ a: ~ 2^0 , common_pid:         11 } hitcount:          1  s:          7\n"
              "\n"
              "Totals:\n"
              "    Hits: 4\n"
              "    Entries: 3\n"
              "    Dropped: 0\n");
}

TEST(HistData, BucketsHexStringAndSecondarySort)
{
    auto hd = make("keys=a.buckets=10:sort=a");
    ASSERT_TRUE(hd);
    // The sort key is printed as its field is (the kernel's hist_field_print).
    EXPECT_EQ(hd->print_spec(""),
              "hist:keys=a.buckets=10:vals=hitcount:sort=a.buckets=10:size=2048");
    hit(*hd, rec(1, 17));
    hit(*hd, rec(1, 12));
    hit(*hd, rec(1, 3));
    const std::string two = "{ a: ~ 0-9 } hitcount:          1\n"
                            "{ a: ~ 10-19 } hitcount:          2\n";
    EXPECT_EQ(hd->show().substr(0, two.size()), two);

    auto hx = make("keys=a.hex:vals=s.hex");
    ASSERT_TRUE(hx);
    hit(*hx, rec(1, 255, 4096));
    EXPECT_EQ(hx->show().substr(0, hx->show().find('\n') + 1),
              "{ a: ff } hitcount:          1  s:       1000\n");

    auto hs = make("keys=name,a:sort=name,a.descending");
    ASSERT_TRUE(hs);
    EXPECT_EQ(hs->print_spec(""),
              "hist:keys=name,a:vals=hitcount:sort=name,a.descending:size=2048");
    hit(*hs, rec(1, 1, 0, 0, "foo"));
    hit(*hs, rec(1, 2, 0, 0, "foo"));
    hit(*hs, rec(1, 2, 0, 0, "bar"));
    std::string pad(47, ' '); // %-50s of a 3-character string
    EXPECT_EQ(hs->show(), "{ name: bar" + pad + ", a:          2 } hitcount:          1\n" +
                              "{ name: foo" + pad + ", a:          2 } hitcount:          1\n" +
                              "{ name: foo" + pad + ", a:          1 } hitcount:          1\n" +
                              "\nTotals:\n    Hits: 3\n    Entries: 3\n    Dropped: 0\n");
}

TEST(HistData, SymExecnameSyscallPercentGraph)
{
    kallsyms::instance(); // the symbol tables .sym reads
    const auto addr = reinterpret_cast<uint64_t>(&hist_map_target);
    auto hd = make("keys=ip.sym");
    ASSERT_TRUE(hd);
    hit(*hd, rec(1, 0, 0, addr));
    char hexaddr[32];
    std::snprintf(hexaddr, sizeof(hexaddr), "%llx", static_cast<unsigned long long>(addr));
    std::string name = "hist_map_target";
    EXPECT_EQ(hd->show().substr(0, hd->show().find('\n') + 1),
              "{ ip: [" + std::string(hexaddr) + "] " + name + std::string(45 - name.size(), ' ') +
                  " } hitcount:          1\n");

    auto ho = make("keys=ip.sym-offset");
    ASSERT_TRUE(ho);
    EXPECT_EQ(ho->print_spec(""), "hist:keys=ip.sym-offset:vals=hitcount:sort=hitcount:size=2048");
    hit(*ho, rec(1, 0, 0, addr + 1));
    EXPECT_NE(ho->show().find("] hist_map_target+0x1/0x"), std::string::npos) << ho->show();

    // .execname: the comm of the thread that made the entry, then the pid.
    auto he = make("keys=common_pid.execname");
    ASSERT_TRUE(he);
    EXPECT_EQ(he->print_spec(""),
              "hist:keys=common_pid.execname:vals=hitcount:sort=hitcount:size=2048");
    std::thread([&] {
        prctl(PR_SET_NAME, "hist-worker", 0, 0, 0);
        hit(*he, rec(4242, 0), 2);
    }).join();
    EXPECT_EQ(he->show().substr(0, he->show().find('\n') + 1),
              "{ common_pid: hist-worker     [      4242] } hitcount:          2\n");

    auto hc = make("keys=a.syscall");
    ASSERT_TRUE(hc);
    hit(*hc, rec(1, 0));   // read
    hit(*hc, rec(1, 999)); // none
    std::string sys = hc->show();
    EXPECT_NE(sys.find("{ a: sys_read                      [  0] } hitcount:          1\n"),
              std::string::npos)
        << sys;
    EXPECT_NE(sys.find("{ a: unknown_syscall               [999] } hitcount:          1\n"),
              std::string::npos)
        << sys;

    auto hp = make("keys=a:vals=hitcount,s.percent,s.graph:sort=a");
    ASSERT_TRUE(hp);
    EXPECT_EQ(hp->print_spec(""), "hist:keys=a:vals=hitcount,s.percent,s.graph:sort=a:size=2048");
    hit(*hp, rec(1, 1, 30));
    hit(*hp, rec(1, 2, 10));
    EXPECT_EQ(hp->show(),
              "{ a:          1 } hitcount:          1  s (%):  75.00  s: ####################\n"
              "{ a:          2 } hitcount:          1  s (%):  25.00  s: ######              \n"
              "\nTotals:\n    Hits: 2\n    Entries: 2\n    Dropped: 0\n");
}

TEST(HistData, TimestampAndCpuKeys)
{
    auto hd = make("keys=common_cpu:vals=hitcount,common_timestamp.usecs");
    ASSERT_TRUE(hd);
    EXPECT_EQ(hd->print_spec(""), "hist:keys=common_cpu:vals=hitcount,common_timestamp.usecs:"
                                  "sort=hitcount:size=2048:clock=global");
    hist_hit_ctx ctx;
    ctx.cpu = 3;
    ctx.ts = 5000;
    rec_t r = rec(1, 0);
    hd->hit(r.b, r.len, ctx);
    EXPECT_EQ(hd->show().substr(0, hd->show().find('\n') + 1),
              "{ common_cpu:          3 } hitcount:          1  common_timestamp:          5\n");
}

TEST(HistData, DropsWhenFull)
{
    auto hd = make("keys=a:size=128");
    ASSERT_TRUE(hd);
    for (uint32_t a = 0; a < 200; a++)
        hit(*hd, rec(1, a));
    std::string s = hd->show();
    EXPECT_NE(s.find("\nTotals:\n    Hits: 128\n    Entries: 128\n    Dropped: 72\n"),
              std::string::npos)
        << s.substr(s.find("Totals"));
}

TEST(HistData, ErrorsWithTheKernelsNamesAndCarets)
{
    struct {
        const char *cmd; // the caret before the column the kernel points at
        hist_err err;
    } cases[] = {
        // trigger-hist-syntax-errors.tc, on this event's fields.
        {"hist:keys=common_pid:vals=a:sort=common_pid,^junk", hist_err::INVALID_SORT_FIELD},
        {"hist:keys=common_pid:vals=a:^sort=", hist_err::EMPTY_ASSIGNMENT},
        {"hist:keys=common_pid:vals=a:^sort=common_pid,", hist_err::EMPTY_SORT_FIELD},
        {"hist:keys=common_pid:vals=a:sort=common_pid.^junk", hist_err::INVALID_SORT_MODIFIER},
        {"hist:keys=common_pid:vals=a,s:^sort=common_pid,a,s", hist_err::TOO_MANY_SORT_FIELDS},
        {"hist:keys=^nofield", hist_err::FIELD_NOT_FOUND},
        {"hist:keys=a:vals=^nofield", hist_err::FIELD_NOT_FOUND},
        {"hist:keys=a.^foo", hist_err::BAD_FIELD_MODIFIER},
        {"hist:keys=a.^percent", hist_err::BAD_FIELD_MODIFIER},
        {"hist:keys=a.^execname", hist_err::BAD_FIELD_MODIFIER},
        {"hist:keys=a.^buckets=0", hist_err::BAD_FIELD_MODIFIER},
        {"hist:keys=common_pid:vals=^a.log2", hist_err::BAD_FIELD_MODIFIER},
        {"hist:keys=common_pid:vals=^s.sym", hist_err::BAD_FIELD_MODIFIER},
        // An unknown $var: the kernel logs "Couldn't find variable" under its name, then
        // tries it as a field (checked below).
        {"hist:keys=common_pid:vals=^$lat", hist_err::FIELD_NOT_FOUND},
    };
    for (const auto &c : cases) {
        auto [cmd, pos] = caret(c.cmd);
        hist_error e = fail(cmd.substr(5));
        EXPECT_EQ(e.errnum, EINVAL) << cmd;
        EXPECT_EQ(hist_err_name(e.err), std::string(hist_err_name(c.err))) << cmd;
        EXPECT_EQ(e.pos, pos) << cmd;
    }
    hist_error v = fail("keys=common_pid:vals=$lat");
    ASSERT_EQ(v.before.size(), 1u);
    EXPECT_EQ(v.before[0].first, hist_err::VAR_NOT_FOUND);
    EXPECT_EQ(v.before[0].second, 27u);
    EXPECT_STREQ(hist_err_text(hist_err::FIELD_NOT_FOUND), "Couldn't find field");
    EXPECT_STREQ(hist_err_text(hist_err::BAD_FIELD_MODIFIER), "Invalid field modifier");
    // What the kernel refuses without an error_log entry: no keys, too many keys or values,
    // a size out of range, a compound key over HIST_KEY_SIZE_MAX, unknown words.
    for (const char *p : {"vals=a", "keys=a,s,ip,common_pid", "keys=a:vals=s,ip,common_pid",
                          "keys=a:size=64", "keys=a:size=200000", "keys=a:size=x",
                          "keys=name,common_stacktrace,ip", "keys=a:bogus", "keys=a:"}) {
        hist_error e = fail(p);
        EXPECT_EQ(e.errnum, EINVAL) << p;
        EXPECT_FALSE(e.logged()) << p << ": " << hist_err_name(e.err);
    }
}
