// The script and style of the SVG flame graph (report_flamegraph.cpp), embedded in each file
// so that it works anywhere an SVG opens (a browser, an <img> without interaction).
//
// The writer lays every frame out for the whole graph: each <g class="f"> holds a <title>
// (the tooltip: the name on its first line, then time, calls and share), a <rect> and a
// <text>, and carries its place in weight units (data-o: offset, data-v: width, data-d:
// depth), so the script can lay them out again around another frame:
//   click a frame       zoom: it spans the width, what it called below (or above) it, its
//                       callers dimmed at full width, the rest hidden; "Reset zoom" undoes
//   mouse over a frame  its tooltip line in the status line at the bottom
//   Search (or Ctrl-F)  a regular expression: matching frames turn purple, and the share of
//                       the graph they cover (nested matches counted once) is shown; Esc
//                       clears it
// A URL query does the same on load: ?s=REGEX searches, ?zoom=NAME zooms on the widest frame
// called NAME (what the end-to-end test uses to look at a zoomed graph).
#pragma once

namespace dprobe::report
{

inline constexpr const char *k_flamegraph_style = R"CSS(
text { font-family: monospace; font-size: 12px; fill: #000; }
#title { font-size: 17px; text-anchor: middle; }
#subtitle { fill: #555; text-anchor: middle; }
.button { cursor: pointer; fill: #14c; }
.button:hover { text-decoration: underline; }
.hide { display: none; }
g.f { cursor: pointer; }
g.f:hover rect { stroke: #000; stroke-width: 0.5; }
g.f.caller rect { opacity: 0.5; }
g.f text { pointer-events: none; }
)CSS";

inline constexpr const char *k_flamegraph_script = R"JS(
"use strict";
var frames = [], W = 0, PAD = 10, CHAR = 7.08, zoomed = null, matchRe = null;
function el(id) { return document.getElementById(id); }
function nameOf(g) { return g.querySelector("title").textContent.split("\n")[0]; }
function tipOf(g) { return g.querySelector("title").textContent.replace(/\n/g, "  "); }
function fit(g) {
    var r = g.querySelector("rect"), t = g.querySelector("text"), name = nameOf(g);
    var w = parseFloat(r.getAttribute("width"));
    t.setAttribute("x", parseFloat(r.getAttribute("x")) + 3);
    var room = Math.floor((w - 6) / CHAR);
    if (room < 3) { t.textContent = ""; return; }
    t.textContent = name.length <= room ? name : name.substring(0, room - 2) + "..";
}
function place(f, x, w) {
    f.rect.setAttribute("x", x.toFixed(2));
    f.rect.setAttribute("width", w.toFixed(2));
    f.g.classList.remove("hide");
    fit(f.g);
}
function zoom(target) {
    var o0 = target.o, v0 = target.v, d0 = target.d, span = W - 2 * PAD;
    zoomed = target;
    frames.forEach(function (f) {
        f.g.classList.remove("caller");
        if (f.d >= d0 && f.o >= o0 && f.o + f.v <= o0 + v0 * (1 + 1e-9)) {
            place(f, PAD + (f.o - o0) / v0 * span, f.v / v0 * span);
        } else if (f.d < d0 && f.o <= o0 && f.o + f.v >= o0 + v0 * (1 - 1e-9)) {
            place(f, PAD, span);
            f.g.classList.add("caller");
        } else {
            f.g.classList.add("hide");
        }
    });
    el("unzoom").classList.toggle("hide", target.d == 0);
    if (matchRe) search(matchRe.source);
}
function unzoom() { zoom(frames[0]); }
function search(text) {
    var re;
    try { re = new RegExp(text); } catch (e) { el("matched").textContent = "bad regex: " + e.message; return; }
    matchRe = re;
    // The share of the visible graph the matches cover: a match inside another counts once.
    var base = zoomed || frames[0], spans = [], covered = 0, end = -Infinity;
    frames.forEach(function (f) {
        var r = f.g.querySelector("rect"), hit = re.test(f.name);
        if (hit) {
            if (!r.hasAttribute("data-fill")) r.setAttribute("data-fill", r.getAttribute("fill"));
            r.setAttribute("fill", "rgb(230,0,230)");
}
else if (r.hasAttribute("data-fill"))
{
    r.setAttribute("fill", r.getAttribute("data-fill"));
}
if (hit && f.d >= base.d && f.o >= base.o && f.o + f.v <= base.o + base.v * (1 + 1e-9))
    spans.push([ f.o, f.o + f.v ]);
});
spans.sort(function(a, b) { return a[0] - b[0]; });
spans.forEach(function(s) {
    var from = Math.max(s[0], end);
    if (s[1] > from) {
        covered += s[1] - from;
        end = s[1];
    }
});
el("matched").textContent = "Matched: " + (100 * covered / base.v).toFixed(2) + "%";
el("search").textContent = "Reset search";
}
function resetSearch()
{
    matchRe = null;
    frames.forEach(function(f) {
        var r = f.g.querySelector("rect");
        if (r.hasAttribute("data-fill")) {
            r.setAttribute("fill", r.getAttribute("data-fill"));
            r.removeAttribute("data-fill");
        }
    });
    el("matched").textContent = "";
    el("search").textContent = "Search";
}
function askSearch()
{
    if (matchRe) {
        resetSearch();
        return;
    }
    var text = prompt("Search for (a regular expression):", "");
    if (text) search(text);
}
function init()
{
    W = parseFloat(document.documentElement.getAttribute("width"));
    var gs = document.querySelectorAll("g.f");
    for (var i = 0; i < gs.length; i++) {
        var g = gs[i];
        frames.push({
            g : g,
            rect : g.querySelector("rect"),
            name : nameOf(g),
            o : parseFloat(g.getAttribute("data-o")),
            v : parseFloat(g.getAttribute("data-v")),
            d : parseInt(g.getAttribute("data-d"), 10)
        });
    }
    frames.sort(function(a, b) { return a.d - b.d || a.o - b.o; });
    frames.forEach(function(f) {
        f.g.addEventListener(
            "click", function() { zoom(f); });
        f.g.addEventListener(
            "mouseover", function() { el("details").textContent = tipOf(f.g); });
        f.g.addEventListener(
            "mouseout", function() { el("details").textContent = " "; });
    });
    el("unzoom").addEventListener("click", unzoom);
    el("search").addEventListener("click", askSearch);
    window.addEventListener(
        "keydown", function(e) {
            if ((e.ctrlKey || e.metaKey) && e.key == "f") {
                e.preventDefault();
                askSearch();
            } else if (e.key == "Escape")
                resetSearch();
        });
    var q = new URLSearchParams(document.location.search);
    if (q.get("zoom")) {
        var best = null;
        frames.forEach(function(f) {
            if (f.name == q.get("zoom") && (!best || f.v > best.v)) best = f;
        });
        if (best) zoom(best);
    }
    if (q.get("s")) search(q.get("s"));
    document.documentElement.setAttribute("data-ready", "1");
}
window.addEventListener("load", init);
)JS";

} // namespace dprobe::report
