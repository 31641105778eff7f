"""Render the report: a folder of static HTML pages that work offline, opened from disk.

``index.html`` holds the sections; ``evidence/<model>.html`` the pairs behind
the cells; ``significance.html`` and ``data-quality.html`` the long tables. Each
page is self-contained: its style (and, on evidence pages, a small filter
script) is inline, charts are inline SVG, and a Content-Security-Policy forbids
every request, so nothing is fetched even by mistake.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import itertools
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from markupsafe import Markup

from ableaudit.report import evidence as ev
from ableaudit.report import markup
from ableaudit.report import sections as sec
from ableaudit.report.marts import Marts, ReportError, resolve_source
from ableaudit.report.records import Page, Provenance, Source, Table

CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:; "
    "base-uri 'none'; form-action 'none'"
)


@dataclass(frozen=True)
class RenderedReport:
    """What ``render_report`` wrote."""

    index: Path
    """The report's entry page (open it in a browser)."""
    pages: list[Path]
    """Every page written, the index first."""
    source: Path
    """The warehouse file read."""


def _environment() -> Environment:
    env = Environment(
        loader=PackageLoader("ableaudit.report", "templates"),
        autoescape=select_autoescape(["html"]),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.globals["is_table"] = lambda b: isinstance(b, Table)
    env.globals["kind"] = lambda b: type(b).__name__
    env.globals["is_source"] = lambda s: isinstance(s, Source)
    env.globals["value"] = markup.value
    env.globals["cells"] = markup.cells
    return env


def _static(name: str) -> str:
    return resources.files("ableaudit.report").joinpath("static", name).read_text(encoding="utf-8")


def default_out_dir(source: Path) -> Path:
    """Beside the warehouse copy it reads, under its name (``published/<name>/report/`` for the
    published copy of ``<name>.duckdb``), so two warehouses published into one folder keep their own."""
    return source.parent / source.stem / "report"


def render_report(
    warehouse: str | os.PathLike | None = None,
    out_dir: str | os.PathLike | None = None,
    max_pairs: int = ev.DEFAULT_MAX_PAIRS,
) -> RenderedReport:
    """Render the report of a built warehouse (its published copy when there is one) into ``out_dir``.

    The folder is written under a temporary name and then swapped in, so a reader
    never sees half a report. Nothing but the warehouse file is read.
    """
    source = resolve_source(warehouse)
    out = Path(out_dir).expanduser().resolve() if out_dir else default_out_dir(source)
    marts = Marts(source)
    try:
        pages, kept = _pages(marts, max_pairs, _Previous(out))
    finally:
        marts.close()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        tmp.chmod(0o755)  # mkdtemp makes it private; the report is for reading
        for page in pages:
            target = tmp / page.path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(page.html, encoding="utf-8")
        (tmp / KEPT_PAGES).write_text(json.dumps(kept, indent=1, sort_keys=True), encoding="utf-8")
        old = out.parent / f".{out.name}.old.{os.getpid()}"
        if out.exists():
            os.replace(out, old)
        os.replace(tmp, out)
        shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    written = [out / p.path for p in pages]
    return RenderedReport(index=written[0], pages=written, source=source)


KEPT_PAGES = ".evidence-pages.json"
"""In the report folder: the key of each evidence page whose main part a later report may
keep (``evidence.page_keys``), with its path and the ids of its pairs."""

_MAIN_START = '<main id="main" tabindex="-1">\n<h1>'
_PROVENANCE_START = '<script type="application/json" id="provenance">'


def code_digest() -> str:
    """The digest of the report's own code (its modules, templates and static files) and of
    the libraries that write its pages: a page's main part is kept only under the same."""
    from importlib.metadata import version

    libraries = " ".join(version(name) for name in ("jinja2", "markupsafe", "pandas"))
    digest = hashlib.sha256(libraries.encode())
    root = Path(str(resources.files("ableaudit.report")))
    files = sorted(
        (str(p.relative_to(root)), p)
        for p in root.rglob("*")
        if p.is_file() and p.suffix in (".py", ".html", ".css", ".js")
    )
    for name, path in files:
        digest.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


class _Previous:
    """The main parts of the evidence pages the report in ``out`` wrote, by key."""

    def __init__(self, out: Path) -> None:
        self.out = out
        try:
            recorded = json.loads((out / KEPT_PAGES).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            recorded = {}
        self.recorded = recorded if isinstance(recorded, dict) else {}

    def __call__(self, key: str) -> ev.Kept | None:
        entry = self.recorded.get(key)
        if not isinstance(entry, dict):
            return None
        try:
            html = (self.out / entry["path"]).read_text(encoding="utf-8")
            anchors = set(entry["anchors"])
        except (OSError, KeyError, TypeError, ValueError):
            return None
        start = html.find(_MAIN_START)
        start = html.find("</h1>\n", start) if start >= 0 else -1
        end = html.rfind("</main>")
        prov = html.find(_PROVENANCE_START, end)
        prov_end = html.find("</script>", prov)
        if min(start, end, prov, prov_end) < 0 or end < start:
            return None
        return ev.Kept(
            main=html[start + len("</h1>\n") : end],
            provenance=html[prov + len(_PROVENANCE_START) : prov_end],
            anchors=anchors,
        )


class _KeptProvenance:
    """The provenance list of a kept main part, written as it was."""

    def __init__(self, text: str) -> None:
        self.text = text

    def json(self) -> Markup:
        return Markup(self.text)


def _pages(
    marts: Marts, max_pairs: int, previous: _Previous | None = None
) -> tuple[list[Page], dict[str, dict]]:
    """Every page, and the record of the evidence pages a later report may keep."""
    if max_pairs < 1:
        raise ReportError(f"max_pairs must be at least 1 (got {max_pairs})")
    env = _environment()
    css = _static("report.css")
    built = dt.datetime.fromtimestamp(marts.path.stat().st_mtime).strftime("%Y-%m-%d %H:%M")
    common = {"css": css, "csp": CSP, "source_name": marts.path.name, "built": built}
    model_pages = ev.model_pages(marts, max_pairs, code_digest(), previous)
    ids = (f"chart-{i}" for i in itertools.count(1))
    ctx = sec.Context(marts, ev.Links(model_pages), ids)
    sections = sec.build_sections(ctx)
    pages = [Page("index.html", "ableaudit report")]
    pages[0].html = env.get_template("index.html").render(
        title="Disability-bias audit report",
        sections=sections,
        root="",
        prov=Provenance(),
        **common,
    )
    sig = marts.frame(
        "significance", "", "task, query_set, model_id, arm, metric, slice, slice_value"
    )
    pages.append(Page("significance.html", "Significance: every slice"))
    pages[-1].html = env.get_template("table_page.html").render(
        title="Significance: every slice",
        root="",
        prov=Provenance(),
        intro="Every row of the significance mart, per model, arm, metric and slice (overall, domain, "
        "disability): the t-test of the per-query mean shifts with Holm and Benjamini-Hochberg adjusted p, the "
        "95 % bootstrap interval of the mean shift (disability-aware minus neutral score, whole queries "
        "resampled), whether the shift is significant (adjusted p < 0.05 and an interval that excludes 0), "
        "the smallest shift the test detects with 80 % power, and the papers' t-test on pairs taken as "
        "independent.",
        table=Table(
            "Paired tests of every slice (significance)",
            sec.SIG_COLUMNS,
            sec.significance_rows(sig, ctx.names),
            row_headers=4,
        )
        if not sig.empty
        else None,
        empty="The significance mart is empty: it fills once pairs have scores.",
        **common,
    )
    dq = marts.frame("data_quality", "", "task, model_id, arm, run_id, area, metric, status")
    pages.append(Page("data-quality.html", "Data quality: every exclusion"))
    pages[-1].html = env.get_template("table_page.html").render(
        title="Data quality: every exclusion",
        root="",
        prov=Provenance(),
        intro="Every row of the data_quality mart: generations, pairs, scores, rates and verdicts counted by status, "
        "per run, model and arm. A rate leaves a row out only by the rule its status names.",
        table=Table(
            "Rows by status (data_quality)",
            ["Model", "Arm", "Task", "Run", "Area", "Metric", "Status", "Rows"],
            sec.data_quality_rows(dq),
            row_headers=7,
        )
        if not dq.empty
        else None,
        empty="The data_quality mart is empty: nothing has landed yet.",
        **common,
    )
    template = env.get_template("evidence.html")
    main_template = env.get_template("evidence_main.html")
    script = _static("filter.js")
    kept: dict[str, dict] = {}
    for mp in model_pages:
        page = Page(mp.path, f"Pairs of {mp.model_id}")
        if mp.kept is not None:
            main, prov = mp.kept.main, _KeptProvenance(mp.kept.provenance)
        else:
            prov = Provenance()
            main = main_template.render(page=mp, max_pairs=max_pairs, prov=prov)
        page.html = template.render(
            title=f"Pairs of {mp.model_id} ({mp.task}, {mp.query_set})",
            page=mp,
            root="../",
            script=script,
            main_html=Markup(main),
            prov=prov,
            **common,
        )
        pages.append(page)
        if mp.key is not None:
            kept[mp.key] = {"path": mp.path, "anchors": sorted(mp.anchors)}
    return pages, kept
