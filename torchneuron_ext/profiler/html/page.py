"""One self-contained HTML report from one or more traces: the viewer's HTML, CSS and JavaScript
inlined, the traces embedded, nothing fetched (a Content-Security-Policy forbids the network)."""
from __future__ import annotations

import json
import os
import re
from importlib import resources
from typing import Optional, Sequence, Union

from ...instrumentation import trace_schema as _trace_schema
from ..projection import ProjectedTimeline, add_projected_lanes
from ..report import summarize_trace
from ..trace_events import ClassifiedTrace, classify, read_trace
from .findings import find, kernel_findings
from .kernel_view import kernel_views
from .model import build_profile

# A trace file, a profile directory (its newest trace), a trace dict, or a trace classified already
# (trace_events.classify), which is not classified again.
TraceLike = Union[str, os.PathLike, dict, ClassifiedTrace]


def _asset(name: str) -> str:
    return resources.files(__package__).joinpath("assets", name).read_text(encoding="utf-8")


def _tier_css() -> str:
    """The tier badges' colours, one rule per tier of the tier enumerator."""
    return "".join(f".tier-{t} {{ background: {bg}; color: {fg}; }}\n" for t, (bg, fg) in _trace_schema.TIER_COLOURS.items())


def _default_name(trace: TraceLike, index: int, path: Optional[str]) -> str:
    if path is None:
        return f"profile {index + 1}"
    # .../demo/naive/<host>_pid_<pid>/<stamp>/trace.json -> "naive"; plain files keep their stem.
    parts = os.path.normpath(path).split(os.sep)
    if len(parts) >= 4 and parts[-1] == "trace.json" and "_pid_" in parts[-3]:
        return parts[-4]
    stem = os.path.splitext(os.path.basename(path))[0]
    return stem if stem != "trace" or len(parts) < 2 else parts[-2]


def _classified(trace: TraceLike) -> tuple[ClassifiedTrace, Optional[ProjectedTimeline]]:
    """The trace classified once, for both the summary and the timeline, with its projected lanes;
    and their projection when it was made here."""
    c = trace if isinstance(trace, ClassifiedTrace) else None
    if c is None:
        data, path = read_trace(trace)
        events = data.get("traceEvents") if isinstance(data, dict) else None
        if not isinstance(events, list) or any(isinstance(e, dict) and e.get("cat") == _trace_schema.CAT_PROJECTED
                                               for e in events):
            return classify(data, path=path), None
    elif c.has_cat(_trace_schema.CAT_PROJECTED):
        return c, None
    else:
        data, path = c.trace, c.path
    # A trace from torch's own export_chrome_trace (NeuronProfiler adds these at export): its
    # projected lanes, on a copy (the caller's dict stays as it was).
    data = dict(data, traceEvents=list(data["traceEvents"]))
    projection = add_projected_lanes(data)
    return classify(data, path=path), projection


def profile_payload(trace: TraceLike, name: Optional[str] = None, index: int = 0) -> dict:
    """Everything the page shows about one trace: events in columns, summary, findings, op table.
    The summary and the timeline read one classification of the trace."""
    classified, projection = _classified(trace)
    path = classified.path
    summary = summarize_trace(classified, projection=projection)
    profile = build_profile(classified, name or _default_name(trace, index, path), source=path or "")
    profile["summary"] = summary.to_dict()
    profile["summary"].pop("ops")
    profile["ops"] = [
        {"name": r.name, "tier": r.tier, "calls": r.calls, "host_us": r.host_us, "device_us": r.device_us,
         "bytes": r.bytes, "projected_us": r.projected_us, "bound": r.bound} for r in summary.ops
    ]
    findings = find(summary)
    views = kernel_views(classified)
    if views:
        # A kernel trace of its own (nki.profile) has no device kernels: its findings are the kernels'.
        findings = [f for f in findings if f.key != "no_device_activity"] + kernel_findings(views)
    profile["findings"] = [f.to_dict() for f in findings]
    profile["kernels"] = [v.to_dict() for v in views]
    profile["memoryCategories"] = memory_categories(classified.trace, profile["t0"])
    return profile


def memory_categories(trace: dict, t0: float) -> list[dict]:
    """The trace's memory timelines by category (NeuronProfiler writes them when the session recorded
    memory, shapes and stacks), one per core, their times made relative to the page's start `t0`."""
    neuron = trace.get("neuron") if isinstance(trace, dict) else None
    timelines = neuron.get("memory_timeline") if isinstance(neuron, dict) else None
    if not isinstance(timelines, dict):
        return []
    out = []
    for key in sorted(timelines, key=lambda k: int(k)):
        m = timelines[key]
        out.append(dict(m, t_us=[t - t0 for t in m["t_us"]], peak_us=m["peak_us"] - t0))
    return out


def build_html(traces: Sequence[TraceLike], names: Optional[Sequence[Optional[str]]] = None,
               title: str = "neuron profile") -> str:
    """The report page for `traces` (paths to trace.json files or profile directories, or trace
    dicts); `names` label them (default: the demo variant or the file name)."""
    if not traces:
        raise ValueError("build_html needs at least one trace")
    names = list(names) if names is not None else [None] * len(traces)
    if len(names) != len(traces):
        raise ValueError(f"{len(names)} names for {len(traces)} traces")
    profiles = [profile_payload(t, n, i) for i, (t, n) in enumerate(zip(traces, names))]
    seen: dict[str, int] = {}
    for p in profiles:  # two traces of the same name stay tellable apart in the pickers
        if p["name"] in seen:
            seen[p["name"]] += 1
            p["name"] = f"{p['name']} ({seen[p['name']]})"
        else:
            seen[p["name"]] = 1
    payload = json.dumps({"title": title, "profiles": profiles}, separators=(",", ":"), allow_nan=False)
    # Inside <script>, "</script" or "<!--" would change how the HTML parser reads on; JSON only has
    # "<" inside strings, where \u003c is the same character.
    payload = payload.replace("<", "\\u003c")
    parts = {"/*TNX_CSS*/": _asset("viewer.css") + _tier_css(), "__TNX_TITLE__": _html_escape(title), "/*TNX_DATA*/": payload,
             "/*TNX_JS*/": _asset("viewer.js").replace("</script", "<\\/script")}
    # One pass, so a placeholder-like string inside the data is never substituted.
    return re.sub(r"/\*TNX_(?:CSS|DATA|JS)\*/|__TNX_TITLE__", lambda m: parts[m.group(0)], _asset("viewer.html"))


def _html_escape(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def write_html_report(traces: Sequence[TraceLike], out: Union[str, os.PathLike],
                      names: Optional[Sequence[Optional[str]]] = None, title: str = "neuron profile") -> str:
    """Write the report page to `out`; returns its path."""
    html = build_html(traces, names, title)
    out = os.fspath(out)
    parent = os.path.dirname(os.path.abspath(out))
    os.makedirs(parent, exist_ok=True)
    tmp = out + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(html)
    os.replace(tmp, out)
    return out
