// The options and set-up that `dprobe record` and `dprobe attach` share.
#include "tools/dprobe/record/trace_opts.h"
#include "tools/dprobe/record/graph_args_spec.h"
#include "tools/dprobe/resolve/elf_image.h"
#include "tools/trace_file.h"

#include <cerrno>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <unistd.h>

namespace dprobe::cli
{

void add_trace_options(CLI::App *sub, trace_opts &o, const std::string &tracer_names)
{
    CLI::Option *filter =
        sub->add_option("-F,--filter", o.graph_globs,
                        "Record the function graph of functions matching GLOB (implies --graph)")
            ->type_name("GLOB");
    sub->add_option("-N,--notrace", o.notrace, "Leave functions matching GLOB out of the graph")
        ->type_name("GLOB");
    sub->add_flag("-g,--graph", o.graph,
                  "Record the function graph of the program's functions (the default "
                  "without -e or -F)");
    // Like the kernel's :mod: filter commands: a glob selects the functions loaded when it
    // is applied, unless asked to apply to libraries loaded later too (it hooks the loader).
    sub->add_flag("--follow-loads", o.follow_loads,
                  "Apply -F and -N to libraries the program loads later (dlopen) too, and "
                  "again when one is loaded again after dlclose")
        ->needs(filter);
    sub->add_option(tracer_names, o.tracer,
                    "What -F/-N/--graph record: function_graph (calls and returns, with "
                    "durations) or function (calls only, with their caller: cheaper)")
        ->capture_default_str()
        ->check(CLI::IsMember({"function_graph", "function"}))
        ->type_name("TRACER");
    sub->add_option("-D,--graph-depth", o.graph_depth,
                    "Record calls nested at most N deep in the graph (the kernel's "
                    "max_graph_depth; 1: only the outermost traced calls)")
        ->check(CLI::Range(1u, 0x7fffu))
        ->type_name("N");
    // uftrace record's -a, -A and -R: values in the graph (`parse(0x7ff..., 12) = 3`).
    sub->add_flag("-a,--auto-args", o.auto_args,
                  "Record every traced function's arguments and return value, where its debug "
                  "information (DWARF) describes them");
    sub->add_option("-A,--argument", o.arg_specs,
                    "Record the arguments of the functions GLOB matches: uftrace's "
                    "'GLOB@arg1,arg2/s' (formats /d /u /x /s /c /p, sizes /i32), parameter "
                    "names 'GLOB@name,p->len', or fetch args 'GLOB@n=$arg2:s32'")
        ->type_name("GLOB@ARGS");
    sub->add_option("-R,--retval", o.retval_specs,
                    "Record the return value of the functions GLOB matches: 'GLOB@retval' "
                    "(typed by DWARF), 'GLOB@retval/x', or a fetch arg on $retval")
        ->type_name("GLOB@retval");
    sub->add_option("--trigger", o.triggers,
                    "An event trigger, written to events/GROUP/EVENT/trigger once the events "
                    "exist: traceon, traceoff, snapshot, stacktrace, enable_event:SYS:EVENT, "
                    "disable_event:SYS:EVENT, with [:N] and [if FILTER] "
                    "('fprobes:parse_entry:stacktrace:5 if len > 100'); hist:keys=..., whose "
                    "histogram is printed when the session ends "
                    "('fprobes:parse_entry:hist:keys=len.log2')")
        ->type_name("GROUP:EVENT:TRIGGER")
        ->check(CLI::Validator(
            [](std::string &s) -> std::string {
                size_t a = s.find(':');
                size_t b = a == std::string::npos ? a : s.find(':', a + 1);
                if (a == 0 || b == std::string::npos || b == a + 1 || b + 1 == s.size())
                    return "'" + s + "' is not GROUP:EVENT:TRIGGER";
                return "";
            },
            "GROUP:EVENT:TRIGGER"));
    sub->add_option("-o,--output", o.output, "Trace file to write")
        ->capture_default_str()
        ->type_name("FILE");
    sub->add_option("-b,--buffer-size", o.buffer_kb, "Per-thread ring buffer size in KB")
        ->type_name("KB");
    sub->add_option("--clock", o.clock, "Trace clock (local, mono, mono_raw, boot, counter, ...)")
        ->type_name("CLOCK");
}

bool graph_filter(const trace_opts &o, bool have_events, std::vector<std::string> &globs,
                  std::vector<std::string> &notrace)
{
    globs = o.graph_globs;
    notrace = o.notrace;
    if (!globs.empty() || (!o.graph && have_events)) return false;
    for (const char *crt : {"_start", "_init", "_fini", "__libc_csu_*", "*_tm_clones",
                            "__do_global_dtors_aux", "frame_dummy", "__x86.get_pc_thunk*"})
        notrace.push_back(crt);
    return true;
}

std::string trace_opts_conflict(const trace_opts &o)
{
    if (o.graph_depth && o.tracer == "function")
        return "--graph-depth needs the function_graph tracer (-p function records no returns)";
    const bool args = o.auto_args || !o.arg_specs.empty() || !o.retval_specs.empty();
    if (args && o.tracer == "function")
        return "-a, -A and -R need the function_graph tracer (-p function records calls only)";
    if (args && o.follow_loads)
        return "-a, -A and -R do not apply to libraries loaded later: leave out --follow-loads";
    return "";
}

bool graph_args_lines(const trace_opts &o, std::vector<std::string> &args,
                      std::vector<std::string> &retvals, std::string *err)
{
    for (const std::string &s : o.arg_specs) {
        std::string line;
        if (!graph_args_line(s, false, line, err)) return false;
        args.push_back(line);
    }
    for (const std::string &s : o.retval_specs) {
        std::string line;
        if (!graph_args_line(s, true, line, err)) return false;
        retvals.push_back(line);
    }
    return true;
}

int create_trace_file(const std::string &path, int extra_flags, std::string &err)
{
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | extra_flags, 0644);
    if (fd < 0) {
        err = "cannot write '" + path + "': " + std::strerror(errno);
        return -1;
    }
    struct timespec rt {
    };
    clock_gettime(CLOCK_REALTIME, &rt);
    std::string hdr = tracefile::file_header(rt.tv_sec * 1000000000ull + rt.tv_nsec);
    if (!tracefile::write_all(fd, hdr.data(), hdr.size())) {
        err = "cannot write '" + path + "': " + std::strerror(errno);
        ::close(fd);
        return -1;
    }
    return fd;
}

} // namespace dprobe::cli
