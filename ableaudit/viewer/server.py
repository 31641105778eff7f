"""The HTTP side of the viewer: the standard library's threaded server, bound to 127.0.0.1.

A request is answered only when its Host names this server, so a page of another site
cannot reach the viewer through a name that resolves to 127.0.0.1; a POST must pass the
same-origin and token checks of ``ableaudit.viewer.app``. Requests are not logged; a page
that fails prints its traceback to the terminal.
"""

from __future__ import annotations

import sys
import traceback
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from ableaudit.viewer import DEFAULT_PORT, HOST, pages
from ableaudit.viewer.app import MAX_FORM_BYTES, Response, Viewer
from ableaudit.viewer.sources import Sources, ViewerError


class Handler(BaseHTTPRequestHandler):
    """Routes a request to its page (ableaudit.viewer.pages) and writes the answer."""

    server_version = "ableaudit-view"
    viewer: Viewer  # set on the subclass ``make_server`` builds

    def log_message(self, format: str, *args) -> None:  # noqa: A002 - the base class's name
        """Quiet: the terminal shows the address and errors, not every request."""

    def _send(self, response: Response) -> None:
        self.send_response(response.status)
        self.send_header("Content-Type", response.content_type)
        self.send_header("Content-Length", str(len(response.body)))
        self.send_header("Content-Security-Policy", response.csp)
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "same-origin")
        self.send_header("Cache-Control", "no-store")
        for name, value in response.headers.items():
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(response.body)

    def _answer(self, method: str) -> None:
        viewer = self.viewer
        if self.headers.get("Host") not in viewer.hosts:
            self._send(
                Response(
                    HTTPStatus.MISDIRECTED_REQUEST,
                    b"This viewer answers only at its own address.",
                    "text/plain; charset=utf-8",
                )
            )
            return
        url = urlsplit(self.path)
        query = parse_qs(url.query, keep_blank_values=True)
        try:
            if method == "POST":
                response = self._post(url.path)
            else:
                response = pages.route(viewer, url.path, query, self.headers)
        except Exception:
            traceback.print_exc(file=sys.stderr)
            response = viewer.message(
                500,
                "The viewer failed",
                "This page failed; the terminal running `ableaudit view` shows why.",
            )
        self._send(response)

    def _post(self, path: str) -> Response:
        viewer = self.viewer
        if path != "/rate":
            return viewer.message(404, "Not found", "Only a rating is sent to this address.")
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        kind = (self.headers.get("Content-Type") or "").split(";")[0].strip()
        if kind != "application/x-www-form-urlencoded" or not 0 <= length <= MAX_FORM_BYTES:
            return viewer.message(400, "Not a rating", "Send the rating from its form.")
        form = parse_qs(self.rfile.read(length).decode("utf-8", "replace"))
        given = (form.get("token") or [""])[-1]
        if not viewer.same_origin(self.headers) or not viewer.token_ok(given):
            return viewer.message(
                403,
                "Rating refused",
                "This rating did not come from a form of this viewer (reload the rating page "
                "and send it again).",
            )
        return pages.rate_post(viewer, form)

    def do_GET(self) -> None:  # noqa: N802 - the base class's name
        self._answer("GET")

    def do_HEAD(self) -> None:  # noqa: N802
        self._answer("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._answer("POST")


def make_server(sources: Sources, port: int = DEFAULT_PORT) -> tuple[ThreadingHTTPServer, Viewer]:
    """A server bound to 127.0.0.1:``port`` (0: a free port), not yet serving."""
    viewer = Viewer(sources, port)
    handler = type("ViewerHandler", (Handler,), {"viewer": viewer})
    try:
        server = ThreadingHTTPServer((HOST, port), handler)
    except OSError as err:
        raise ViewerError(
            f"cannot listen on {HOST}:{port} ({err.strerror or err}); pass --port with a free "
            "port, or --port 0 for any free one"
        ) from None
    server.daemon_threads = True
    viewer.port = server.server_address[1]
    return server, viewer


def url_of(viewer: Viewer) -> str:
    return f"http://{HOST}:{viewer.port}/"


def serve(sources: Sources, port: int = DEFAULT_PORT) -> None:
    """Serve until Ctrl-C (or SIGTERM), saying where, what it reads and where ratings land."""
    server, viewer = make_server(sources, port)
    print(f"Reading {sources.published} (the published copy, read-only)")
    if sources.live is not None:
        print(f"Ratings land in {sources.live} (opened only to land one)")
    else:
        print("No live warehouse beside the copy: rating is off")
    print(f"Open {url_of(viewer)} in a browser; Ctrl-C stops the viewer.", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        print("\nViewer stopped.")
    finally:
        server.server_close()
        viewer.report.close()
