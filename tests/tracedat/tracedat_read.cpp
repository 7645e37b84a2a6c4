// Reads a trace.dat with libtracecmd's public API (the library trace-cmd and KernelShark use)
// and prints every record: "TS PID CPU SYSTEM:EVENT field=value ...", the numeric fields of
// its format in order. tests/tracedat/trace_dat_test.py compares that with dprobe's own
// report of the same recording.
extern "C" {
#include <trace-cmd/trace-cmd.h>
}

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace
{

int print_record(struct tracecmd_input *h, struct tep_record *r, int cpu, void *)
{
    struct tep_handle *tep = tracecmd_get_tep(h);
    struct tep_event *ev = tep_find_event_by_record(tep, r);
    if (!ev) {
        std::printf("%llu ? %d unknown\n", r->ts, cpu);
        return 0;
    }
    std::printf("%llu %d %d %s:%s", r->ts, tep_data_pid(tep, r), cpu, ev->system, ev->name);
    struct tep_format_field **fields = tep_event_fields(ev);
    for (int i = 0; fields && fields[i]; i++) {
        struct tep_format_field *f = fields[i];
        unsigned long long v;
        if (f->flags & (TEP_FIELD_IS_ARRAY | TEP_FIELD_IS_DYNAMIC | TEP_FIELD_IS_STRING)) continue;
        if (tep_read_number_field(f, r->data, &v) == 0) std::printf(" %s=%llu", f->name, v);
    }
    free(fields);
    std::printf("\n");
    return 0;
}

} // namespace

int main(int argc, char **argv)
{
    if (argc != 2) {
        std::fprintf(stderr, "usage: tracedat_read FILE\n");
        return 2;
    }
    struct tracecmd_input *h = tracecmd_open(argv[1], TRACECMD_FL_LOAD_NO_PLUGINS);
    if (!h) {
        std::fprintf(stderr, "tracecmd_open(%s) failed\n", argv[1]);
        return 1;
    }
    int r = tracecmd_iterate_events(h, nullptr, 0, print_record, nullptr);
    tracecmd_close(h);
    return r < 0 ? 1 : 0;
}
