#!/usr/bin/env python3
"""End-to-end tests of the report formats people look at (tests/report/CMakeLists.txt):

  report_test.py --dprobe DPROBE --prog SHARES --demo WORDFREQ --proto DIR
                 --chromium PATH --protoc PATH --go PATH --artifacts DIR CASE

SHARES is shares.c: main spends 300 ms in spin_a and 200 ms in spin_b, 100 of them in spin_c,
calls tiny 97 times and named("shares", 6) once. Each case records it and checks one format the way its users see
it:
  folded      the folded stacks' weights (self time, calls; per thread)
  flamegraph  the SVG rendered by headless Chromium: the DOM after the graph's script ran
              (the widest frames and their share, zoom, search, icicle, by calls) and a
              screenshot (kept in ARTIFACTS) whose pixels show the frames where the DOM has
              them
  pprof       the profile read by the real `go tool pprof -top` (flat and cum per function,
              calls) and decoded by protoc (source files and lines from DWARF)
  perfetto    the trace decoded by protoc against proto/perfetto_trace.proto: every slice
              and instant of the Chrome JSON of the same recording, with the same names,
              nesting, times and arguments; and at most a third of its size
A tool that is missing ("missing") fails the case: scripts/setup --check installs it.
"""
import argparse
import os
import re
import struct
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
import zlib

ap = argparse.ArgumentParser()
for opt in ("dprobe", "prog", "demo", "proto", "chromium", "protoc", "go", "artifacts"):
    ap.add_argument("--" + opt, required=True)
ap.add_argument("case")
ARGS = ap.parse_args()
WORK = tempfile.mkdtemp(prefix="dprobe-report-")
os.makedirs(ARGS.artifacts, exist_ok=True)
ENV = dict(os.environ, XDG_RUNTIME_DIR=os.path.join(WORK, "run"))
os.makedirs(ENV["XDG_RUNTIME_DIR"], mode=0o700)
failures = []
SVG_NS = "{http://www.w3.org/2000/svg}"


def check(cond, what):
    print(("ok:   " if cond else "FAIL: ") + what)
    if not cond:
        failures.append(what)


def need(tool, path):
    if path == "missing" or not os.path.exists(path):
        sys.exit("FAIL: %s is not installed: `scripts/setup --check` (make check) installs it"
                 % tool)


def run(args, ok=True, **kw):
    p = subprocess.run(args, cwd=WORK, env=ENV, capture_output=True, timeout=120, **kw)
    if ok and p.returncode != 0:
        sys.exit("FAIL: %s exited %d\nstdout:\n%s\nstderr:\n%s" %
                 (" ".join(args), p.returncode, p.stdout[-3000:], p.stderr[-3000:]))
    return p


def dprobe(*args):
    return run([ARGS.dprobe] + list(args)).stdout.decode()


def record_shares(name="shares.dat", extra=(), prog_args=()):
    """Records the shares program's graph (its spins and tiny, not the helpers)."""
    dat = os.path.join(WORK, name)
    # CLOCK_MONOTONIC, what the spins wait on: the default TSC clock of one CPU may differ
    # from another's on a VM, and a busy machine moves the thread between them.
    p = run([ARGS.dprobe, "record", "-q", "--clock", "mono", "-o", dat, "-F", "main", "-F",
             "spin_*", "-F", "tiny", "-F", "named", *extra, "--", ARGS.prog, *prog_args])
    m = re.search(r"^stamps (.*)$", p.stderr.decode(), re.M)
    if not m:
        sys.exit("FAIL: the program printed no stamps: %r" % p.stderr.decode()[-500:])
    # What each frame took by the program's own clock (ms): inclusive, and spin_b's own.
    st = {k: [int(x) for x in v.split(",")] for k, v in
          (kv.split("=") for kv in m.group(1).split())}
    TIMES.clear()
    TIMES.update({k: (e - b) / 1e6 for k, (b, e) in st.items()})
    TIMES["spin_b self"] = TIMES["spin_b"] - TIMES["spin_c"]
    return dat


# The frames' times in the last recording, as the program measured them (ms).
TIMES = {}
# How far a report's time may be from the program's own: the probe fires a few instructions
# from the program's clock read, and a thread preempted in between (rare) adds the pause.
TOL_MS = 3


def near(value, want, tol, what):
    check(abs(value - want) <= tol, "%s: %.3f, expected %.3f +- %.3f" % (what, value, want, tol))


# ---- folded ----

def case_folded():
    dat = record_shares()
    lines = dprobe("report", "-i", dat, "--format", "folded").splitlines()
    w = {}
    for line in lines:
        m = re.match(r"^(\S.*) (\d+)$", line)
        check(bool(m), "folded line %r is 'stack weight'" % line)
        if m:
            w[m.group(1)] = int(m.group(2))
    # Self time in ns, as the program measured it (about 300, 100 and 100 ms).
    for stack, ms in (("main;spin_a", TIMES["spin_a"]), ("main;spin_b", TIMES["spin_b self"]),
                      ("main;spin_b;spin_c", TIMES["spin_c"])):
        near(w.get(stack, 0) / 1e6, ms, TOL_MS, "self ms of %s" % stack)
    total = sum(w.values()) / 1e6
    near(total, TIMES["main"], TOL_MS, "total ms (main's inclusive time)")
    check(list(w) == sorted(w), "lines sorted by stack")
    calls = {}
    for line in dprobe("report", "-i", dat, "--format", "folded", "--weight",
                       "calls").splitlines():
        stack, n = line.rsplit(" ", 1)
        calls[stack] = int(n)
    check(calls == {"main": 1, "main;spin_a": 1, "main;spin_b": 1, "main;spin_b;spin_c": 1,
                    "main;tiny": 97, "main;named": 1}, "calls per stack: %s" % calls)
    per = dprobe("report", "-i", dat, "--format", "folded", "--per-thread").splitlines()
    check(per and all(re.match(r"^report_shares-\d+;main", l) for l in per),
          "--per-thread: every stack under its thread's frame: %s" % per[:2])


# ---- flamegraph ----

def render(svg, query=""):
    """The SVG's DOM after its script ran in headless Chromium: {name: [frame, ...]}."""
    p = run([ARGS.chromium, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom",
             "file://" + svg + query])
    root = ET.fromstring(p.stdout.decode())
    check(root.get("data-ready") == "1", "the graph's script ran (%s)" % (query or "no query"))
    frames = {}
    for g in root.iter(SVG_NS + "g"):
        if g.get("class", "").split()[:1] != ["f"]:
            continue
        rect, text = g.find(SVG_NS + "rect"), g.find(SVG_NS + "text")
        f = {"name": g.find(SVG_NS + "title").text.split("\n")[0],
             "title": g.find(SVG_NS + "title").text,
             "x": float(rect.get("x")), "y": float(rect.get("y")),
             "w": float(rect.get("width")), "fill": rect.get("fill"),
             "label": text.text or "", "classes": g.get("class").split()}
        frames.setdefault(f["name"], []).append(f)
    texts = {t.get("id"): (t.text or "") for t in root.iter(SVG_NS + "text") if t.get("id")}
    return frames, texts


def one(frames, name):
    fs = frames.get(name, [])
    check(len(fs) == 1, "one frame %s (found %d)" % (name, len(fs)))
    return fs[0] if fs else {"x": 0, "y": 0, "w": 0, "label": "", "classes": ["missing"],
                             "title": "", "fill": ""}


def png_pixels(path):
    """Decodes an 8-bit RGB(A) non-interlaced PNG: (width, height, rows of (r, g, b))."""
    data = open(path, "rb").read()
    check(data[:8] == b"\x89PNG\r\n\x1a\n", "%s is a PNG" % path)
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            width, height, depth, ctype = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and ctype in (2, 6), "PNG colour type %d" % ctype
            bpp = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw, stride, rows, prev = zlib.decompress(idat), width * bpp, [], bytearray(width * bpp)
    for y in range(height):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append([tuple(line[x * bpp:x * bpp + 3]) for x in range(width)])
        prev = line
    return width, height, rows


def screenshot(svg, png, height):
    run([ARGS.chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
         "--screenshot=" + png, "--window-size=1200,%d" % height, "file://" + svg])
    return png_pixels(png)


def case_flamegraph():
    need("chromium", ARGS.chromium)
    dat = record_shares()
    svg = os.path.join(ARGS.artifacts, "shares.svg")
    dprobe("report", "-i", dat, "--format", "flamegraph", "-o", svg)
    frames, texts = render(svg)
    root, main = one(frames, "all"), one(frames, "main")
    near(root["w"], 1180, 0.01, "the root spans the width")
    near(main["w"] / root["w"], 1.0, 0.001, "main's share of the graph")
    # The widest frames above main, widest first, with their shares of main.
    above = sorted((f for fs in frames.values() for f in fs if f["y"] < main["y"]),
                   key=lambda f: -f["w"])
    check([f["name"] for f in above[:3]] == ["spin_a", "spin_b", "spin_c"],
          "widest frames above main: %s" % [f["name"] for f in above[:3]])
    for name in ("spin_a", "spin_b", "spin_c"):
        near(one(frames, name)["w"] / main["w"], TIMES[name] / TIMES["main"], 0.01,
             "%s's share of main" % name)
        check(one(frames, name)["label"] == name, "%s's label shows its name" % name)
    check(re.search(r"^spin_a\n\d+\.\d+ ms \((58|59|60|61)\.\d\d%\), 1 call, self \d+\.\d+ ms$",
                    one(frames, "spin_a")["title"]) is not None,
          "spin_a's tooltip: time, share, calls: %r" % one(frames, "spin_a")["title"])
    spin_c, spin_b = one(frames, "spin_c"), one(frames, "spin_b")
    check(spin_c["y"] < spin_b["y"] < main["y"] < root["y"], "callees stacked above callers")
    check("inclusive time" in texts.get("subtitle", ""), "subtitle: %r" % texts.get("subtitle"))

    # What a person sees: the screenshot's pixels at each frame's row are the frame's colour
    # from its left edge to its right edge, and the background beyond it.
    height = int(max(f["y"] for fs in frames.values() for f in fs)) + 16 + 30
    width, h, px = screenshot(svg, os.path.join(ARGS.artifacts, "shares.png"), height)
    check((width, h) == (1200, height), "screenshot size %dx%d" % (width, h))
    for name in ("main", "spin_a", "spin_b", "spin_c"):
        f = one(frames, name)
        want = tuple(int(v) for v in re.findall(r"\d+", f["fill"]))
        row = px[int(f["y"]) + 2]
        inside = [row[x] for x in range(int(f["x"]) + 2, int(f["x"] + f["w"]) - 2)
                  if row[x] == want]
        check(len(inside) >= 0.6 * (f["w"] - 4),
              "screenshot: %s drawn in %s over its width (%d of %d px)" %
              (name, f["fill"], len(inside), int(f["w"]) - 4))
    bg = px[int(spin_c["y"]) + 2][int(spin_c["x"] + spin_c["w"]) + 8]
    check(bg == (248, 248, 240), "screenshot: background right of spin_c: %s" % (bg,))

    # Zoom on spin_b: it spans the width, spin_c is half of it, main is a dimmed caller and
    # spin_a is hidden.
    frames, texts = render(svg, "?zoom=spin_b")
    near(one(frames, "spin_b")["w"], 1180, 0.5, "zoomed: spin_b spans the width")
    near(one(frames, "spin_c")["w"] / 1180, TIMES["spin_c"] / TIMES["spin_b"], 0.01,
         "zoomed: spin_c's share of spin_b")
    check("caller" in one(frames, "main")["classes"], "zoomed: main is shown as a caller")
    check("hide" in one(frames, "spin_a")["classes"], "zoomed: spin_a is hidden")
    # Search: spin_c's share of the graph, nested matches counted once.
    frames, texts = render(svg, "?s=spin_c")
    m = re.match(r"Matched: (\d+\.\d+)%", texts.get("matched", ""))
    check(bool(m), "search shows the matched share: %r" % texts.get("matched"))
    if m:
        near(float(m.group(1)), 100 * TIMES["spin_c"] / TIMES["main"], 1, "search: spin_c's share")
    check(one(frames, "spin_c")["fill"] == "rgb(230,0,230)", "search: spin_c highlighted")
    frames, texts = render(svg, "?s=^spin")
    m = re.match(r"Matched: (\d+\.\d+)%", texts.get("matched", ""))
    if m:
        near(float(m.group(1)), 100, 1, "search ^spin: spin_b and spin_c counted once")

    # By calls: tiny's 97 of main's 102 calls; icicle: the root on top.
    svg2 = os.path.join(ARGS.artifacts, "shares_calls.svg")
    dprobe("report", "-i", dat, "--format", "flamegraph", "--weight", "calls", "--icicle",
           "-o", svg2)
    frames, texts = render(svg2)
    main = one(frames, "main")
    near(one(frames, "tiny")["w"] / main["w"], 97 / 102, 0.001, "by calls: tiny's share")
    check(one(frames, "all")["y"] < main["y"] < one(frames, "tiny")["y"],
          "icicle: callees below their callers")
    check("by calls" in texts.get("subtitle", ""), "subtitle says by calls")

    # Per thread, and the bundled demo's two threads.
    demo = os.path.join(WORK, "demo.dat")
    dprobe("record", "-q", "-o", demo, "-F", "main", "-F", "wf_*", "-F", "worker", "--",
           ARGS.demo)
    svg3 = os.path.join(ARGS.artifacts, "wordfreq_threads.svg")
    dprobe("report", "-i", demo, "--format", "flamegraph", "--per-thread", "-o", svg3)
    frames, texts = render(svg3)
    threads = [n for n in frames if re.match(r"^wordfreq-\d+$", n)]
    check(len(threads) == 2, "per thread: a frame for each of wordfreq's threads: %s" % threads)
    check(len(frames.get("wf_count_range", [])) == 2,
          "per thread: wf_count_range under each thread")


# ---- pprof ----

def source_line(pattern):
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "shares.c")
    for i, line in enumerate(open(src), 1):
        if re.match(pattern, line):
            return i
    return 0


def pprof_top(path, *extra):
    """`go tool pprof -top` of PATH: {function: (flat, cum)} in the unit asked for."""
    env = dict(ENV, HOME=WORK, GOCACHE=os.path.join(WORK, "gocache"), PPROF_TMPDIR=WORK)
    p = subprocess.run([ARGS.go, "tool", "pprof", "-top", "-nodecount=50"] + list(extra) + [path],
                       cwd=WORK, env=env, capture_output=True, text=True, timeout=120)
    check(p.returncode == 0, "go tool pprof -top %s exits 0: %s" % (" ".join(extra), p.stderr[-500:]))
    rows = {}
    for line in p.stdout.splitlines():
        m = re.match(r"^\s*([\d.]+)\w*\s+[\d.]+%\s+[\d.]+%\s+([\d.]+)\w*\s+[\d.]+%\s+(\S+)", line)
        if m:
            rows[m.group(3)] = (float(m.group(1)), float(m.group(2)))
    print(p.stdout)
    return rows


def case_pprof():
    need("go", ARGS.go)
    need("protoc", ARGS.protoc)
    dat = record_shares()
    prof = os.path.join(ARGS.artifacts, "shares.pb.gz")
    dprobe("report", "-i", dat, "--format", "pprof", "-o", prof)
    check(open(prof, "rb").read(2) == b"\x1f\x8b", "the profile is gzipped")
    top = pprof_top(prof, "-unit=ms")
    for name, flat, cum in (("spin_a", TIMES["spin_a"], TIMES["spin_a"]),
                            ("spin_b", TIMES["spin_b self"], TIMES["spin_b"]),
                            ("spin_c", TIMES["spin_c"], TIMES["spin_c"]),
                            ("main", 0, TIMES["main"])):
        f, c = top.get(name, (-1, -1))
        near(f, flat, TOL_MS, "pprof flat ms of %s" % name)
        near(c, cum, TOL_MS, "pprof cum ms of %s" % name)
    calls = pprof_top(prof, "-sample_index=calls")
    check(calls.get("tiny") == (97, 97) and calls.get("main") == (1, 102),
          "pprof calls: tiny 97, main 1 (102 with its callees): %s" % calls)
    # Source places from DWARF, as protoc reads the file.
    raw = zlib.decompress(open(prof, "rb").read(), 31)
    p = subprocess.run([ARGS.protoc, "--decode=perftools.profiles.Profile",
                        "-I", ARGS.proto, os.path.join(ARGS.proto, "profile.proto")],
                       input=raw, capture_output=True, timeout=60)
    check(p.returncode == 0, "protoc decodes the profile: %s" % p.stderr.decode()[-300:])
    text = p.stdout.decode()
    strings = re.findall(r'^string_table: "(.*)"$', text, re.M)
    funcs = re.findall(r"function \{\s*id: (\d+)\s*name: (\d+)\s*system_name: (\d+)\s*"
                       r"filename: (\d+)\s*start_line: (\d+)", text)
    places = {strings[int(n)]: (strings[int(f)], int(l)) for _, n, _, f, l in funcs}
    for name, pattern in (("spin_a", r"^__attribute__.*void spin_a"), ("tiny", r"^__attr.*int tiny"),
                          ("main", r"^int main")):
        f, line = places.get(name, ("", 0))
        check(f.endswith("tests/report/shares.c") and line == source_line(pattern),
              "%s from DWARF: %s:%d (expected shares.c:%d)" % (name, f, line, source_line(pattern)))


# ---- perfetto ----

def parse_textproto(text):
    """protoc's text format into nested lists of (name, value or list)."""
    stack = [[]]
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        if line.endswith("{"):
            node = []
            stack[-1].append((line[:-1].strip(), node))
            stack.append(node)
        elif line == "}":
            stack.pop()
        else:
            k, v = line.split(":", 1)
            v = v.strip()
            if v.startswith('"'):
                v = bytes(v[1:-1], "utf-8").decode("unicode_escape")
            stack[-1].append((k, v))
    return stack[0]


def get(msg, key, default=None):
    for k, v in msg:
        if k == key:
            return v
    return default


def perfetto_events(path):
    """The decoded trace: tracks {uuid: descriptor} and per thread track [(ts, ph, name, args)]."""
    p = subprocess.run([ARGS.protoc, "--decode=perfetto.protos.Trace", "-I", ARGS.proto,
                        os.path.join(ARGS.proto, "perfetto_trace.proto")],
                       stdin=open(path, "rb"), capture_output=True, timeout=120)
    check(p.returncode == 0, "protoc decodes the trace: %s" % p.stderr.decode()[-300:])
    tracks, events, seqs = {}, {}, {}
    for k, pkt in parse_textproto(p.stdout.decode()):
        check(k == "packet", "a Trace holds packets (%s)" % k)
        td = get(pkt, "track_descriptor")
        if td is not None:
            tracks[int(get(td, "uuid"))] = td
            continue
        seq = int(get(pkt, "trusted_packet_sequence_id"))
        flags = int(get(pkt, "sequence_flags", "0"))
        if seq not in seqs:
            check(flags == 1, "a sequence starts with its state cleared")
            dflt = get(get(pkt, "trace_packet_defaults", []), "track_event_defaults", [])
            seqs[seq] = {"track": int(get(dflt, "track_uuid", "0")), "names": {}, "cats": {},
                         "args": {}}
        st = seqs[seq]
        for kind, entries in get(pkt, "interned_data", []):
            table = {"event_names": "names", "event_categories": "cats",
                     "debug_annotation_names": "args"}[kind]
            st[table][int(get(entries, "iid"))] = get(entries, "name")
        ev = get(pkt, "track_event")
        ph = {"TYPE_SLICE_BEGIN": "B", "TYPE_SLICE_END": "E", "TYPE_INSTANT": "i"}[get(ev, "type")]
        name = st["names"].get(int(get(ev, "name_iid", "0")), "") if ph != "E" else ""
        args = {}
        for k, a in ev:
            if k == "debug_annotations":
                v = get(a, "int_value")
                args[st["args"][int(get(a, "name_iid"))]] = int(v) if v is not None else get(
                    a, "string_value")
        events.setdefault(st["track"], []).append((int(get(pkt, "timestamp")), ph, name, args))
    return tracks, events


def case_perfetto():
    need("protoc", ARGS.protoc)
    dat = record_shares(extra=("-e", "f:tinyev tiny x=$arg1:s32"), prog_args=("3000",))
    pf, js = os.path.join(ARGS.artifacts, "shares.pftrace"), os.path.join(WORK, "shares.json")
    dprobe("report", "-i", dat, "--format", "perfetto", "-o", pf)
    dprobe("report", "-i", dat, "--format", "chrome", "-o", js)
    ratio = os.path.getsize(pf) / os.path.getsize(js)
    check(ratio <= 1 / 3, "perfetto is %.3f of the Chrome JSON's size (%d / %d bytes)" %
          (ratio, os.path.getsize(pf), os.path.getsize(js)))
    tracks, events = perfetto_events(pf)
    import json
    doc = json.load(open(js), parse_float=lambda text: text)
    want = {}
    names = {}
    for e in doc["traceEvents"]:
        if e["ph"] == "M":
            names[(e["name"], e["pid"], e["tid"])] = e["args"]["name"]
            continue
        us, frac = str(e["ts"]).split(".") if "." in str(e["ts"]) else (str(e["ts"]), "0")
        ts = int(us) * 1000 + int(frac.ljust(3, "0")[:3])
        args = dict(e.get("args", {}))
        args = {k: (int(v) if isinstance(v, str) and re.fullmatch(r"-?(0|[1-9]\d*)", v) else v)
                for k, v in args.items()}
        want.setdefault(e["tid"], []).append((ts, e["ph"], e["name"] if e["ph"] != "E" else "",
                                              args))
    threads = {int(get(get(td, "thread"), "tid")): uuid for uuid, td in tracks.items()
               if get(td, "thread") is not None}
    procs = [td for td in tracks.values() if get(td, "process") is not None]
    check(len(procs) == 1 and get(get(procs[0], "process"), "process_name") == "report_shares",
          "one process track, named")
    check(sorted(threads) == sorted(want), "a thread track for each thread: %s" % sorted(threads))
    for tid, evs in want.items():
        got = events.get(threads.get(tid), [])
        td = tracks.get(threads.get(tid), [])
        check(int(get(td, "parent_uuid", "0")) in tracks, "thread %d's track has its process as parent" % tid)
        check(len(got) == len(evs), "thread %d: %d events (chrome: %d)" % (tid, len(got), len(evs)))
        bad = [(g, w) for g, w in zip(got, evs) if g != w]
        check(not bad, "thread %d: names, nesting, times and args as in the Chrome JSON%s" %
              (tid, ": first difference %s vs %s" % bad[0] if bad else ""))
    tiny = [e for evs in events.values() for e in evs if e[2] == "tinyev"]
    check(len(tiny) == 3000 and tiny[5][3].get("x") == 5,
          "probe events: 3000 instants with their argument (x=5 on the sixth): %s" % (tiny[5:6],))


# ---- arguments and return values (record -a, -A, -R) ----

def case_args():
    dat = record_shares(extra=("-a",))
    graph = dprobe("report", "-i", dat, "--format", "graph", "--no-header")
    print(graph)
    for want in ('named("shares", 6) = 12;', "tiny(0) = 1;", "tiny(5) = 16;",
                 "main(1, 0x", "} /* main = 0 */"):
        check(want in graph, "-a: the graph shows %r" % want)
    js = os.path.join(WORK, "args.json")
    dprobe("report", "-i", dat, "--format", "chrome", "-o", js)
    import json
    evs = [e for e in json.load(open(js))["traceEvents"] if e.get("name") == "named"]
    check(len(evs) == 2 and evs[0].get("args") == {"word": '"shares"', "len": "6"} and
          evs[1].get("args") == {"retval": "12"},
          "-a: chrome's B and E of named carry its arguments and return value: %s" % evs)
    check('"cat":"graph_args"' not in open(js).read(), "chrome: no values left as instants")
    if ARGS.protoc != "missing":
        pf = os.path.join(WORK, "args.pftrace")
        dprobe("report", "-i", dat, "--format", "perfetto", "-o", pf)
        tracks, events = perfetto_events(pf)
        named = [e for evs in events.values() for i, e in enumerate(evs) if e[2] == "named"]
        check(named and named[0][3] == {"word": '"shares"', "len": 6},
              "perfetto: named's begin has its arguments: %s" % named)
        ends = [evs[i + 1] for evs in events.values() for i, e in enumerate(evs)
                if e[2] == "named" and i + 1 < len(evs)]
        check(ends and ends[0][1] == "E" and ends[0][3] == {"retval": 12},
              "perfetto: named's end has its return value: %s" % ends)
    text = dprobe("report", "-i", dat, "--no-header")
    check(re.search(r'args\d+: \(named\+0x0/0x[0-9a-f]+\) word="shares" len=6', text) is not None,
          "text: the arguments' record as an event line")

    # uftrace's spelling, with formats, and fetch args as dynamic_events spells them.
    dat = record_shares("spelled.dat", extra=("-A", "tiny@arg1/x", "-R", "tiny@retval/d",
                                              "-A", "named@w=+0($arg1):string,n=$arg2:s32"))
    graph = dprobe("report", "-i", dat, "--format", "graph", "--no-header")
    for want in ("tiny(0x5) = 16;", 'named("shares", 6);', "spin_a();"):
        check(want in graph, "-A/-R: the graph shows %r" % want)
    # Bad specs are refused before the program runs.
    for bad, why in ((["-A", "tiny"], "is not GLOB@"), (["-A", "tiny@fparg1"], "SSE"),
                     (["-A", "tiny@arg1/q"], "unknown format"), (["-R", "tiny@arg1"], "goes with -A"),
                     (["-a", "-p", "function"], "function_graph tracer")):
        p = run([ARGS.dprobe, "record", "-q", "-o", os.path.join(WORK, "bad.dat"), "-F", "tiny"] +
                bad + ["--", ARGS.prog], ok=False)
        check(p.returncode != 0 and why in p.stderr.decode(),
              "%s refused: %s" % (" ".join(bad), p.stderr.decode().strip()))


CASES = {"args": case_args, "folded": case_folded, "flamegraph": case_flamegraph, "pprof": case_pprof,
         "perfetto": case_perfetto}
CASES[ARGS.case]()
if failures:
    sys.exit("%d check(s) failed" % len(failures))
print("PASS")
