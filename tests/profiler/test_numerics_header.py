"""The numerics mode in report headers (issue 16 item 4): a trace of a TORCHNEURON_EXT_NUMERICS=trainium
run says so at the top of `torchneuron-ext report` and of the HTML report's summary; a host run's
reports do not mention numerics. (tests/aten/test_numerics.py checks that the exported trace records
the mode.)"""
import pytest
from expecttest import TestCase

from torchneuron_ext.profiler import format_report, summarize_trace
from torchneuron_ext.profiler.html import write_html_report
from torchneuron_ext.profiler.html.headless import HeadlessChromium, find_chromium
from torchneuron_ext.profiler.html.page import profile_payload


def _trace(numerics=None):
    trace = {"traceEvents": [{"ph": "X", "cat": "kernel", "name": "neuron::add", "ts": 0.0, "dur": 5.0,
                              "pid": 1, "tid": 0, "args": {"tier": "native", "device": 0}}]}
    if numerics is not None:
        trace["neuron"] = {"numerics": numerics}
    return trace


class TestNumericsHeader(TestCase):
    def test_text_report_header(self):
        head = format_report(summarize_trace(_trace("trainium"))).splitlines()[:3]
        self.assertExpectedInline("\n".join(head), """\
neuron profile report
=====================
numerics             trainium (TORCHNEURON_EXT_NUMERICS: float64 computed in float32, int64 in int32, fresh memory NaN / 0xA5)""")
        for host in (_trace("host"), _trace()):
            self.assertEqual(summarize_trace(host).numerics, "host")
            self.assertNotIn("numerics", format_report(summarize_trace(host)))

    def test_html_payload_carries_the_mode(self):
        self.assertEqual(profile_payload(_trace("trainium"))["summary"]["numerics"], "trainium")
        self.assertEqual(profile_payload(_trace())["summary"]["numerics"], "host")


@pytest.mark.skipif(find_chromium() is None, reason="no Chromium: apt-get install -y chromium (or set $CHROMIUM)")
def test_html_summary_names_trainium_numerics(tmp_path):
    cards = {}
    with HeadlessChromium(width=1200, height=800) as b:
        for mode in ("trainium", "host"):
            path = tmp_path / f"{mode}.html"
            write_html_report([_trace(mode)], str(path))
            b.open(f"file://{path}", "window.tnx && (window.tnx.ready || window.tnx.error)")
            assert b.evaluate("window.tnx.error") is None
            cards[mode] = b.evaluate(
                "[...document.querySelectorAll('#tab-summary .cards .card .k')].map(k => k.textContent + ': ' + "
                "k.nextSibling.textContent)")
    assert cards["trainium"][0] == "numerics: trainium (64-bit work in 32 bits)"
    assert not any(c.startswith("numerics") for c in cards["host"])
