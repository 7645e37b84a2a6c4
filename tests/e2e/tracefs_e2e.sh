#!/bin/bash
# End-to-end test of the tracefs bindings.
#   tracefs_e2e.sh fuse|socket PROG CTL
# PROG (tests/e2e/tracefs_prog.c) serves its tracefs; this script defines f, p and r events
# with arguments, enables them, reads trace_pipe, checks the values, sets filters, checks
# error_log after bad lines, disables and deletes the events, and checks that everything is
# gone after the program exits.
#   fuse:   through the FUSE mount with echo and cat. Fails when FUSE cannot be mounted,
#           unless DPROBE_NO_FUSE=1 is set (then the test is skipped: exit 77).
#   socket: through the Unix socket with CTL (tests/e2e/tracefs_ctl.cpp), FUSE disabled.
set -u
mode=$1
prog=$2
ctl=$3

if [ "$mode" = fuse ] && [ "${DPROBE_NO_FUSE:-}" = 1 ]; then
    echo "SKIP: DPROBE_NO_FUSE=1"
    exit 77
fi

work=$(mktemp -d /tmp/dprobe-e2e.XXXXXX)
export XDG_RUNTIME_DIR=$work/run
mkdir -m 700 "$XDG_RUNTIME_DIR"
unset DPROBE_TRACEFS DPROBE_TRACEFS_SOCKET
if [ "$mode" = socket ]; then
    export DPROBE_NO_FUSE=1
else
    unset DPROBE_NO_FUSE
fi

child=
checks=0
cleanup() {
    if [ -n "$child" ] && kill -0 "$child" 2>/dev/null; then
        kill -TERM "$child" 2>/dev/null
        wait "$child" 2>/dev/null
    fi
    rm -rf "$work" 2>/dev/null
}
fail() {
    echo "FAIL [$mode]: $*" >&2
    echo "--- program stderr:" >&2
    cat "$work/err" >&2 2>/dev/null
    cleanup
    exit 1
}
ok() {
    checks=$((checks + 1))
    echo "ok $checks - $*"
}

"$prog" >"$work/out" 2>"$work/err" &
child=$!
for _ in $(seq 100); do
    grep -q '^pid=' "$work/out" 2>/dev/null && break
    sleep 0.1
done
grep -q '^pid=' "$work/out" || fail "program did not start"
start=$(sed -n 's/^start=//p' "$work/out")
T=$(sed -n 's/^mount=//p' "$work/out")
sock=$(sed -n 's/^socket=//p' "$work/out")
pid=$(sed -n 's/^pid=//p' "$work/out")
[ "$pid" = "$child" ] || fail "pid $pid != $child"

if [ "$mode" = fuse ]; then
    [ "$T" != NONE ] || fail "FUSE mount failed (dprobe_tracefs_start returned $start); set DPROBE_NO_FUSE=1 to skip"
    [ "$T" = "$XDG_RUNTIME_DIR/dprobe/$pid" ] || fail "unexpected mount point $T"
    grep -q " $T fuse" /proc/mounts || fail "$T is not in /proc/mounts"
    [ "$(stat -c %a "$T")" = 700 ] || fail "mount point mode $(stat -c %a "$T")"
    [ "$(stat -c %a "$T/trace_pipe")" = 400 ] || fail "trace_pipe mode"
    [ "$(stat -c %a "$T/dynamic_events")" = 600 ] || fail "dynamic_events mode"
    [ "$(stat -c %u "$T/trace")" = "$(id -u)" ] || fail "owner"
    ok "mounted at $T, owner-only"
else
    [ "$T" = NONE ] || fail "FUSE mounted although DPROBE_NO_FUSE=1"
fi
[ "$sock" = "$XDG_RUNTIME_DIR/dprobe/dprobe-$pid.sock" ] || fail "unexpected socket path $sock"
[ -S "$sock" ] || fail "no socket at $sock"
[ "$(stat -c %a "$sock")" = 600 ] || fail "socket mode $(stat -c %a "$sock")"
ok "socket at $sock"

# ---- file operations, by binding ----
# w FILE TEXT: one write of TEXT + newline, like `echo TEXT >> FILE`
# wt FILE TEXT: the same with O_TRUNC, like `echo TEXT > FILE`
# tr FILE: O_TRUNC only;  r FILE: read;  pipe_for SECONDS: read trace_pipe for a while
if [ "$mode" = fuse ]; then
    w() { { printf '%s\n' "$2" >>"$T/$1"; } 2>/dev/null; }
    wt() { { printf '%s\n' "$2" >"$T/$1"; } 2>/dev/null; }
    tr_() { { : >"$T/$1"; } 2>/dev/null; }
    r() { cat "$T/$1"; }
    pipe_for() { timeout "$1" cat "$T/trace_pipe"; }
else
    w() { "$ctl" "$sock" write "$1" "$2"$'\n' 2>/dev/null; }
    wt() { "$ctl" "$sock" truncwrite "$1" "$2"$'\n' 2>/dev/null; }
    tr_() { "$ctl" "$sock" trunc "$1" 2>/dev/null; }
    r() { "$ctl" "$sock" read "$1"; }
    pipe_for() { timeout "$1" "$ctl" "$sock" pipe trace_pipe; }
fi

r README | grep -q 'Create/append/remove/show the generic dynamic events' || fail "README"
r available_filter_functions | grep -qx 'e2e_compute' || fail "e2e_compute not in available_filter_functions"
r available_filter_functions | grep -qx 'e2e_greet' || fail "e2e_greet not in available_filter_functions"
ok "README and available_filter_functions"

# ---- define events ----
w dynamic_events 'f:e2e/comp e2e_compute a=$arg1:s32 b=$arg2:s32' || fail "define comp"
w dynamic_events 'f:e2e/cret e2e_compute%return r=$retval:s32 a=$arg1:s32' || fail "define cret"
w dynamic_events 'f:e2e/greet e2e_greet name=+0($arg1):string n=$arg2:s64' || fail "define greet"
expected='f:e2e/comp e2e_compute a=$arg1:s32 b=$arg2:s32
f:e2e/cret e2e_compute%return r=$retval:s32 a=$arg1:s32
f:e2e/greet e2e_greet name=+0($arg1):string n=$arg2:s64'
[ "$(r dynamic_events)" = "$expected" ] || fail "dynamic_events listing: $(r dynamic_events)"
r enabled_functions | grep -q '^e2e_compute ' && fail "f events registered before being enabled"
id=$(r events/e2e/comp/id)
[ "$id" -ge 1000 ] 2>/dev/null || fail "id '$id'"
r events/e2e/comp/format | grep -q "^ID: $id\$" || fail "format ID"
r events/e2e/comp/format | grep -qP '^\tfield:s32 a;\toffset:16;\tsize:4;\tsigned:1;$' || fail "format field a"
[ "$(r events/e2e/comp/enable)" = 0 ] || fail "enable not 0"
ok "f events defined, listed, not yet registered"

w kprobe_events 'p:kp/pcomp e2e_compute a=%di:s32 b=%si:s32' || fail "define pcomp"
w kprobe_events 'r:kp/rcomp e2e_compute ret=$retval:s32' || fail "define rcomp"
[ "$(r kprobe_events)" = 'p:kp/pcomp e2e_compute a=%di:s32 b=%si:s32
r:kp/rcomp e2e_compute ret=$retval:s32' ] || fail "kprobe_events listing: $(r kprobe_events)"
r kprobes/list | grep -q 'e2e_compute+0x' || fail "kprobes/list: $(r kprobes/list)"
ok "kprobe events defined"

# ---- enable and read ----
w events/e2e/enable 1 || fail "enable e2e"
w events/kp/enable 1 || fail "enable kp"
# The groups' files, not events/enable: that one also counts the static (USDT) events of
# the objects loaded (libstdc++'s, say), which stay off, and then reads X as the kernel's.
[ "$(r events/e2e/enable)" = 1 ] && [ "$(r events/kp/enable)" = 1 ] ||
    fail "events/e2e/enable: $(r events/e2e/enable), events/kp/enable: $(r events/kp/enable)"
r enabled_functions | grep -q '^e2e_compute (' || fail "enabled_functions: $(r enabled_functions)"
pipe_for 1.5 >"$work/pipe1"
awk '
/ comp: \(e2e_compute\+0x[0-9a-f]+\/0x[0-9a-f]+\) a=[0-9]+ b=[0-9]+$/ {
    split($NF, b, "="); split($(NF-1), a, "="); if (b[2] != 2 * a[2]) bad++; comp++; next }
/ cret: \([^ ]+ <- e2e_compute\) r=[0-9]+ a=[0-9]+$/ {
    split($NF, a, "="); split($(NF-1), r, "="); if (r[2] != 3 * a[2]) bad++; cret++; next }
/ greet: \(e2e_greet\+0x[0-9a-f]+\/0x[0-9a-f]+\) name="world" n=[0-9]+$/ { greet++; next }
/ pcomp: \(e2e_compute\+0x[04]\/0x[0-9a-f]+\) a=[0-9]+ b=[0-9]+$/ {
    split($NF, b, "="); split($(NF-1), a, "="); if (b[2] != 2 * a[2]) bad++; pcomp++; next }
/ rcomp: \([^ ]+ <- e2e_compute\) ret=[0-9]+$/ {
    split($NF, r, "="); if (r[2] % 3) bad++; rcomp++; next }
{ other++; print "unexpected: " $0 > "/dev/stderr" }
END {
    printf "comp=%d cret=%d greet=%d pcomp=%d rcomp=%d bad=%d other=%d\n", comp, cret, greet, pcomp, rcomp, bad, other
    exit !(comp >= 5 && cret >= 5 && greet >= 5 && pcomp >= 5 && rcomp >= 5 && !bad && !other)
}' "$work/pipe1" || fail "trace_pipe content (see above); first lines: $(head -3 "$work/pipe1")"
head -1 "$work/pipe1" | grep -qE '^ +[^ ]+-[0-9]+ +\[[0-9]{3}\] \.\.\.\.\. +[0-9]+\.[0-9]{6}: ' ||
    fail "line prefix: $(head -1 "$work/pipe1")"
ok "trace_pipe: f entry/exit, string, kprobe and kretprobe values check out"

# trace_pipe just consumed the buffer: wait (up to 5 s on a loaded machine) for the program
# to call e2e_greet again.
for _ in $(seq 50); do
    r trace >"$work/trace1"
    grep -q ' greet: ' "$work/trace1" && break
    sleep 0.1
done
head -1 "$work/trace1" | grep -qx '# tracer: nop' || fail "trace header"
grep -q ' greet: (e2e_greet+0x[0-9a-f]*/0x[0-9a-f]*) name="world" n=' "$work/trace1" || fail "trace records"
r trace | grep -q ' greet: ' || fail "reading trace consumed it"
ok "trace shows the buffer without consuming it"

r kprobe_profile | awk '$1 == "pcomp" && $2 > 0 && $3 == 0 { p = 1 } $1 == "rcomp" && $2 > 0 { q = 1 }
    END { exit !(p && q) }' || fail "kprobe_profile: $(r kprobe_profile)"
ok "kprobe_profile counts hits"

if [ "$mode" = socket ]; then
    [ "$("$ctl" "$sock" poll trace_pipe 2000)" = 1 ] || fail "POLL trace_pipe"
    "$ctl" "$sock" list events | grep -qx 'e2e/' || fail "LIST events"
    "$ctl" "$sock" read events 2>&1 | grep -q EISDIR || fail "READ of a directory"
    ok "socket POLL and LIST"
elif command -v python3 >/dev/null; then
    python3 - "$T/trace_pipe" <<'EOF' || fail "poll(2) on trace_pipe"
import os, select, sys
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_NONBLOCK)
p = select.poll()
p.register(fd, select.POLLIN)
ev = p.poll(3000)
assert ev and ev[0][1] & select.POLLIN, ev
assert os.read(fd, 65536)
os.close(fd)
EOF
    ok "poll(2) on trace_pipe"
fi

# ---- filters ----
w events/e2e/comp/filter 'a & 1 && b > 0' || fail "set filter"
[ "$(r events/e2e/comp/filter)" = 'a & 1 && b > 0' ] || fail "filter file: $(r events/e2e/comp/filter)"
pipe_for 0.2 >/dev/null # drain what was recorded before the filter
pipe_for 1 >"$work/pipe2"
n_odd=$(grep -cE ' comp: .* a=[0-9]*[13579] b=' "$work/pipe2")
n_even=$(grep -cE ' comp: .* a=[0-9]*[02468] b=' "$work/pipe2")
[ "$n_odd" -ge 3 ] && [ "$n_even" = 0 ] || fail "filter: odd=$n_odd even=$n_even"
ok "filter keeps only matching events"
w events/e2e/comp/filter 'nosuch == 1' && fail "bad filter accepted"
[ "$(r events/e2e/comp/filter)" = 'nosuch == 1
       ^
parse_error: Field not found' ] || fail "filter error text: $(r events/e2e/comp/filter)"
r error_log | grep -q 'event filter parse error: error: Field not found' || fail "filter error_log"
w events/e2e/comp/filter 0 || fail "clear filter"
[ "$(r events/e2e/comp/filter)" = none ] || fail "filter not cleared"
ok "bad filter rejected with the kernel's report"

# ---- busy events ----
wt dynamic_events '' && fail "O_TRUNC of dynamic_events succeeded while events are enabled"
w dynamic_events '-:e2e/comp' && fail "deleted an enabled event"
[ "$(r dynamic_events | wc -l)" = 5 ] || fail "events changed by a failed delete"
ok "enabled events are busy"

# ---- disable ----
w events/enable 0 || fail "disable all"
[ "$(r events/enable)" = 0 ] || fail "events/enable after disable"
r enabled_functions | grep -q '^e2e_compute ' && fail "still in enabled_functions: $(r enabled_functions)"
pipe_for 0.3 >/dev/null
pipe_for 0.7 >"$work/pipe3"
[ ! -s "$work/pipe3" ] || fail "events after disable: $(head -2 "$work/pipe3")"
ok "disabled: no more events"

# ---- error_log ----
tr_ error_log || fail "clear error_log"
[ -z "$(r error_log)" ] || fail "error_log not empty"
w dynamic_events 'f:e2e/bad nosuch_function_xyz' && fail "bad symbol accepted"
log=$(r error_log)
[ "$(printf '%s\n' "$log" | sed -n 1p | sed 's/^\[ *[0-9]*\.[0-9]*\] //')" = 'trace_fprobe: error: Invalid probed address or symbol' ] ||
    fail "error_log line 1: $log"
[ "$(printf '%s\n' "$log" | sed -n 2p)" = '  Command: f:e2e/bad nosuch_function_xyz' ] || fail "error_log line 2: $log"
[ "$(printf '%s\n' "$log" | sed -n 3p)" = "$(printf '%*s^' 21 '')" ] || fail "error_log caret: $log"
ok "error_log entry with caret for a bad symbol"

if [ "$mode" = fuse ]; then
    # One write(2) of three lines (cat writes the file in one go; bash's printf may not).
    printf 'f:e2e/ok1 e2e_compute\nf:e2e/bad2 nosuch_fn\nf:e2e/ok3 e2e_compute\n' >"$work/lines"
    cat "$work/lines" 2>/dev/null >>"$T/dynamic_events" &&
        fail "multi-line write with a bad line succeeded"
else
    "$ctl" "$sock" write dynamic_events $'f:e2e/ok1 e2e_compute\nf:e2e/bad2 nosuch_fn\nf:e2e/ok3 e2e_compute\n' 2>/dev/null &&
        fail "multi-line write with a bad line succeeded"
fi
r dynamic_events | grep -qx 'f:e2e/ok1 e2e_compute' || fail "line before the bad one not applied"
r dynamic_events | grep -q 'ok3' && fail "line after the bad one applied"
w kprobe_events 'p:kp/x e2e_compute a=%zz' && fail "bad register accepted"
r error_log | grep -q 'trace_kprobe: error: Invalid register name' || fail "error_log register: $(r error_log)"
r error_log | grep -qx "$(printf '%*s^' 32 '')" || fail "register caret: $(r error_log)"
[ "$(r error_log | grep -c '\^$')" = 3 ] || fail "error_log entries: $(r error_log)"
ok "multi-line writes stop at the first bad line; parse errors logged"

# ---- delete ----
w dynamic_events '-:e2e/comp' || fail "delete comp"
w dynamic_events '-:e2e/comp' && fail "deleted comp twice"
r dynamic_events | grep -q 'e2e/comp ' && fail "comp still listed"
[ -z "$(r events/e2e/comp/id 2>/dev/null)" ] || fail "events/e2e/comp still there"
tr_ kprobe_events || fail "O_TRUNC kprobe_events"
[ -z "$(r kprobe_events)" ] || fail "kprobe events left: $(r kprobe_events)"
r kprobes/list | grep -q e2e_compute && fail "kprobes left: $(r kprobes/list)"
r dynamic_events | grep -q 'e2e/cret' || fail "kprobe_events O_TRUNC deleted f events"
tr_ dynamic_events || fail "O_TRUNC dynamic_events"
[ -z "$(r dynamic_events)" ] || fail "events left: $(r dynamic_events)"
ok "events deleted by -: and O_TRUNC"

tr_ trace || fail "O_TRUNC trace"
r trace | grep -q 'entries-in-buffer/entries-written: 0/0' || fail "trace not cleared: $(r trace | head -3)"
tr_ error_log
[ -z "$(r error_log)" ] || fail "error_log not cleared"
ok "trace and error_log cleared by O_TRUNC"

# ---- names from DWARF, event probes ----
w dynamic_events 'f:e2e/named e2e_greet name n' || fail "define named: $(r error_log)"
[ "$(r dynamic_events)" = 'f:e2e/named e2e_greet name=name n=n' ] || fail "named listing: $(r dynamic_events)"
r events/e2e/named/format | grep -qP '^\tfield:__data_loc char\[\] name;\toffset:16;\tsize:4;\tsigned:1;$' ||
    fail "named format (char * is a string): $(r events/e2e/named/format)"
r events/e2e/named/format | grep -qP '^\tfield:s64 n;\toffset:20;\tsize:8;\tsigned:1;$' ||
    fail "named format (long is s64): $(r events/e2e/named/format)"
w dynamic_events 'e:e2e/big e2e.named who=$name:string n=$n if n > 0' || fail "define big: $(r error_log)"
r dynamic_events | grep -qx 'e:e2e/big e2e.named who=$name:string n=$n' || fail "big listing: $(r dynamic_events)"
w dynamic_events 'f e2e_greet nosuch' && fail "an unknown parameter name accepted"
r error_log | grep -q 'trace_fprobe: error: This variable is not found at this probe point' ||
    fail "NO_BTFARG: $(r error_log)"
r error_log | grep -qx "$(printf '%*s^' 23 '')" || fail "NO_BTFARG caret: $(r error_log)"
# Only the event probe: e2e/named runs in soft mode, its own records are not written.
w events/e2e/big/enable 1 || fail "enable big"
[ "$(r events/e2e/named/enable)" = 0 ] || fail "named enabled by the event probe"
pipe_for 1.5 >"$work/pipe4"
grep -qE ' big: \(e2e\.named\) who="world" n=0x[0-9a-f]+$' "$work/pipe4" || fail "event probe records: $(head -3 "$work/pipe4")"
grep -q ' named: ' "$work/pipe4" && fail "soft-mode event wrote records: $(grep -m1 ' named: ' "$work/pipe4")"
w dynamic_events '-:e2e/named' && fail "deleted an event an event probe reads"
w events/e2e/big/enable 0 || fail "disable big"
w dynamic_events '-:e2e/big' || fail "delete big"
w dynamic_events '-:e2e/named' || fail "delete named"
ok "names from DWARF, event probe in soft mode"

# ---- exit ----
kill -TERM "$child"
wait "$child"
status=$?
child=
[ "$status" = 0 ] || fail "program exit status $status"
if [ "$mode" = fuse ]; then
    for _ in $(seq 50); do
        grep -q " $T fuse" /proc/mounts || break
        sleep 0.1
    done
    grep -q " $T fuse" /proc/mounts && fail "still mounted after exit"
    [ ! -e "$T" ] || fail "mount point left behind"
fi
[ ! -e "$sock" ] || fail "socket left behind"
ok "exit: unmounted, socket removed"

echo "PASS [$mode]: $checks checks"
rm -rf "$work"
exit 0
