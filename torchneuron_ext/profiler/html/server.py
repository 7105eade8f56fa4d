"""`torchneuron-ext view`: the HTML report served on localhost, for machines where opening a file in
a browser is awkward (a remote host reached through an SSH tunnel, a container)."""
from __future__ import annotations

import http.server
import sys
from typing import Callable, Optional, Sequence

from .page import TraceLike, build_html


def make_server(html: str, host: str = "127.0.0.1", port: int = 0) -> http.server.ThreadingHTTPServer:
    """An HTTP server answering GET / with `html`; port 0 picks a free port (see server_address)."""
    body = html.encode("utf-8")

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (the http.server API)
            path = self.path.split("?", 1)[0].split("#", 1)[0]
            if path not in ("/", "/index.html", "/report.html"):
                self.send_error(404, "the report is at /")
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args) -> None:  # requests are not news
            pass

    return http.server.ThreadingHTTPServer((host, port), Handler)


def serve_html(html: str, host: str = "127.0.0.1", port: int = 0,
               on_ready: Optional[Callable[[str], None]] = None) -> None:
    """Serve `html` until interrupted; `on_ready(url)` is called once the server listens (by
    default the address is printed)."""
    server = make_server(html, host, port)
    bound_host, bound_port = server.server_address[:2]
    shown = f"[{bound_host}]" if ":" in str(bound_host) else bound_host
    url = f"http://{shown}:{bound_port}/"
    if on_ready is None:
        print(f"Serving the report at {url} (Ctrl+C to stop)", flush=True)
    else:
        on_ready(url)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        print("stopped", file=sys.stderr)
    finally:
        server.server_close()


def serve(traces: Sequence[TraceLike], host: str = "127.0.0.1", port: int = 0,
          names: Optional[Sequence[Optional[str]]] = None, title: str = "neuron profile",
          on_ready: Optional[Callable[[str], None]] = None) -> None:
    """Build the report of `traces` and serve it until interrupted (see serve_html)."""
    serve_html(build_html(traces, names, title), host, port, on_ready)


__all__ = ["make_server", "serve", "serve_html"]
