#!/bin/bash
# End-to-end test of ftrace's own tracers and files through the FUSE mount, with the shell's
# echo and cat as Documentation/trace/ftrace.rst uses them.
#   ftrace_e2e.sh PROG
# PROG (tests/e2e/ftrace_prog.c) serves its tracefs and calls parse_line() { parse_token()
# { parse_number() } x3 } every 2 ms on two threads. The script first runs the set-up every
# kernel ftrace selftest runs (initialize_ftrace in tools/testing/selftests/ftrace/test.d/
# functions: each step must be accepted), then the tracers, filters, commands, pid filter,
# instances, snapshot, markers, profiler, stack tracer and raw buffers, and checks that the
# program ran undisturbed. Skipped (77) with DPROBE_NO_FUSE=1.
set -u
prog=$1

if [ "${DPROBE_NO_FUSE:-}" = 1 ]; then
    echo "SKIP: DPROBE_NO_FUSE=1"
    exit 77
fi

work=$(mktemp -d /tmp/dprobe-ftrace-e2e.XXXXXX)
export XDG_RUNTIME_DIR=$work/run
mkdir -m 700 "$XDG_RUNTIME_DIR"
unset DPROBE_TRACEFS DPROBE_TRACEFS_SOCKET DPROBE_NO_FUSE

child=
checks=0
cleanup() {
    cd /
    if [ -n "$child" ] && kill -0 "$child" 2>/dev/null; then
        kill -TERM "$child" 2>/dev/null
        wait "$child" 2>/dev/null
    fi
    rm -rf "$work" 2>/dev/null
}
fail() {
    echo "FAIL: $*" >&2
    echo "--- program stderr:" >&2
    cat "$work/err" >&2 2>/dev/null
    cleanup
    exit 1
}
ok() {
    checks=$((checks + 1))
    echo "ok $checks - $*"
}
# A file's content for a moment (trace_pipe and trace_pipe_raw block until data comes).
pipe_for() { timeout "$1" cat "$2"; }

"$prog" >"$work/out" 2>"$work/err" &
child=$!
for _ in $(seq 100); do
    grep -q '^pid=' "$work/out" 2>/dev/null && break
    sleep 0.1
done
T=$(sed -n 's/^mount=//p' "$work/out")
[ -n "$T" ] && [ "$T" != NONE ] || fail "FUSE mount failed: $(cat "$work/out"); set DPROBE_NO_FUSE=1 to skip"
cd "$T" || fail "cd $T"
worker=
for t in /proc/$child/task/*; do
    [ "$(cat "$t/comm")" = e2e-worker ] && worker=${t##*/}
done
[ -n "$worker" ] || fail "no e2e-worker thread"

# ---- the kernel selftests' initialize_ftrace(), step by step -------------------------
echo 0 > tracing_on || fail "echo 0 > tracing_on"
echo nop > current_tracer || fail "echo nop > current_tracer"
grep -v ^none events/*/*/filter 2>/dev/null | while read -r line; do
    echo 0 > "${line%%:*}"
done
echo > set_ftrace_filter || fail "echo > set_ftrace_filter"
grep -v '^#' set_ftrace_filter | grep -q . && fail "set_ftrace_filter not empty"
echo 0 > events/enable || fail "echo 0 > events/enable"
[ -f set_event_pid ] && { echo > set_event_pid || fail "set_event_pid"; }
[ -f set_ftrace_pid ] && { echo > set_ftrace_pid || fail "set_ftrace_pid"; }
[ -f set_ftrace_notrace ] && { echo > set_ftrace_notrace || fail "set_ftrace_notrace"; }
[ -f set_graph_function ] && { echo | tee set_graph_* >/dev/null || fail "set_graph_*"; }
[ -f stack_trace_filter ] && { echo > stack_trace_filter || fail "stack_trace_filter"; }
[ -f kprobe_events ] && { echo > kprobe_events || fail "kprobe_events"; }
[ -f uprobe_events ] && { echo > uprobe_events || fail "uprobe_events"; }
[ -f snapshot ] && { echo 0 > snapshot || fail "snapshot"; }
echo > trace || fail "echo > trace"
echo 1 > tracing_on || fail "echo 1 > tracing_on"
for t in function function_graph; do
    grep -wq $t available_tracers || fail "tracer $t missing from available_tracers"
done
ok "the selftests' initialize_ftrace() steps and check_requires tracers"

# ---- function_graph with set_graph_function, as ftrace.rst shows it ------------------
echo function_graph > current_tracer || fail "echo function_graph > current_tracer"
echo 'parse_*' > set_graph_function || fail "set_graph_function"
# (libc's parse_* functions match too, shown as "name [libc.so.6]" like a kernel module's)
for f in parse_line parse_number parse_token; do
    grep -qx $f set_graph_function || fail "set_graph_function: $(cat set_graph_function)"
done
echo parse_line > set_graph_function
sleep 0.2
cat trace > "$work/graph"
head -4 "$work/graph" | grep -qx '# tracer: function_graph' || fail "graph header: $(head -4 "$work/graph")"
grep -qx '# CPU  DURATION                  FUNCTION CALLS' "$work/graph" || fail "graph columns"
awk -F'|' '
/\|  parse_line\(\) \{$/ { line++ }
/\|    parse_token\(\) \{$/ { token++ }
/\|      parse_number\(\);$/ { number++ }
/^ [0-9]+\) .* us +\|    \}$/ { tokclose++ }
/^ [0-9]+\) .* us +\|  \}$/ { lineclose++ }
END { exit !(line >= 4 && token >= 3 * (line - 1) && number >= token - 1 && tokclose >= 3 && lineclose >= 2) }
' "$work/graph" || fail "graph shape: $(head -30 "$work/graph")"
ok "function_graph: parse_line() { parse_token() { parse_number(); } } with durations"
echo 1 > options/funcgraph-proc
cat trace | grep -q ' e2e-wor-'"$worker"' *|' || fail "funcgraph-proc column: $(cat trace | head -8)"
echo 0 > options/funcgraph-proc
echo 1 > options/funcgraph-tail
cat trace | grep -q '} /\* parse_token \*/$' || fail "funcgraph-tail"
echo 0 > options/funcgraph-tail
echo 2 > max_graph_depth
echo > trace
sleep 0.1
cat trace | grep -q 'parse_number' && fail "max_graph_depth 2 still shows depth 2"
cat trace | grep -q '|    parse_token();$' || fail "max_graph_depth 2: $(cat trace | head)"
echo 0 > max_graph_depth
ok "funcgraph-proc, funcgraph-tail, max_graph_depth"
echo > set_graph_function

# ---- the function tracer, filters, a command, set_ftrace_pid --------------------------
echo nop > current_tracer
echo parse_token > set_ftrace_filter
echo function > current_tracer || fail "echo function > current_tracer"
pipe_for 1.5 trace_pipe > "$work/fn"
grep -qE '^ +[^ ]+-[0-9]+ +\[[0-9]{3}\] \.\.\.\.\. +[0-9]+\.[0-9]{6}: parse_token <-parse_line$' "$work/fn" ||
    fail "function lines: $(head -3 "$work/fn") (tracing_on $(cat tracing_on), tracer $(cat current_tracer), filter $(cat set_ftrace_filter), enabled: $(cat enabled_functions))"
grep -v ': parse_token <-parse_line$' "$work/fn" | grep -q . && fail "other functions traced: $(grep -v parse_token "$work/fn" | head -3)"
ok "function tracer with set_ftrace_filter, read from trace_pipe"
echo "$worker" > set_ftrace_pid
echo > trace
sleep 0.1
[ "$(cat set_ftrace_pid)" = "$worker" ] || fail "set_ftrace_pid: $(cat set_ftrace_pid)"
cat trace | grep -v '^#' | grep -v -- "-$worker " | grep -q . && fail "set_ftrace_pid: other threads traced"
cat trace | grep -q -- "e2e-worker-$worker " || fail "set_ftrace_pid: the worker is not traced"
echo > set_ftrace_pid
[ "$(cat set_ftrace_pid)" = "no pid" ] || fail "set_ftrace_pid cleared"
ok "set_ftrace_pid keeps one thread"
echo 'parse_number:traceoff:1' >> set_ftrace_filter || fail "traceoff command"
sleep 0.1
[ "$(cat tracing_on)" = 0 ] || fail "parse_number:traceoff did not stop tracing"
grep -qx 'parse_number:traceoff:count=0' set_ftrace_filter || fail "command read-back: $(cat set_ftrace_filter)"
# A counted command is removed with a count, as in the kernel (its own probe_ops): without
# one there is no such (uncounted) command, ENODEV.
{ echo '!parse_number:traceoff' >> set_ftrace_filter; } 2>/dev/null && fail "removed the counted command without a count"
echo '!parse_number:traceoff:0' >> set_ftrace_filter
grep -q traceoff set_ftrace_filter && fail "command not removed"
echo 1 > tracing_on
ok "a traceoff command stops tracing once, reads back, is removed with !"
{ echo nosuch > current_tracer; } 2>/dev/null && fail "unknown tracer accepted"
{ echo 'nosuch*' >> set_ftrace_filter; } 2>"$work/e" && fail "filter matching nothing accepted"
grep -q 'Invalid argument' "$work/e" || fail "filter error: $(cat "$work/e")"
ok "bad writes answered with EINVAL"

# ---- instances, snapshot, markers ---------------------------------------------------
mkdir instances/foo || fail "mkdir instances/foo"
[ -f instances/foo/current_tracer ] || fail "instance files"
echo parse_number > instances/foo/set_ftrace_filter
echo function > instances/foo/current_tracer || fail "instance tracer"
sleep 0.1
cat instances/foo/trace | grep -q ': parse_number <-parse_token$' || fail "instance trace"
cat trace | grep -q parse_number && fail "the instance's functions in the top-level trace: $(grep parse_number trace | head -3) (top filter $(cat set_ftrace_filter), enabled $(cat enabled_functions), top tracer $(cat current_tracer))"
rmdir instances/foo || fail "rmdir instances/foo"
[ -e instances/foo ] && fail "instances/foo still there"
ok "mkdir instances/foo has its own tracer, filter and trace; rmdir removes it"
echo 1 > snapshot || fail "echo 1 > snapshot"
cat snapshot | grep -q ': parse_token <-parse_line$' || fail "snapshot content"
echo 0 > snapshot
grep -q 'Snapshot is freed' snapshot || fail "snapshot freed"
ok "snapshot"
echo "hello from the shell" > trace_marker || fail "trace_marker"
cat trace | grep -qE -- "-$$ +\[[0-9]{3}\] .*: tracing_mark_write: hello from the shell$" ||
    fail "marker line: $(grep tracing_mark trace)"
grep -qE "^$$ [^ ]+$" saved_cmdlines || fail "the writer not in saved_cmdlines: $(cat saved_cmdlines)"
ok "trace_marker lands as the writer's print event; the writer is in saved_cmdlines"
# A write longer than one record: the file takes what fits and returns the count; the
# shell's echo writes the rest, the next record(s) (the kernel's 00basic/trace_marker.tc;
# bash's echo writes 4096 bytes at a time, dash's all at once).
echo > trace
long=$(head -c 6000 /dev/zero | tr '\0' L)
echo -n "$long" > trace_marker || fail "long trace_marker write"
[ "$(grep -c 'tracing_mark_write: ' trace)" -ge 2 ] || fail "a 6000-byte marker in $(grep -c tracing_mark_write trace) record"
[ "$(sed -n 's/^.*tracing_mark_write: //p' trace | tr -d '\n')" = "$long" ] || fail "the pieces do not make the text"
ok "a trace_marker write longer than a record becomes two records that make the whole text"
[ "$(cat per_cpu/cpu0/buffer_size_kb)" = "$(cat buffer_size_kb)" ] || fail "per_cpu/cpu0/buffer_size_kb"

# ---- profiler, stack tracer, raw buffers --------------------------------------------
echo nop > current_tracer
echo > set_ftrace_filter
echo 'parse_*' > set_ftrace_filter
echo 1 > function_profile_enabled || fail "function_profile_enabled"
sleep 0.3
echo 0 > function_profile_enabled
# One file per CPU, as the kernel's: the calls that entered on that CPU.
head -2 trace_stat/function0 | grep -q '  Function                               Hit    Time            Avg             s^2' ||
    fail "trace_stat header: $(head -2 trace_stat/function0)"
[ "$(ls trace_stat | wc -l)" = "$(getconf _NPROCESSORS_CONF)" ] || fail "trace_stat/: $(ls trace_stat)"
awk '$1 == "parse_number" { n += $2 } $1 == "parse_line" { l += $2 } END { exit !(n >= 60 && l >= 20) }' trace_stat/function* ||
    fail "trace_stat/function*: $(cat trace_stat/function*)"
ok "function_profile_enabled and trace_stat/function<cpu>"
echo 1 > stack_tracer_enabled || fail "stack_tracer_enabled"
sleep 0.1
echo 0 > stack_tracer_enabled
[ "$(cat stack_max_size)" -gt 0 ] || fail "stack_max_size"
grep -qE '^  0\) +[0-9]+ +[0-9]+   parse_number\+0x' stack_trace || fail "stack_trace: $(cat stack_trace)"
grep -qE '^  [12]\) +[0-9]+ +[0-9]+   parse_token\+0x' stack_trace || fail "stack_trace chain: $(cat stack_trace)"
ok "the stack tracer's deepest stack: parse_number <- parse_token <- ..."
echo parse_line > set_ftrace_filter
echo function > current_tracer
sleep 0.1
echo 0 > tracing_on
: > "$work/raw"
for c in per_cpu/cpu*; do pipe_for 0.5 $c/trace_pipe_raw >> "$work/raw"; done
size=$(stat -c %s "$work/raw")
[ "$size" -gt 0 ] && [ $((size % 4096)) = 0 ] || fail "trace_pipe_raw: $size bytes"
ok "per_cpu/cpuN/trace_pipe_raw gives whole 4096-byte pages ($size bytes)"
echo nop > current_tracer
echo 1 > tracing_on

cd /
kill -TERM "$child"
wait "$child"
st=$?
child=
[ "$st" = 0 ] || fail "the program exited $st (its parser computed a wrong value?)"
ok "the program ran undisturbed and exited 0"
rm -rf "$work"
echo "PASS ($checks checks)"
