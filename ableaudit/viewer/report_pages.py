"""The report's own pages, served under ``/report/``.

A build renders the report beside the published copy (``published/<name>/report/``,
``ableaudit.report.default_out_dir``); the viewer serves that folder when it was rendered
from the copy as it is now. Otherwise (no report yet, or a copy published after it) the
viewer renders the report itself with ``ableaudit.report.render_report`` into a folder of its
own, and again whenever the copy changes. Each page is served as the report wrote it, with
one link back to the viewer in its header.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
from pathlib import Path

from ableaudit.report import default_out_dir, render_report

VIEWER_LINK = (
    '<header class="site-header">\n  <p class="brand"><a href="/">Back to the viewer</a></p>'
)
TYPES = {".html": "text/html; charset=utf-8", ".css": "text/css", ".js": "text/javascript"}


class ReportPages:
    """The report folder that matches the published copy, rendered when there is none."""

    def __init__(self, published: Path) -> None:
        self.published = published
        self.lock = threading.Lock()
        self.own: Path | None = None
        self.own_stamp: tuple[int, int] | None = None

    def _stamp(self) -> tuple[int, int]:
        st = self.published.stat()
        return (st.st_ino, st.st_mtime_ns)

    def folder(self) -> Path:
        """The report of the copy as it is now (rendered here if the build's is older)."""
        beside = default_out_dir(self.published)
        index = beside / "index.html"
        if index.is_file() and index.stat().st_mtime_ns >= self.published.stat().st_mtime_ns:
            return beside
        with self.lock:
            stamp = self._stamp()
            if self.own is None or self.own_stamp != stamp:
                if self.own is None:
                    self.own = Path(tempfile.mkdtemp(prefix="ableaudit-view-report-"))
                render_report(self.published, self.own / "report")
                self.own_stamp = stamp
            return self.own / "report"

    def page(self, rel: str) -> tuple[bytes, str] | None:
        """The bytes and content type of ``rel`` (a path under the report), or None when the
        report has no such page (a hidden file, or a path that leaves the folder)."""
        root = self.folder().resolve()
        rel = rel or "index.html"
        target = (root / rel).resolve()
        if (
            not target.is_relative_to(root)
            or any(part.startswith(".") for part in target.relative_to(root).parts)
            or target.suffix not in TYPES
            or not target.is_file()
        ):
            return None
        body = target.read_bytes()
        if target.suffix == ".html":
            body = body.replace(b'<header class="site-header">', VIEWER_LINK.encode("utf-8"), 1)
        return body, TYPES[target.suffix]

    def close(self) -> None:
        if self.own is not None:
            shutil.rmtree(self.own, ignore_errors=True)
