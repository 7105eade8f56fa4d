"""The HTML report as a file: self-contained, safe against the trace's own strings, written by
`torchneuron-ext report --html` and served by `torchneuron-ext view`."""
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import urllib.error
import urllib.request

import pytest
import torch
from expecttest import TestCase

from torchneuron_ext.profiler import summarize_trace
from torchneuron_ext.cli import main
from torchneuron_ext.profiler.html import build_html, write_html_report
from torchneuron_ext.profiler.html.server import make_server
from torchneuron_ext.profiler.html.page import profile_payload

from .conftest import neuron_profile


def _trace(events):
    return {"traceEvents": events}


def _kernel(name, ts, dur, tier="native"):
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 0x4E43, "tid": 0, "ts": ts, "dur": dur,
            "args": {"tier": tier, "device": 0, "bytes": 64}}


def _payload(html):
    m = re.search(r'<script type="application/json" id="tnx-data">(.*?)</script>', html, re.S)
    assert m, "no embedded data"
    return json.loads(m.group(1))


@pytest.fixture(scope="module")
def trace_dir(tmp_path_factory):
    x = torch.randn(32, 32, device="neuron")
    with neuron_profile(tmp_path_factory.mktemp("prof")) as exporter:
        (x @ x).relu().cpu()
    return exporter.last_export_dir


def test_page_is_self_contained(trace_dir):
    html = build_html([trace_dir])
    # Nothing that a browser would fetch: no external scripts, styles, images, fonts or frames.
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html, re.I)
    assert not re.search(r"@import|url\(\s*['\"]?(https?:)?//", html, re.I)
    assert "Content-Security-Policy" in html and "default-src 'none'" in html
    for placeholder in ("/*TNX_CSS*/", "/*TNX_JS*/", "/*TNX_DATA*/", "__TNX_TITLE__"):
        assert placeholder not in html
    data = _payload(html)
    (p,) = data["profiles"]
    summary = summarize_trace(trace_dir)
    assert p["summary"]["kernels"] == summary.kernels and p["summary"]["verdict"] == summary.verdict
    assert [r["name"] for r in p["ops"]] == [r.name for r in summary.ops]
    assert p["findings"] and all({"title", "detail", "advice"} <= f.keys() for f in p["findings"])


def test_trace_strings_cannot_break_out_of_the_page():
    evil = "</script><script>alert(1)</script><!--"
    html = build_html([_trace([_kernel("neuron::" + evil, 0, 5)])], names=[evil], title=evil + " /*TNX_JS*/")
    assert html.count("</script>") == 2  # the data element's and the viewer's, nothing more
    assert "<script>alert" not in html and "<!--" not in html
    data = _payload(html)
    assert data["title"] == evil + " /*TNX_JS*/"
    assert data["profiles"][0]["name"] == evil
    assert "aten::" + evil in [r["name"] for r in data["profiles"][0]["ops"]] or \
        "neuron::" + evil in data["profiles"][0]["strings"]
    assert "<title>&lt;/script&gt;" in html


def test_names_of_several_profiles():
    t = _trace([_kernel("neuron::mm", 0, 5)])
    html = build_html([t, t, t], names=["run", "run", None])
    assert [p["name"] for p in _payload(html)["profiles"]] == ["run", "run (2)", "profile 3"]
    with pytest.raises(ValueError, match="2 names for 3 traces"):
        build_html([t, t, t], names=["a", "b"])
    with pytest.raises(ValueError, match="at least one trace"):
        build_html([])


def test_demo_layout_names_profiles_after_variants(tmp_path):
    d = tmp_path / "demo" / "torch_compile" / "host_pid_1" / "20260101_000000_000000"
    d.mkdir(parents=True)
    (d / "trace.json").write_text(json.dumps(_trace([_kernel("neuron::mm", 0, 5)])))
    assert profile_payload(str(d / "trace.json"))["name"] == "torch_compile"
    assert profile_payload(str(tmp_path / "demo"))["name"] == "torch_compile"  # newest trace under a directory
    other = tmp_path / "run7.json"
    other.write_text(json.dumps(_trace([])))
    assert profile_payload(str(other))["name"] == "run7"


class TestErrors(TestCase):
    def test_bad_inputs(self):
        with tempfile.TemporaryDirectory() as empty:
            with self.assertRaisesRegex(FileNotFoundError, "no trace .json file under"):
                build_html([empty])
        with self.assertRaisesRegex(ValueError, "no 'traceEvents' list"):
            build_html([{"x": 1}])

    def test_not_json(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "trace.json")
            with open(path, "w") as f:
                f.write("{not json")
            with self.assertRaises(ValueError) as ctx:
                build_html([path])
        self.assertExpectedInline(str(ctx.exception).replace(path, "PATH"),
                                  """PATH is not a Chrome trace (JSON): Expecting property name enclosed in double quotes: line 1 column 2 (char 1)""")


def test_write_is_atomic_and_creates_directories(tmp_path, trace_dir):
    out = tmp_path / "a" / "b" / "report.html"
    assert write_html_report([trace_dir], out) == str(out)
    assert out.read_text().startswith("<!DOCTYPE html>")
    assert os.listdir(out.parent) == ["report.html"]


def test_cli_report_html_and_errors(tmp_path, trace_dir, capsys):
    out = tmp_path / "r.html"
    assert main(["report", trace_dir, trace_dir, "--html", str(out), "--title", "two runs"]) == 0
    printed = capsys.readouterr().out
    assert printed.count("neuron profile report") == 2 and f"HTML report written to {out}" in printed
    data = _payload(out.read_text())
    assert data["title"] == "two runs" and len(data["profiles"]) == 2
    assert main(["report", str(tmp_path / "missing"), "--html", str(tmp_path / "x.html")]) == 2
    assert "torchneuron-ext report:" in capsys.readouterr().err and not (tmp_path / "x.html").exists()
    assert main(["report", trace_dir, "--html", str(out / "sub.html")]) == 2  # a file is in the way
    assert "torchneuron-ext report:" in capsys.readouterr().err
    assert main(["view", str(tmp_path / "missing")]) == 2
    assert "torchneuron-ext view:" in capsys.readouterr().err


def test_server_answers_with_the_page(trace_dir):
    server = make_server(build_html([trace_dir], title="served"))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}/"
    try:
        with urllib.request.urlopen(url + "#tab=ops", timeout=30) as resp:
            assert resp.headers["Content-Type"].startswith("text/html")
            assert _payload(resp.read().decode())["title"] == "served"
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(url + "other", timeout=30)
        assert err.value.code == 404
    finally:
        server.shutdown()
        server.server_close()


def test_cli_view_prints_its_address_and_serves(tmp_path, trace_dir):
    out = tmp_path / "r.html"
    write_html_report([trace_dir], out, title="from file")  # a report written before is served as it is
    proc = subprocess.Popen([sys.executable, "-m", "torchneuron_ext.cli", "view", str(out)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        m = re.search(r"http://127\.0\.0\.1:\d+/", line)
        assert m, (line, proc.stderr.read() if proc.poll() is not None else "")
        assert line.startswith("Serving the report at ")
        with urllib.request.urlopen(m.group(0), timeout=30) as resp:
            assert _payload(resp.read().decode())["title"] == "from file"
    finally:
        proc.terminate()
        proc.wait(timeout=30)
