// The XRay half of bench/peers, built by bench/peers/run with clang (-fxray-instrument
// -fxray-instruction-threshold=1) together with workload.c in the `xray` flavour. Same
// sampling as the in-process dprobe modes (peers.h): untraced run, traced run, untraced run;
// the sleds are unpatched between samples. Modes:
//   xray_sled  sleds patched, a handler that counts the leaf's entries (entry and exit
//              sleds both call it)                       matched with dprobe's fprobe row
//   xray_fdr   FDR mode logging every entry and exit into in-memory buffers (no file),
//              func_duration_threshold_us=0 so that short calls are kept; the records are
//              counted in the buffers afterwards         matched with dprobe's graph row
// Usage: peers_xray [--rounds N] [--scale F]. JSON lines on stdout.
#include <xray/xray_interface.h>
#include <xray/xray_log_interface.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

extern "C" unsigned long leaf_xray(unsigned long);
extern "C" unsigned long caller_xray(unsigned long);

#define NEVER [[clang::xray_never_instrument]]

namespace
{

int32_t leaf_id = -1;
uint64_t leaf_entries;

NEVER double now_ns()
{
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts); // as peers_main.cpp
    return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

NEVER double time_run(unsigned long calls)
{
    unsigned long (*volatile call)(unsigned long) = caller_xray;
    const double t0 = now_ns();
    unsigned long x = call(calls);
    const double t = now_ns() - t0;
    unsigned long want = 0;
    for (unsigned long i = 0; i < calls; ++i)
        want = want * 5 + 1;
    if (x != want) {
        std::fprintf(stderr, "peers_xray: wrong result\n");
        std::abort();
    }
    return t / static_cast<double>(calls);
}

NEVER void count_handler(int32_t id, XRayEntryType type)
{
    if (id == leaf_id && type == XRayEntryType::ENTRY) leaf_entries = leaf_entries + 1;
}

// FDR buffers: 16-byte metadata records (first byte odd) and 8-byte function records whose
// first 32 bits are: bit 0 = 0, bits 1-3 = kind (0 enter, 1 exit, 2 tail exit, 3 enter with
// argument), bits 4-31 = function id.
uint64_t fdr_leaf_entries;
NEVER void count_fdr_buffer(const char *, XRayBuffer b)
{
    const auto *p = static_cast<const unsigned char *>(b.Data);
    size_t i = 0;
    while (i + 8 <= b.Size) {
        if (p[i] & 1) {
            i += 16;
            continue;
        }
        uint32_t w;
        std::memcpy(&w, p + i, 4);
        const unsigned kind = (w >> 1) & 7;
        const int32_t id = static_cast<int32_t>(w >> 4);
        if (id == leaf_id && (kind == 0 || kind == 3)) ++fdr_leaf_entries;
        i += 8;
    }
}

struct mode {
    const char *key, *name, *match;
    unsigned long calls;
    std::vector<double> overhead, untraced;
    uint64_t expected = 0, seen = 0;
    std::string skipped;
};

NEVER void print(const mode &m)
{
    std::printf("{\"kind\":\"mode\",\"tool\":\"LLVM XRay\",\"key\":\"%s\",\"mode\":\"%s\","
                "\"match\":\"%s\",\"calls\":%lu",
                m.key, m.name, m.match, m.calls);
    if (!m.skipped.empty()) {
        std::printf(",\"skipped\":\"%s\"}\n", m.skipped.c_str());
        return;
    }
    auto arr = [](const std::vector<double> &v) {
        std::string s = "[";
        for (size_t i = 0; i < v.size(); ++i) {
            char b[32];
            std::snprintf(b, sizeof b, "%s%.3f", i ? "," : "", v[i]);
            s += b;
        }
        return s + "]";
    };
    std::printf(",\"overhead_ns\":%s,\"untraced_ns\":%s,\"expected_hits\":%lu,\"hits\":%lu}\n",
                arr(m.overhead).c_str(), arr(m.untraced).c_str(),
                static_cast<unsigned long>(m.expected), static_cast<unsigned long>(m.seen));
}

} // namespace

NEVER int main(int argc, char **argv)
{
    int rounds = 9;
    double scale = 1.0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!std::strcmp(argv[i], "--rounds"))
            rounds = std::max(1, std::atoi(argv[i + 1]));
        else if (!std::strcmp(argv[i], "--scale"))
            scale = std::max(0.001, std::atof(argv[i + 1]));
    }
    for (size_t id = 1; id <= __xray_max_function_id(); ++id)
        if (__xray_function_address(static_cast<int32_t>(id)) ==
            reinterpret_cast<uintptr_t>(&leaf_xray))
            leaf_id = static_cast<int32_t>(id);
    mode sled, fdr;
    sled.key = "xray_sled";
    sled.name = "patched sleds, empty handler (counts entries)";
    sled.match = "fprobe";
    sled.calls = static_cast<unsigned long>(std::max(1000.0, 2e6 * scale));
    fdr.key = "xray_fdr";
    fdr.name = "FDR mode, every entry and exit to memory";
    fdr.match = "graph";
    fdr.calls = static_cast<unsigned long>(std::max(1000.0, 1e6 * scale));
    if (leaf_id < 0) sled.skipped = fdr.skipped = "the leaf has no XRay sleds";
    if (fdr.skipped.empty() &&
        __xray_log_select_mode("xray-fdr") != XRayLogRegisterStatus::XRAY_REGISTRATION_OK)
        fdr.skipped = "the FDR mode is not linked in";
    time_run(100000);
    for (int r = 0; r < rounds; ++r) {
        if (sled.skipped.empty()) {
            const double before = time_run(sled.calls);
            __xray_set_handler(count_handler);
            __xray_patch();
            const uint64_t h0 = leaf_entries;
            const double t = time_run(sled.calls);
            sled.seen += leaf_entries - h0;
            __xray_unpatch();
            __xray_remove_handler();
            const double after = time_run(sled.calls);
            sled.overhead.push_back(t - (before + after) / 2);
            sled.untraced.push_back((before + after) / 2);
            sled.expected += sled.calls;
        }
        if (fdr.skipped.empty()) {
            const double before = time_run(fdr.calls);
            // Room for every record: 2 x 8 bytes per call, plus metadata.
            char opts[160];
            const unsigned long bufsz = 1ul << 20;
            std::snprintf(opts, sizeof opts,
                          "buffer_size=%lu:buffer_max=%lu:func_duration_threshold_us=0:"
                          "no_file_flush=true",
                          bufsz, fdr.calls * 16 * 5 / 4 / bufsz + 4);
            if (__xray_log_init_mode("xray-fdr", opts) != XRayLogInitStatus::XRAY_LOG_INITIALIZED) {
                fdr.skipped = "FDR initialization failed";
                continue;
            }
            __xray_patch();
            const double t = time_run(fdr.calls);
            __xray_unpatch();
            __xray_log_finalize();
            fdr_leaf_entries = 0;
            __xray_log_process_buffers(count_fdr_buffer);
            fdr.seen += fdr_leaf_entries;
            __xray_log_flushLog();
            const double after = time_run(fdr.calls);
            fdr.overhead.push_back(t - (before + after) / 2);
            fdr.untraced.push_back((before + after) / 2);
            fdr.expected += fdr.calls;
        }
    }
    print(sled);
    print(fdr);
    return 0;
}
