"""Kineto prints two marker lines on stderr each time a capture starts and stops
(``USDT:... SyncActivityProfilerHandler.cpp:52] profiler_start`` / ``profiler_stop``): tracepoints for
system tools, not news for a person reading the output. Its log level cannot drop them alone (they are
its highest severity, above ERROR), so our commands route stderr's file descriptor through a temporary
file while Kineto starts and stops, and write everything back except those two lines: Kineto's own
warnings and errors, and anything else printed meanwhile, still reach stderr.
"""
from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
from typing import Any, Iterator

_MARKER = re.compile(rb"^USDT:[^\n]*\] profiler_(start|stop)\r?$")


def _drop_markers(text: bytes) -> bytes:
    return b"".join(line for line in text.splitlines(keepends=True) if not _MARKER.match(line.rstrip(b"\n")))


@contextlib.contextmanager
def without_kineto_markers() -> Iterator[None]:
    """Inside, stderr (file descriptor 2) goes to a temporary file; on leaving, its lines are written to
    the real stderr, less Kineto's start/stop markers. Meant for the short calls that start or stop a
    capture, not for a whole program: stderr is held back until the block ends."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # no file descriptor 2 (an embedded interpreter): nothing to filter
        yield
        return
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)
        try:
            yield
        finally:
            try:
                sys.stderr.flush()
            except ValueError:
                pass
            os.dup2(saved, 2)
            os.close(saved)
            held.seek(0)
            rest = _drop_markers(held.read())
            if rest:
                os.write(2, rest)


@contextlib.contextmanager
def profiling(prof: Any) -> Iterator[Any]:
    """``with profiling(torch.profiler.profile(...)) as prof:`` is ``with torch.profiler.profile(...)``
    without Kineto's marker lines (the trace handler runs at the exit, its output written back as usual)."""
    with without_kineto_markers():
        entered = prof.__enter__()
    try:
        yield entered
    except BaseException:
        with without_kineto_markers():
            if not prof.__exit__(*sys.exc_info()):
                raise
    else:
        with without_kineto_markers():
            prof.__exit__(None, None, None)
