"""The HTML report in a real headless Chromium (driven over the DevTools protocol): it loads without
errors or network requests, the timeline holds every event, clicks show details and follow flows to
the device, the op table sorts and exports CSV, HBM and side-by-side views work, and a screenshot
shows what the data says it should."""
import csv
import io
import json
import math
import os
import re
import struct
import subprocess
import sys
import zlib

import pytest

from torchneuron_ext import costmodel
from torchneuron_ext.profiler import summarize_trace
from torchneuron_ext.profiler._format import format_bytes
from torchneuron_ext.profiler.html import write_html_report
from torchneuron_ext.profiler.html.headless import HeadlessChromium, find_chromium
from torchneuron_ext.profiler.html.model import build_profile

pytestmark = pytest.mark.skipif(
    find_chromium() is None,
    reason="no Chromium for the browser tests: apt-get install -y chromium (or set $CHROMIUM); .ci/run installs it")

VARIANTS = ["naive", "torch.rms_norm", "torch.compile"]
READY = "window.tnx && (window.tnx.ready || window.tnx.error)"


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """The demo's own output: three RMSNorm traces and the report.html it writes."""
    out = tmp_path_factory.mktemp("demo")
    r = subprocess.run([sys.executable, "-m", "torchneuron_ext.cli", "demo", "--out", str(out), "--size", "128"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    report = out / "report.html"
    assert report.is_file() and str(report) in r.stdout
    traces = {}
    for name in VARIANTS:
        (path,) = [os.path.join(d, "trace.json") for d, _, fs in os.walk(out / name.replace(".", "_"))
                   if "trace.json" in fs]
        with open(path) as f:
            traces[name] = json.load(f)
    return report, traces


@pytest.fixture(scope="module")
def browser():
    with HeadlessChromium(width=1400, height=900) as b:
        yield b


def open_report(browser, path, fragment=""):
    browser.open("about:blank")  # a new document even when only the fragment changes
    browser.events.clear()
    browser.open(f"file://{path}#{fragment}", READY)
    assert browser.evaluate("window.tnx.error") is None
    browser.evaluate("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")


def x_events(trace):
    """The spans the viewer draws: every complete event, a compiled graph's launch (written as its parts) once."""
    return [e for e in trace["traceEvents"] if e.get("ph") == "X" and e.get("args", {}).get("part", 1) == 1]


def test_loads_without_errors_or_network(browser, demo):
    report, traces = demo
    open_report(browser, report)
    profiles = browser.evaluate("tnx.profiles()")
    assert [p["name"] for p in profiles] == VARIANTS
    assert [p["events"] for p in profiles] == [len(x_events(traces[n])) for n in VARIANTS]
    assert browser.errors() == []
    assert browser.requests() == [f"file://{report}"], "the page fetched something"
    # The summary page shows the numbers of the text report.
    s = summarize_trace(traces["naive"])
    text = browser.evaluate("document.getElementById('tab-summary').innerText")
    assert s.verdict in text and f"{100 * s.device_busy_share:.1f}%" in text
    assert "Findings" in text and browser.evaluate("document.querySelectorAll('ol.findings li').length") >= 1


def test_timeline_shows_every_event(browser, demo):
    report, traces = demo
    open_report(browser, report, "tab=timeline&profile=naive")
    trace = traces["naive"]
    n = len(x_events(trace))
    info = browser.evaluate("document.querySelector('#tab-timeline .info').textContent")
    assert info.startswith(f"{n} events"), info
    assert browser.evaluate("tnx.timeline().stats.inView") == n
    groups = browser.evaluate("tnx.timeline().items.filter(it => it.kind === 'group').map(it => it.group + (it.empty ? '-' : ''))")
    assert groups == ["framework", "runtime", "hardware", "projected", "transfer-", "memory"]
    # Zoomed to a window, exactly the events overlapping it are in view, and fewer are drawn.
    t0 = build_profile(trace, "x")["t0"]
    kernels = sorted((e for e in x_events(trace) if e.get("cat") == "kernel"), key=lambda e: e["ts"])
    # Window edges 10 ns off event edges: the page keeps times to the nanosecond.
    a, b = kernels[3]["ts"] - t0 + 0.01, kernels[8]["ts"] - t0 - 0.01
    expected = sum(1 for e in x_events(trace) if e["ts"] - t0 <= b and e["ts"] + e["dur"] - t0 >= a)
    stats = browser.evaluate(f"(() => {{ const tl = tnx.timeline(); tl.setView({a}, {b}); tl.drawNow(); return tl.stats; }})()")
    assert stats["inView"] == expected and 0 < stats["drawn"] <= expected
    assert browser.errors() == []


def _event_point(browser, index_expr):
    """Reveal an event and return its on-screen centre (page coordinates)."""
    return browser.evaluate(f"""(() => {{
        const tl = tnx.timeline(), i = {index_expr};
        tl.reveal([i]); tl.drawNow();
        const c = tl.eventCenter(i), r = tl.canvas.getBoundingClientRect();
        return {{i, x: r.left + c.x, y: r.top + c.y}};
    }})()""")


def test_click_shows_details_and_jumps_to_device_work(browser, demo):
    report, traces = demo
    open_report(browser, report, "tab=timeline&profile=naive")
    pt = _event_point(browser, "tnx.findEvent('aten::pow', 1)")
    assert pt["i"] >= 0
    browser.click(pt["x"], pt["y"])
    assert browser.evaluate("tnx.timeline().selected") == pt["i"]
    # Args are inflated in the background after the page opens; the panel fills them in then.
    details = browser.wait_for("(t => !t.includes('loading…') && t)(tnx.timeline().details.innerText)")
    op = browser.evaluate(f"tnx.event({pt['i']})")
    assert "aten::pow" in details and "External id" in details and str(op["args"]["External id"]) in details
    assert "1 device event" in details
    # The jump button follows the flows op -> runtime dispatch -> kernel.
    jump = browser.evaluate("(() => { const r = tnx.timeline().details.querySelector('button.jump').getBoundingClientRect();"
                            " return {x: r.left + r.width / 2, y: r.top + r.height / 2}; })()")
    browser.click(jump["x"], jump["y"])
    kernel = browser.evaluate("tnx.event(tnx.timeline().selected)")
    assert kernel["group"] == "hardware" and kernel["name"].startswith("neuron::pow")
    assert kernel["args"]["External id"] == op["args"]["External id"]
    view = browser.evaluate("tnx.timeline().view")
    assert view["t0"] <= kernel["start"] and kernel["start"] + kernel["dur"] <= view["t1"]
    # Clicking empty space clears the selection.
    empty = browser.evaluate("(() => { const tl = tnx.timeline(), r = tl.canvas.getBoundingClientRect();"
                             " return {x: r.left + 260, y: r.top + tl.items.find(it => it.group === 'transfer').y + 5}; })()")
    browser.click(empty["x"], empty["y"])
    assert browser.evaluate("tnx.timeline().selected") == -1
    assert browser.errors() == []


def test_op_table_sorts_and_exports_csv(browser, demo, tmp_path):
    report, traces = demo
    open_report(browser, report, "tab=ops&profile=naive")
    header = browser.evaluate("(() => { const r = document.querySelector('#tab-ops th[data-key=calls]').getBoundingClientRect();"
                              " return {x: r.left + r.width / 2, y: r.top + r.height / 2}; })()")
    browser.click(header["x"], header["y"])
    calls = browser.evaluate("[...document.querySelectorAll('#tab-ops tbody tr')].map(tr => +tr.children[2].textContent.replace(/,/g, ''))")
    assert calls == sorted(calls, reverse=True) and len(calls) == len(summarize_trace(traces["naive"]).ops)
    browser.allow_downloads(str(tmp_path))
    button = browser.evaluate("(() => { const r = document.querySelector('#tab-ops button.export-csv').getBoundingClientRect();"
                              " return {x: r.left + r.width / 2, y: r.top + r.height / 2}; })()")
    browser.click(button["x"], button["y"])
    name = browser.wait_download()
    assert name == "naive_ops.csv"
    text = (tmp_path / name).read_text()
    assert text == browser.evaluate("tnx.opTableCsv()")
    rows = list(csv.DictReader(io.StringIO(text)))
    assert list(rows[0]) == ["op", "tier", "calls", "host_us", "host_mean_us", "device_us", "device_mean_us",
                             "device_share_pct", "bytes"]
    assert [int(r["calls"]) for r in rows] == calls  # the table as shown: sorted by calls
    want = {r.name: r for r in summarize_trace(traces["naive"]).ops}
    for r in rows:
        w = want[r["op"]]
        assert (r["tier"], int(r["calls"]), int(r["bytes"])) == (w.tier, w.calls, w.bytes)
        assert abs(float(r["device_us"]) - w.device_us) < 1e-3 and abs(float(r["host_us"]) - w.host_us) < 1e-3
    assert abs(sum(float(r["device_share_pct"]) for r in rows) - 100) < 0.01


def test_measured_projected_switches(browser, demo):
    report, traces = demo
    s = summarize_trace(traces["naive"])
    open_report(browser, report, "tab=summary&profile=naive")
    text = browser.evaluate("document.getElementById('tab-summary').innerText")
    assert f"Projected on {s.projected.target}" in text and s.projected.verdict in text
    # The summary cards of both clocks: measured, and the projection's own.
    cards = browser.evaluate("[...document.querySelectorAll('#tab-summary .cards.projected .card')].map(c => c.innerText)")
    assert [c.split("\n")[0] for c in cards] == ["projected wall", "projected device busy", "projected verdict",
                                                  "launches"], cards
    assert s.projected.verdict in cards[2] and str(s.projected.launches) in cards[3], cards
    open_report(browser, report, "tab=timeline&profile=naive")
    lanes = "tnx.timeline().items.filter(it => it.kind === 'lane').map(it => tnx.timeline().p.lanes[it.lane].group)"
    switch = ("(() => { const c = document.querySelector('#tab-timeline select.clock'); c.value = '%s';"
              " c.dispatchEvent(new Event('change')); })()")
    assert "projected" in browser.evaluate(lanes) and "hardware" in browser.evaluate(lanes)
    browser.evaluate(switch % "measured")
    assert "projected" not in browser.evaluate(lanes) and "hardware" in browser.evaluate(lanes)
    browser.evaluate(switch % "projected")
    assert "projected" in browser.evaluate(lanes) and "hardware" not in browser.evaluate(lanes)
    assert browser.errors() == []
    open_report(browser, report, "tab=ops&profile=naive")
    browser.evaluate(switch.replace("#tab-timeline", "#tab-ops") % "projected")
    rows = list(csv.DictReader(io.StringIO(browser.evaluate("tnx.opTableCsv()"))))
    assert list(rows[0]) == ["op", "tier", "calls", "host_us", "host_mean_us", "projected_us", "projected_mean_us",
                             "projected_share_pct", "bound", "bytes"]
    want = {r.name: r for r in s.ops}
    projected = [float(r["projected_us"]) for r in rows]
    assert projected == sorted(projected, reverse=True)  # the switch sorts by projected time
    for r in rows:
        assert abs(float(r["projected_us"]) - want[r["op"]].projected_us) < 1e-3 and r["bound"] == want[r["op"]].bound


def test_memory_and_side_by_side(browser, demo):
    report, traces = demo
    open_report(browser, report, "tab=memory&profile=naive")
    samples = [e for e in traces["naive"]["traceEvents"] if e.get("ph") == "C" and e["name"] == "NC0 HBM"]
    peak = max(s["args"]["allocated MB"] for s in samples)
    headings = browser.evaluate("[...document.querySelectorAll('#tab-memory h2')].map(h => h.textContent)")
    assert headings and headings[0].startswith(f"NC0 HBM — peak allocated {format_bytes(peak * 2**20)} at "), headings
    assert browser.evaluate("document.querySelectorAll('#tab-memory canvas').length") == 1

    browser.evaluate("tnx.show('compare')")
    heads = browser.evaluate("[...document.querySelectorAll('.compare-metrics th')].map(th => th.textContent)")
    assert heads[1:] == ["A: naive", "B: torch.compile", "B / A"]
    kernels = browser.evaluate("[...document.querySelectorAll('.compare-metrics tr')].find(tr => tr.children[0].textContent === 'kernels').innerText")
    ka, kb = (summarize_trace(traces[n]).kernels for n in ("naive", "torch.compile"))
    assert kernels.split("\t")[1:3] == [str(ka), str(kb)], kernels
    # A wheel over timeline A zooms both: they share one time scale.
    before = browser.evaluate("tnx.compareTimelines().map(t => t.view)")
    browser.evaluate("tnx.compareTimelines()[0].canvas.scrollIntoView()")
    box = browser.evaluate("new Promise(r => requestAnimationFrame(() => { const c = tnx.compareTimelines()[0].canvas;"
                           " const b = c.getBoundingClientRect(); r({x: b.left + 700, y: b.top + 60,"
                           " hit: document.elementFromPoint(b.left + 700, b.top + 60) === c}); }))")
    assert box["hit"], "timeline A is not under the pointer"
    browser.wheel(box["x"], box["y"], delta_y=-400)
    after = browser.evaluate("new Promise(r => requestAnimationFrame(() => r(tnx.compareTimelines().map(t => t.view))))")
    assert before[0] == before[1] and after[0] == after[1], (before, after)
    assert after[0]["t1"] - after[0]["t0"] < before[0]["t1"] - before[0]["t0"], (before, after)
    assert browser.errors() == []


def decode_png(data):
    """(width, height, rows of RGB(A) bytes, bytes per pixel) of an 8-bit non-interlaced PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat = 8, b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            w, h, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
    assert depth == 8 and interlace == 0 and color in (2, 6)
    bpp = 3 if color == 2 else 4
    raw, stride = zlib.decompress(idat), w * bpp
    rows, prev = [], bytearray(stride)
    for y in range(h):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], (prev[i - bpp] if i >= bpp else 0)
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(line)
        prev = line
    return w, h, rows, bpp


def test_screenshot_matches_the_data(browser, demo, tmp_path):
    report, traces = demo
    open_report(browser, report, "tab=timeline&profile=naive")
    shots = os.environ.get("TNX_SCREENSHOT_DIR") or str(tmp_path)
    os.makedirs(shots, exist_ok=True)
    with open(os.path.join(shots, "timeline_naive.png"), "wb") as f:  # kept for people to look at
        f.write(browser.screenshot())
    geo = browser.evaluate("""(() => {
        const tl = tnx.timeline(); tl.resetView(false); tl.drawNow();
        const r = tl.canvas.getBoundingClientRect();
        const hw = tl.items.find(it => it.kind === 'lane' && tl.p.lanes[it.lane].group === 'hardware');
        return {left: r.left, top: r.top, width: tl.width, y: hw.y, t0: tl.view.t0, t1: tl.view.t1};
    })()""")
    label_w = 240
    band_y = geo["top"] + geo["y"] + 5  # inside row 0 of the hardware lane, above the event labels
    png = browser.screenshot({"x": geo["left"], "y": band_y, "width": geo["width"], "height": 1})
    w, _, rows, bpp = decode_png(png)
    px = rows[0]
    painted = {x for x in range(label_w, w) if max(px[x * bpp:x * bpp + 3]) - min(px[x * bpp:x * bpp + 3]) > 24}
    # Where kernels of row 0 should paint, from the trace alone (the lane's first row holds the
    # graph-level kernels; the naive profile has one row).
    t0 = build_profile(traces["naive"], "x")["t0"]
    scale = (geo["width"] - label_w) / (geo["t1"] - geo["t0"])
    expected = set()
    for e in x_events(traces["naive"]):
        if e.get("cat") != "kernel":
            continue
        x0 = label_w + (e["ts"] - t0 - geo["t0"]) * scale
        x1 = label_w + (e["ts"] + e["dur"] - t0 - geo["t0"]) * scale
        lo = max(math.floor(x0), label_w)
        expected.update(range(lo, min(max(math.ceil(x1), lo + 1), w)))
    assert expected, "no kernels to draw"
    agree = len(painted & expected) / len(painted | expected)
    assert agree > 0.95, (sorted(expected - painted)[:20], sorted(painted - expected)[:20])
    # The lane's label is drawn: dark text pixels in the label column beside it.
    label = browser.screenshot({"x": geo["left"], "y": geo["top"] + geo["y"], "width": label_w, "height": 18})
    _, _, rows, bpp = decode_png(label)
    assert any(max(r[x * bpp:x * bpp + 3]) < 120 for r in rows for x in range(label_w))


def _synthetic(n_kernels):
    ev = [{"ph": "M", "name": "thread_name", "pid": 0x4E43, "tid": 0, "args": {"name": "NC0 hardware (kernel execution)"}}]
    for k in range(n_kernels):
        ev.append({"ph": "X", "cat": "kernel", "name": f"neuron::op{k % 7}", "pid": 0x4E43, "tid": 0,
                   "ts": 2.0 * k, "dur": 1.0, "args": {"tier": "generic" if k % 7 == 0 else "native", "device": 0}})
    return {"traceEvents": ev}


def test_many_events_draw_by_level_of_detail(browser, tmp_path):
    n = 60_000
    path = write_html_report([_synthetic(n)], tmp_path / "many.html")
    open_report(browser, path, "tab=timeline")
    stats = browser.evaluate("(() => { const tl = tnx.timeline(); tl.drawNow(); return {...tl.stats, w: tl.plotWidth()}; })()")
    # Each kernel and its projection (the page adds the projected lane the trace lacks).
    assert stats["inView"] == 2 * n
    assert 0 < stats["drawn"] <= 2 * (stats["w"] + 1)  # at most one rectangle per pixel column per lane
    # Zoomed in far enough, every event gets its own rectangle: 51 kernels, and the projected ones
    # (12 us launches back to back) that overlap the window.
    projected = costmodel.project_trace(_synthetic(n)).kernels
    overlapping = sum(1 for k in projected if k.start_us < 1100 and k.start_us + k.duration_us > 1000)
    stats = browser.evaluate("(() => { const tl = tnx.timeline(); tl.setView(1000, 1100); tl.drawNow(); return tl.stats; })()")
    assert overlapping == 9 and stats["inView"] == stats["drawn"] == 51 + overlapping
    pt = _event_point(browser, "tnx.findEvent('neuron::op3', 4000)")
    browser.click(pt["x"], pt["y"])
    assert browser.evaluate("tnx.timeline().selected") == pt["i"]
    assert browser.errors() == []


def test_served_by_view(browser, demo):
    report, _ = demo
    proc = subprocess.Popen([sys.executable, "-m", "torchneuron_ext.cli", "view", str(report)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        m = re.search(r"http://127\.0\.0\.1:\d+/", proc.stdout.readline())
        assert m, proc.stderr.read()
        browser.open("about:blank")
        browser.events.clear()
        browser.open(m.group(0) + "#tab=timeline", READY)
        assert browser.evaluate("window.tnx.error") is None
        assert [p["name"] for p in browser.evaluate("tnx.profiles()")] == VARIANTS
        assert all(u.startswith(m.group(0)) for u in browser.requests()), browser.requests()
        assert browser.errors() == []
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_every_tab_of_cpu_only_and_empty_traces(browser, tmp_path):
    cpu_only = {"traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10.0, "dur": 30.0},
        {"ph": "X", "cat": "cpu_op", "name": "aten::addmm", "pid": 1, "tid": 1, "ts": 12.0, "dur": 20.0}]}
    path = write_html_report([cpu_only, {"traceEvents": []}], tmp_path / "edge.html", names=["cpu", "empty"])
    for profile in ("cpu", "empty"):
        for tab in ("summary", "timeline", "ops", "memory", "compare"):
            open_report(browser, path, f"tab={tab}&profile={profile}")
            assert browser.errors() == [], (profile, tab)
    open_report(browser, path, "tab=summary&profile=cpu")
    assert "No device activity was recorded" in browser.evaluate("document.getElementById('tab-summary').innerText")
    open_report(browser, path, "tab=timeline&profile=empty")
    assert browser.evaluate("tnx.timeline().stats.inView") == 0
    groups = browser.evaluate("tnx.timeline().items.map(it => it.group + (it.empty ? '-' : ''))")
    assert groups == ["framework-", "runtime-", "hardware-", "transfer-", "memory-"]


def test_shift_drag_measures_a_range(browser, demo):
    report, traces = demo
    open_report(browser, report, "tab=timeline&profile=naive")
    box = browser.evaluate("(() => { const tl = tnx.timeline(), r = tl.canvas.getBoundingClientRect();"
                           " return {left: r.left, top: r.top, w: tl.width}; })()")
    x0, x1, y = box["left"] + 400, box["left"] + 900, box["top"] + 60
    browser.drag(x0, y, x1, y, modifiers=8)
    r = browser.evaluate("tnx.timeline().range")
    assert r and r["summarised"] and r["t1"] > r["t0"]
    # The same numbers from the trace: events overlapping the range, and the union of device
    # (kernel and copy) time inside it.
    t0 = build_profile(traces["naive"], "x")["t0"]
    xs = [(e["ts"] - t0, e["ts"] - t0 + e["dur"], e.get("cat")) for e in x_events(traces["naive"])]
    a, b = r["t0"], r["t1"]
    assert r["events"] == sum(1 for s, e, _ in xs if e >= a and s <= b)
    busy, end = 0.0, float("-inf")
    for s, e in sorted((max(s, a), min(e, b)) for s, e, c in xs if c in ("kernel", "gpu_memcpy") and e >= a and s <= b):
        if e > end:
            busy += e - max(s, end)
            end = e
    assert abs(r["busy"] - busy) < 0.01 * max(1.0, busy)
    info = browser.evaluate("document.querySelector('#tab-timeline .info').textContent")
    assert re.search(r"range [\d.]+ (us|ms): \d+ events, device busy [\d.]+%", info), info
    # A plain drag pans instead, and Escape clears the range.
    view = browser.evaluate("tnx.timeline().view")
    browser.drag(x1, y, x0, y)
    assert browser.evaluate("tnx.timeline().view")["t0"] > view["t0"]
    browser.evaluate("tnx.timeline().canvas.dispatchEvent(new KeyboardEvent('keydown', {key: 'Escape'}))")
    assert browser.evaluate("tnx.timeline().range") is None
    assert browser.errors() == []


def test_search_highlights_and_steps_through_matches(browser, demo):
    report, traces = demo
    open_report(browser, report, "tab=timeline&profile=naive")
    browser.evaluate("document.querySelector('#tab-timeline input[type=search]').focus()")
    browser.send("Input.insertText", {"text": "RSQRT"})
    want = sum(1 for e in x_events(traces["naive"]) if "rsqrt" in e["name"].lower())
    assert browser.evaluate("tnx.timeline().matchCount") == want > 0
    assert f"· {want} match" in browser.evaluate("document.querySelector('#tab-timeline .info').textContent")
    seen = []
    for _ in range(want + 1):  # Enter walks the matches in time order, then wraps around
        browser.send("Input.dispatchKeyEvent", {"type": "keyDown", "key": "Enter", "code": "Enter",
                                                "windowsVirtualKeyCode": 13})
        browser.send("Input.dispatchKeyEvent", {"type": "keyUp", "key": "Enter", "code": "Enter",
                                                "windowsVirtualKeyCode": 13})
        seen.append(browser.evaluate("(tl => ({i: tl.selected, t: tl.p.start[tl.selected]}))(tnx.timeline())"))
    assert all("rsqrt" in browser.evaluate(f"tnx.timeline().p.eventName({s['i']})").lower() for s in seen)
    starts = [s["t"] for s in seen[:want]]
    assert starts == sorted(starts) and len({s["i"] for s in seen[:want]}) == want
    assert seen[want]["i"] == seen[0]["i"]
    assert browser.errors() == []


def test_counter_spike_survives_zooming_out(browser, tmp_path):
    # 100k HBM samples at 1 MB with one 1-sample spike to 100 MB: at whole-trace zoom it is far
    # narrower than a pixel, yet its column must still reach the top of the memory lane.
    n, spike = 100_000, 61_234
    ev = [{"ph": "X", "cat": "kernel", "name": "neuron::k", "pid": 2, "tid": 0, "ts": 0.0, "dur": float(n)}]
    ev += [{"ph": "C", "name": "NC0 HBM", "pid": 2, "ts": float(k), "args": {"allocated MB": 100.0 if k == spike else 1.0}}
           for k in range(n)]
    path = write_html_report([{"traceEvents": ev}], tmp_path / "spike.html")
    open_report(browser, path, "tab=timeline")
    geo = browser.evaluate("""(() => { const tl = tnx.timeline(); tl.drawNow();
        const r = tl.canvas.getBoundingClientRect(), it = tl.items.find(it => it.kind === 'counter');
        return {left: r.left, top: r.top + it.y + 6, width: tl.width, x: tl.xOf(%d)}; })()""" % spike)
    png = browser.screenshot({"x": geo["left"], "y": geo["top"] + 1, "width": geo["width"], "height": 1})
    w, _, rows, bpp = decode_png(png)
    blue = [x for x in range(240, w) if rows[0][x * bpp + 2] > 150 and rows[0][x * bpp] < 120]
    assert blue and all(abs(x - geo["x"]) <= 2 for x in blue), (blue, geo["x"])
    assert browser.errors() == []


def test_memory_by_category_is_stacked_with_its_peak(browser, tmp_path):
    # A trace as NeuronProfiler exports it from a session that recorded memory, shapes and stacks.
    categories = ["parameter", "optimizer_state", "input", "temporary", "activation", "gradient", "autograd_detail",
                  "unknown"]
    rows = [[4 << 20, 0, 0, 0, 0, 0, 0, 0], [4 << 20, 0, 1 << 20, 0, 6 << 20, 0, 0, 0],
            [4 << 20, 8 << 20, 1 << 20, 0, 0, 4 << 20, 0, 0], [4 << 20, 8 << 20, 0, 0, 0, 0, 0, 0]]
    timeline = {"device": 0, "categories": categories, "t_us": [0.0, 250.0, 500.0, 750.0], "bytes": rows,
                "peak_bytes": 17 << 20, "peak_us": 500.0, "peak_by_category": dict(zip(categories, rows[2]))}
    trace = {"traceEvents": [{"ph": "X", "cat": "kernel", "name": "neuron::k", "pid": 2, "tid": 0, "ts": 0.0,
                              "dur": 1000.0}],
             "neuron": {"memory_timeline": {"0": timeline}}}
    path = write_html_report([trace], tmp_path / "categories.html")
    open_report(browser, path, "tab=memory")
    assert browser.evaluate("tnx.profiles()[0].memoryCategories") == [{"device": 0, "peak": 17 << 20, "samples": 4}]
    headings = browser.evaluate("[...document.querySelectorAll('#tab-memory h2')].map(h => h.textContent)")
    assert headings[0] == "NC0 memory by category — peak 17.0 MiB at 500.0 us", headings
    legend = browser.evaluate("document.querySelector('#tab-memory .legend').innerText")
    assert all(c.replace("_", " ") in legend for c in categories), legend
    # The optimizer state's band (goldenrod) sits above the parameters' (green) from the step on.
    geo = browser.evaluate("""(() => { const c = document.querySelector('#tab-memory canvas');
        c.scrollIntoView(); const r = c.getBoundingClientRect(); return {left: r.left, top: r.top, width: r.width}; })()""")
    x = geo["left"] + 70 + (geo["width"] - 86) * 0.9  # t = 900 us of 1000, after the last sample
    plot_h, max_bytes = 220 - 12 - 28, (17 << 20) * 1.1
    y_of = lambda b: geo["top"] + 12 + plot_h - b / max_bytes * plot_h  # noqa: E731
    for b, colour in ((2 << 20, (0x2e, 0x7d, 0x32)), (8 << 20, (0xc9, 0xa2, 0x27))):
        png = browser.screenshot({"x": x, "y": y_of(b), "width": 1, "height": 1})
        _, _, px, bpp = decode_png(png)
        assert all(abs(px[0][k] - (255 + 3 * colour[k]) / 4) < 40 for k in range(3)), (b, list(px[0][:3]))
    assert browser.errors() == []
