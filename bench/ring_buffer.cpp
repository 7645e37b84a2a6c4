// Ring buffer and trace clock costs, always next to a baseline measured in the same run.
//
//   bench_ring_buffer [--benchmark_repetitions=N ...]
//
// At the end a summary prints each write path's cost minus the baseline loop and the ratio.
#include "core/ring_buffer.h"
#include "core/trace_clock.h"

#include <benchmark/benchmark.h>
#include <sched.h>
#include <time.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <thread>

using namespace dprobe;

namespace
{

struct rec32 {
    uint64_t a, b, c, d;
};

void setup_buffers()
{
    trace_clock_init();
    ring_buffer_set_tracing_on(true);
    ring_buffer_set_overwrite(true);
    ring_buffer_set_size_kb(k_rb_default_size_kb);
    ring_buffer_reset();
}

// Baseline: the same loop filling a 32-byte record into memory the compiler must keep.
void BM_baseline_fill32(benchmark::State &state)
{
    alignas(64) static rec32 sink;
    uint64_t i = 0;
    for (auto _ : state) {
        rec32 r{i, i + 1, i + 2, i + 3};
        memcpy(&sink, &r, sizeof r);
        benchmark::ClobberMemory();
        i++;
    }
}
BENCHMARK(BM_baseline_fill32);

void BM_reserve_commit32(benchmark::State &state)
{
    setup_buffers();
    uint64_t i = 0;
    for (auto _ : state) {
        void *p = ring_buffer_reserve(sizeof(rec32));
        rec32 r{i, i + 1, i + 2, i + 3};
        memcpy(p, &r, sizeof r);
        ring_buffer_commit(p);
        i++;
    }
    rb_stats st = ring_buffer_stats();
    state.counters["overrun"] = static_cast<double>(st.overrun);
    ring_buffer_reset();
}
BENCHMARK(BM_reserve_commit32);

void BM_reserve_discard32(benchmark::State &state)
{
    setup_buffers();
    for (auto _ : state) {
        void *p = ring_buffer_reserve(sizeof(rec32));
        benchmark::DoNotOptimize(p);
        ring_buffer_discard(p);
    }
    ring_buffer_reset();
}
BENCHMARK(BM_reserve_discard32);

void BM_reserve_tracing_off(benchmark::State &state)
{
    setup_buffers();
    ring_buffer_set_tracing_on(false);
    for (auto _ : state)
        benchmark::DoNotOptimize(ring_buffer_reserve(sizeof(rec32)));
    ring_buffer_set_tracing_on(true);
}
BENCHMARK(BM_reserve_tracing_off);

void BM_trace_clock_local(benchmark::State &state)
{
    trace_clock_init();
    trace_clock_set("local");
    for (auto _ : state)
        benchmark::DoNotOptimize(trace_clock_now());
}
BENCHMARK(BM_trace_clock_local);

void BM_rdtsc(benchmark::State &state)
{
    for (auto _ : state)
        benchmark::DoNotOptimize(trace_clock_rdtsc());
}
BENCHMARK(BM_rdtsc);

void BM_clock_gettime_mono(benchmark::State &state)
{
    struct timespec ts;
    for (auto _ : state) {
        clock_gettime(CLOCK_MONOTONIC, &ts);
        benchmark::DoNotOptimize(ts);
    }
}
BENCHMARK(BM_clock_gettime_mono);

void BM_sched_getcpu(benchmark::State &state)
{
    for (auto _ : state)
        benchmark::DoNotOptimize(sched_getcpu());
}
BENCHMARK(BM_sched_getcpu);

// Reader side: draining records one thread wrote (records per second).
void BM_consume(benchmark::State &state)
{
    setup_buffers();
    const uint64_t n = 20000; // fits the default buffer: nothing overwritten
    uint64_t read = 0;
    for (auto _ : state) {
        state.PauseTiming();
        std::thread w([&] {
            for (uint64_t i = 0; i < n; i++) {
                void *p = ring_buffer_reserve(sizeof(rec32));
                rec32 r{i, i, i, i};
                memcpy(p, &r, sizeof r);
                ring_buffer_commit(p);
            }
        });
        w.join();
        state.ResumeTiming();
        ring_buffer_reader rd(ring_buffer_reader::CONSUME);
        rb_record r;
        while (rd.next(r))
            read++;
    }
    state.SetItemsProcessed(static_cast<int64_t>(read));
    ring_buffer_reset();
}
BENCHMARK(BM_consume)->Unit(benchmark::kMicrosecond);

// Two writer threads and a consuming reader: how many events per second go through, and how
// many the reader kept up with (the rest were overwritten and counted).
void BM_two_writers_one_consumer(benchmark::State &state)
{
    const uint64_t per_writer = static_cast<uint64_t>(state.range(0));
    uint64_t total_read = 0, total_lost = 0, total_written = 0;
    for (auto _ : state) {
        setup_buffers();
        std::atomic<int> done{0};
        uint64_t read = 0, lost = 0;
        std::thread consumer([&] {
            for (;;) {
                bool last = done.load() == 2;
                {
                    ring_buffer_reader rd(ring_buffer_reader::CONSUME);
                    rb_record r;
                    while (rd.next(r)) {
                        read++;
                        lost += r.lost_before;
                    }
                }
                if (last) break;
                ring_buffer_wait(1);
            }
        });
        auto writer = [&] {
            for (uint64_t i = 0; i < per_writer; i++) {
                void *p = ring_buffer_reserve(sizeof(rec32));
                if (p) {
                    rec32 r{i, i, i, i};
                    memcpy(p, &r, sizeof r);
                    ring_buffer_commit(p);
                }
            }
            done.fetch_add(1);
        };
        std::thread w1(writer), w2(writer);
        w1.join();
        w2.join();
        consumer.join();
        rb_stats st = ring_buffer_stats();
        total_written += st.written;
        total_read += read;
        total_lost += lost;
    }
    state.SetItemsProcessed(static_cast<int64_t>(total_written));
    state.counters["read_fraction"] =
        total_written ? static_cast<double>(total_read) / static_cast<double>(total_written) : 0;
    state.counters["lost"] = static_cast<double>(total_lost);
    state.counters["exact"] = (total_read + total_lost == total_written) ? 1 : 0;
    ring_buffer_reset();
}
BENCHMARK(BM_two_writers_one_consumer)->Arg(1000000)->Unit(benchmark::kMillisecond)->UseRealTime();

// Console output plus a summary relative to the baseline loop.
class summary_reporter : public benchmark::ConsoleReporter
{
  public:
    void ReportRuns(const std::vector<Run> &runs) override
    {
        for (const Run &r : runs)
            if (r.run_type == Run::RT_Iteration || r.aggregate_name == "mean")
                ns_[r.run_name.function_name] = r.GetAdjustedCPUTime();
        ConsoleReporter::ReportRuns(runs);
    }
    void Finalize() override
    {
        ConsoleReporter::Finalize();
        auto base = ns_.find("BM_baseline_fill32");
        if (base == ns_.end()) return;
        printf("\nrelative to BM_baseline_fill32 (%.2f ns/op):\n", base->second);
        for (const char *n :
             {"BM_reserve_commit32", "BM_reserve_discard32", "BM_reserve_tracing_off",
              "BM_trace_clock_local", "BM_rdtsc", "BM_clock_gettime_mono", "BM_sched_getcpu"}) {
            auto it = ns_.find(n);
            if (it != ns_.end())
                printf("  %-24s %7.2f ns/op  +%6.2f ns  x%.1f\n", n, it->second,
                       it->second - base->second, it->second / base->second);
        }
    }

  private:
    std::map<std::string, double> ns_;
};

} // namespace

int main(int argc, char **argv)
{
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    summary_reporter rep;
    benchmark::RunSpecifiedBenchmarks(&rep);
    benchmark::Shutdown();
    return 0;
}
