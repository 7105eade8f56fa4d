"""Headless Chromium driven over the DevTools protocol, with nothing to install but the browser.

The report's browser tests and bench/html_viewer_load.py need a real browser. Chromium's
`--remote-debugging-pipe` speaks the DevTools protocol over two inherited file descriptors (3: we
write, 4: it writes; messages end in a NUL byte), so no websocket client, WebDriver or Node is
needed. Only what the tests use is wrapped: open a page, evaluate JavaScript, click, screenshot,
downloads, and the console errors, exceptions and network requests the page produced.
"""
from __future__ import annotations

import base64
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from typing import Any, Optional

_CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")


def find_chromium() -> Optional[str]:
    """The Chromium executable: $CHROMIUM if set, else the first of the usual names on PATH."""
    env = os.environ.get("CHROMIUM")
    if env:
        return env if os.path.isfile(env) and os.access(env, os.X_OK) else None
    for name in _CANDIDATES:
        path = shutil.which(name)
        if path:
            return path
    return None


class BrowserError(RuntimeError):
    pass


class HeadlessChromium:
    """One headless Chromium with one page. Use as a context manager; `close()` ends the browser."""

    # Flags that keep a sandboxed CI machine's Chromium from reaching for the network or a GPU, and
    # off /dev/shm (a container's is often 64 MiB; a million-event report needs more).
    FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--disable-default-apps", "--disable-extensions", "--mute-audio", "--hide-scrollbars",
             "--disable-dev-shm-usage", "--no-default-browser-check",
             "--disable-features=Translate,MediaRouter,OptimizationHints")

    def __init__(self, executable: Optional[str] = None, width: int = 1400, height: int = 900,
                 timeout: float = 60.0):
        exe = executable or find_chromium()
        if exe is None:
            raise BrowserError("no Chromium found: install it (Debian: apt-get install -y chromium) or set $CHROMIUM")
        self.timeout = timeout
        self._profile_dir = tempfile.mkdtemp(prefix="tnx-chromium-")
        self._stderr = tempfile.TemporaryFile()
        to_r, self._to_w = os.pipe()
        self._from_r, from_w = os.pipe()

        def wire_pipes() -> None:  # in the child: the pipe ends become fds 3 and 4
            a, b = os.dup(to_r), os.dup(from_w)
            os.dup2(a, 3)
            os.dup2(b, 4)

        # The pipes took the lowest free descriptors, so fds 3 and 4 are open here; pass_fds keeps
        # them (now our pipe ends) open across exec and closes everything else.

        self._proc = subprocess.Popen(
            [exe, *self.FLAGS, f"--user-data-dir={self._profile_dir}", f"--window-size={width},{height}",
             "--remote-debugging-pipe", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self._stderr,
            preexec_fn=wire_pipes, pass_fds=(3, 4))
        os.close(to_r)
        os.close(from_w)
        self._buf = b""
        self._next_id = 0
        self.events: list[dict] = []
        self._session: Optional[str] = None
        try:
            target = self.send("Target.createTarget", {"url": "about:blank"}, session=False)["targetId"]
            self._session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True},
                                      session=False)["sessionId"]
            for domain in ("Page", "Runtime", "Log", "Network"):
                self.send(domain + ".enable")
            self.send("Emulation.setDeviceMetricsOverride",
                      {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
        except Exception:
            self.close()
            raise

    # ------------------------------------------------------------------ protocol
    def _read_message(self, deadline: float) -> dict:
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BrowserError("timed out waiting for Chromium")
            ready, _, _ = select.select([self._from_r], [], [], min(left, 1.0))
            if not ready:
                if self._proc.poll() is not None:
                    raise BrowserError(f"Chromium exited with status {self._proc.returncode}: {self.stderr_tail()}")
                continue
            chunk = os.read(self._from_r, 1 << 20)
            if not chunk:
                raise BrowserError(f"Chromium closed the DevTools pipe: {self.stderr_tail()}")
            self._buf += chunk
        raw, self._buf = self._buf.split(b"\0", 1)
        return json.loads(raw)

    def send(self, method: str, params: Optional[dict] = None, session: bool = True,
             timeout: Optional[float] = None) -> dict:
        """Send one command and return its result; events that arrive meanwhile go to `events`."""
        self._next_id += 1
        msg: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session and self._session:
            msg["sessionId"] = self._session
        try:
            os.write(self._to_w, json.dumps(msg).encode() + b"\0")
        except BrokenPipeError:
            raise BrowserError(f"Chromium is gone: {self.stderr_tail()}") from None
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == msg["id"]:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error'].get('message')}")
                return reply.get("result", {})
            if "method" in reply:
                self.events.append(reply)

    def pump(self, seconds: float = 0.0) -> None:
        """Collect the events that arrive within `seconds`."""
        deadline = time.monotonic() + seconds
        while True:
            try:
                self.events.append(self._read_message(deadline))
            except BrowserError:
                if self._proc.poll() is not None:
                    raise
                return

    # ------------------------------------------------------------------ page
    def open(self, url: str, wait_for: Optional[str] = None, timeout: Optional[float] = None) -> float:
        """Navigate and, if given, wait until the JavaScript expression `wait_for` is truthy.
        Returns the seconds from navigation to that point."""
        t0 = time.perf_counter()
        result = self.send("Page.navigate", {"url": url})
        if result.get("errorText"):
            raise BrowserError(f"cannot open {url}: {result['errorText']}")
        if wait_for:
            self.wait_for(wait_for, timeout)
        return time.perf_counter() - t0

    def evaluate(self, expression: str, await_promise: bool = True) -> Any:
        """The value of a JavaScript expression in the page (JSON-serialisable values only)."""
        r = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                           "awaitPromise": await_promise})
        if "exceptionDetails" in r:
            d = r["exceptionDetails"]
            text = d.get("exception", {}).get("description") or d.get("text")
            raise BrowserError(f"JavaScript error in {expression[:80]!r}: {text}")
        return r.get("result", {}).get("value")

    def wait_for(self, expression: str, timeout: Optional[float] = None, interval: float = 0.02) -> Any:
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise BrowserError(f"timed out waiting for {expression!r}; page errors: {self.errors()}")
            time.sleep(interval)

    def click(self, x: float, y: float) -> None:
        """A real left click at page coordinates (CSS pixels), as a user would make it."""
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y, "button": "left",
                                                   "buttons": 1 if kind == "mousePressed" else 0,
                                                   "clickCount": 1 if kind != "mouseMoved" else 0})

    def drag(self, x0: float, y0: float, x1: float, y1: float, modifiers: int = 0, steps: int = 8) -> None:
        """Press at (x0, y0), move to (x1, y1) in `steps`, release; modifiers: 8 is Shift."""
        base = {"button": "left", "modifiers": modifiers}
        self.send("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": x0, "y": y0, **base, "buttons": 0})
        self.send("Input.dispatchMouseEvent", {"type": "mousePressed", "x": x0, "y": y0, **base, "buttons": 1,
                                               "clickCount": 1})
        for k in range(1, steps + 1):
            x, y = x0 + (x1 - x0) * k / steps, y0 + (y1 - y0) * k / steps
            self.send("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": x, "y": y, **base, "buttons": 1})
        self.send("Input.dispatchMouseEvent", {"type": "mouseReleased", "x": x1, "y": y1, **base, "buttons": 0,
                                               "clickCount": 1})

    def wheel(self, x: float, y: float, delta_y: float = 0.0, delta_x: float = 0.0) -> None:
        self.send("Input.dispatchMouseEvent", {"type": "mouseWheel", "x": x, "y": y, "deltaX": delta_x,
                                               "deltaY": delta_y})

    def screenshot(self, clip: Optional[dict] = None) -> bytes:
        """PNG bytes of the page, or of `clip` ({x, y, width, height} in CSS pixels)."""
        params: dict[str, Any] = {"format": "png"}
        if clip:
            params["clip"] = {**clip, "scale": 1}
        return base64.b64decode(self.send("Page.captureScreenshot", params)["data"])

    def allow_downloads(self, directory: str) -> None:
        self.send("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": directory,
                                                  "eventsEnabled": True}, session=False)

    def wait_download(self, timeout: Optional[float] = None) -> str:
        """The file name of the next completed download."""
        deadline = time.monotonic() + (timeout or self.timeout)
        names: dict[str, str] = {}
        seen = 0
        while time.monotonic() < deadline:
            for e in self.events[seen:]:
                if e.get("method") == "Browser.downloadWillBegin":
                    names[e["params"]["guid"]] = e["params"]["suggestedFilename"]
                elif e.get("method") == "Browser.downloadProgress" and e["params"].get("state") == "completed":
                    return names.get(e["params"]["guid"], e["params"]["guid"])
            seen = len(self.events)
            self.pump(0.1)
        raise BrowserError("no download completed")

    # ------------------------------------------------------------------ what the page did
    def errors(self) -> list[str]:
        """Console errors, uncaught exceptions and error log entries so far."""
        out = []
        for e in self.events:
            m, p = e.get("method"), e.get("params", {})
            if m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append("console." + p["type"] + ": " + " ".join(str(a.get("value", a.get("description", "")))
                                                                  for a in p.get("args", [])))
            elif m == "Runtime.exceptionThrown":
                d = p.get("exceptionDetails", {})
                out.append("exception: " + str(d.get("exception", {}).get("description") or d.get("text")))
            elif m == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                out.append("log: " + p["entry"].get("text", ""))
        return out

    def requests(self) -> list[str]:
        """URLs of every network request the page made."""
        return [e["params"]["request"]["url"] for e in self.events if e.get("method") == "Network.requestWillBeSent"]

    def stderr_tail(self, n: int = 2000) -> str:
        self._stderr.seek(0)
        return self._stderr.read().decode(errors="replace")[-n:]

    def close(self) -> None:
        if self._proc.poll() is None:
            try:
                self.send("Browser.close", session=False, timeout=5)
            except BrowserError:
                pass
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        for fd in (self._to_w, self._from_r):
            try:
                os.close(fd)
            except OSError:
                pass
        self._stderr.close()
        shutil.rmtree(self._profile_dir, ignore_errors=True)

    def __enter__(self) -> "HeadlessChromium":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
