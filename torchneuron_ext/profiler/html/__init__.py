"""The HTML report: one self-contained page (summary and findings, timeline with the framework,
runtime, hardware, transfer and memory lanes, op table, HBM usage, NKI kernels' instruction-level view, profiles
side by side), written
by `torchneuron-ext report PATH --html OUT.html` and served by `torchneuron-ext view PATH`."""
from .findings import Finding, find, kernel_findings
from .page import build_html, write_html_report
from .server import serve, serve_html

__all__ = ["Finding", "build_html", "find", "kernel_findings", "serve", "serve_html", "write_html_report"]
