#!/bin/bash
# The kernel's "latency histogram from two events" recipe (Documentation/trace/histogram.rst,
# synthetic events) on a user function of a real program, through its tracefs socket:
#   a synthetic event  lat_hist u64 lat; pid_t pid
#   entry: hist:keys=common_pid:ts0=common_timestamp.usecs
#   exit:  hist:keys=common_pid:lat=common_timestamp.usecs-$ts0:onmatch(GRP.entry).lat_hist($lat,common_pid)
#   synthetic/lat_hist: hist:keys=lat.buckets=1000  (1 ms buckets)
# on an fprobe's entry and exit (f: / f:...%return), then on a kprobe and a kretprobe (p: / r:).
# PROG (synth_latency_prog.c) calls lat_work() 8 times for 2 ms and 4 times for 25 ms on
# SIGUSR1; the histogram must hold 8 entries in the 2-3 ms buckets and 4 at 25 ms or more.
#   synth_latency_e2e.sh PROG CTL
set -u
prog=$1
ctl=$2
work=$(mktemp -d /tmp/dprobe-synth.XXXXXX)
export XDG_RUNTIME_DIR=$work/run
mkdir -m 700 "$XDG_RUNTIME_DIR"
unset DPROBE_TRACEFS DPROBE_TRACEFS_SOCKET
export DPROBE_NO_FUSE=1
child=
cleanup() {
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
n=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }

"$prog" >"$work/out" 2>"$work/err" &
child=$!
for _ in $(seq 100); do
    grep -q '^pid=' "$work/out" 2>/dev/null && break
    sleep 0.1
done
sock=$(sed -n 's/^socket=//p' "$work/out")
[ -S "$sock" ] || fail "no socket"
w() { "$ctl" "$sock" write "$1" "$2"$'\n' || fail "write '$2' to $1: $("$ctl" "$sock" read error_log)"; }
r() { "$ctl" "$sock" read "$1"; }
rounds=0
run_and_wait() {
    rounds=$((rounds + 1))
    kill -USR1 "$child"
    for _ in $(seq 300); do
        grep -q "^done=$((12 * rounds))\$" "$work/out" && return 0
        sleep 0.05
    done
    fail "the program did not finish its calls"
}

# check GROUP ENTRY_EVENT EXIT_EVENT
check() {
    local grp=$1 ent=$2 ext=$3
    w synthetic_events 'lat_hist u64 lat; pid_t pid'
    w events/$grp/$ent/trigger 'hist:keys=common_pid:ts0=common_timestamp.usecs'
    w events/$grp/$ext/trigger "hist:keys=common_pid:lat=common_timestamp.usecs-\$ts0:onmatch($grp.$ent).lat_hist(\$lat,common_pid)"
    w events/synthetic/lat_hist/trigger 'hist:keys=lat.buckets=1000:sort=lat'
    run_and_wait
    local h
    h=$(r events/synthetic/lat_hist/hist)
    echo "$h" | sed 's/^/    /'
    # Every call paired: 12 hits. A call lasts its sleep or longer (scheduling only adds, and
    # on a loaded machine a 2 ms call may take longer than 25 ms): none below 2 ms, at least
    # the 4 long ones at 25 ms or more, none absurd (10 s).
    echo "$h" | grep -q 'Hits: 12$' || fail "$grp: hits"
    local below short long absurd
    below=$(echo "$h" | awk -F'hitcount:' '/lat: ~ [01]?[0-9]?[0-9]?[0-9]-/ {s += $2} END {print s + 0}')
    short=$(echo "$h" | awk -F'[~-]|hitcount:' '/lat: ~/ && $2 + 0 >= 2000 && $2 + 0 < 25000 {s += $4} END {print s + 0}')
    long=$(echo "$h" | awk -F'[~-]|hitcount:' '/lat: ~/ && $2 + 0 >= 25000 {s += $4} END {print s + 0}')
    absurd=$(echo "$h" | awk -F'[~-]|hitcount:' '/lat: ~/ && $2 + 0 >= 10000000 {s += $4} END {print s + 0}')
    [ "$below" = 0 ] || fail "$grp: $below calls below 2 ms"
    [ "$long" -ge 4 ] || fail "$grp: $long calls at 25 ms or more"
    [ $((short + long)) = 12 ] && [ "$short" -le 8 ] || fail "$grp: $short + $long calls"
    [ "$absurd" = 0 ] || fail "$grp: $absurd calls above 10 s"
    ok "$grp: latency histogram of lat_work from $ent and $ext ($short below 25 ms, $long above)"
    # The synthetic event's records when enabled: one line per call, its pid the caller's.
    w events/synthetic/lat_hist/enable 1
    w tracing_on 1
    run_and_wait
    w tracing_on 0
    local t
    t=$(r trace | grep -c "lat_hist: lat=[0-9]* pid=$child\$")
    [ "$t" = 12 ] || fail "$grp: $t synthetic records"
    ok "$grp: synthetic event records"
    w events/synthetic/lat_hist/enable 0
    "$ctl" "$sock" truncwrite trace "" >/dev/null
    # Teardown in the kernel's order: the referencing trigger first.
    w events/synthetic/lat_hist/trigger '!hist:keys=lat.buckets=1000:sort=lat'
    w events/$grp/$ext/trigger "!hist:keys=common_pid:lat=common_timestamp.usecs-\$ts0:onmatch($grp.$ent).lat_hist(\$lat,common_pid)"
    w events/$grp/$ent/trigger '!hist:keys=common_pid:ts0=common_timestamp.usecs'
    w synthetic_events '!lat_hist'
}

w dynamic_events 'f:fp/lat_in lat_work'
w dynamic_events 'f:fp/lat_out lat_work%return'
check fp lat_in lat_out
w dynamic_events 'p:kp/lat_in lat_work'
w dynamic_events 'r:kp/lat_out lat_work'
check kp lat_in lat_out
[ -z "$(r error_log)" ] || fail "error_log: $(r error_log)"
ok "no error logged"
cleanup
