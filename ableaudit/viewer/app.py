"""The viewer's state and what every page shares: its templates, its token, the checks a
request passes, and the answer a page gives.

Every page is rendered on the server from Jinja2 templates (autoescaped: an answer is a
model's output and is shown as text, never as markup), so filters and forms work without a
script. A rating is landed only from a form this server wrote: its POST carries the server's
token, and a browser's Origin or Sec-Fetch-Site header, when sent, must say the same origin.
"""

from __future__ import annotations

import datetime as dt
import hmac
import secrets
import threading
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from importlib import resources
from urllib.parse import quote, unquote

from jinja2 import Environment, PackageLoader, StrictUndefined

from ableaudit.report import format as fmt
from ableaudit.viewer import HOST
from ableaudit.viewer.report_pages import ReportPages
from ableaudit.viewer.sources import Sources

MAX_FORM_BYTES = 64 * 1024
ANNOTATOR_COOKIE = "ableaudit_annotator"
CSP = (
    "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'"
)
REPORT_CSP = "frame-ancestors 'none'"  # the report's pages carry their own, stricter, policy


@dataclass
class Response:
    """What a page answers."""

    status: int = 200
    body: bytes = b""
    content_type: str = "text/html; charset=utf-8"
    headers: dict[str, str] = field(default_factory=dict)
    csp: str = CSP


def _environment() -> Environment:
    env = Environment(
        loader=PackageLoader("ableaudit.viewer", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.globals.update(num=fmt.number, signed=fmt.signed, pct=fmt.pct, count=fmt.count)
    env.globals.update(pvalue=fmt.pvalue, interval=fmt.interval, missing=fmt.missing)
    env.filters["qs"] = lambda fields: "&".join(
        f"{quote(str(k), safe='')}={quote(str(v), safe='')}" for k, v in fields.items()
    )
    return env


def stylesheet() -> bytes:
    """The report's stylesheet and the viewer's additions, served as one file."""
    report = resources.files("ableaudit.report").joinpath("static", "report.css").read_text()
    own = resources.files("ableaudit.viewer").joinpath("static", "viewer.css").read_text()
    return (report + "\n" + own).encode("utf-8")


class Viewer:
    """One viewer: what it reads, where ratings land, its token and its templates."""

    def __init__(self, sources: Sources, port: int) -> None:
        self.sources = sources
        self.port = port
        self.token = secrets.token_urlsafe(32)
        self.env = _environment()
        self.report = ReportPages(sources.published)
        self.css = stylesheet()
        self.rated: dict[tuple[str, str], set[str]] = {}
        """Items each (annotator, kind) rated here since the viewer started: the copy holds
        them only after the next build."""
        self.rated_lock = threading.Lock()

    @property
    def hosts(self) -> set[str]:
        return {f"{HOST}:{self.port}", f"localhost:{self.port}"}

    def remember(self, annotator: str, kind: str, item_id: str) -> None:
        with self.rated_lock:
            self.rated.setdefault((annotator, kind), set()).add(item_id)

    def rated_by(self, annotator: str, kind: str) -> set[str]:
        with self.rated_lock:
            return set(self.rated.get((annotator, kind), set()))

    def page(self, template: str, status: int = 200, **context) -> Response:
        try:
            built = dt.datetime.fromtimestamp(self.sources.published.stat().st_mtime)
        except OSError:  # the copy is being replaced: the page says so without a time
            built = None
        html = self.env.get_template(template).render(
            copy_name=self.sources.published.name,
            built=built.strftime("%Y-%m-%d %H:%M") if built else "at an unknown time",
            can_rate=self.sources.live is not None,
            token=self.token,
            **context,
        )
        return Response(status, html.encode("utf-8"))

    def message(self, status: int, title: str, text: str) -> Response:
        return self.page("message.html", status, title=title, text=text, current="")

    def same_origin(self, headers) -> bool:
        """A POST from a page of this server (or from a client that sends no browser headers)."""
        origin = headers.get("Origin")
        if origin is not None and origin not in {f"http://{h}" for h in self.hosts}:
            return False
        site = headers.get("Sec-Fetch-Site")
        return site is None or site in ("same-origin", "none")

    def token_ok(self, given: str) -> bool:
        return hmac.compare_digest(given.encode(), self.token.encode())


def annotator_cookie(headers) -> str:
    """The annotator id a previous rating left in this browser, or ''."""
    cookie = SimpleCookie()
    try:
        cookie.load(headers.get("Cookie") or "")
    except Exception:  # a malformed cookie header reads as none
        return ""
    morsel = cookie.get(ANNOTATOR_COOKIE)
    return unquote(morsel.value) if morsel else ""


def set_annotator_cookie(annotator: str) -> str:
    return (
        f"{ANNOTATOR_COOKIE}={quote(annotator, safe='')}; Path=/; Max-Age=31536000; "
        "SameSite=Strict; HttpOnly"
    )
