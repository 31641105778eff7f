"""The documentation as reference: every relative link and anchor resolves, every table keeps its
shape, every page says who it is for, and the pages stay within their size."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.glob("*.md"))

# [text](target) outside code; images too. Reference-style links are not used.
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
EXPLICIT_ANCHOR = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"")
FENCE = re.compile(r"^\s*(```|~~~)")

# Ceilings in bytes of Markdown that keep docs/ a reference rather than a record of how the
# figures were reached (git holds that): every page together, and the benchmarks page.
MAX_DOCS_BYTES = 150_000
MAX_BENCHMARKS_BYTES = 15_000


def _prose_lines(text: str) -> list[str]:
    """The lines outside fenced code blocks, and with inline code removed."""
    lines, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            lines.append(re.sub(r"`[^`]*`", "", line))
    return lines


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = re.sub(r"<[^>]+>", "", text).lower()
    kept = "".join(ch for ch in text if ch in " -_" or unicodedata.category(ch)[0] in ("L", "N"))
    return kept.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = path.read_text(encoding="utf-8")
    found: set[str] = set(EXPLICIT_ANCHOR.findall(text))
    seen: dict[str, int] = {}
    fenced = False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        m = None if fenced else HEADING.match(line)
        if m:
            slug = _slug(m.group(2))
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            found.add(slug if n == 0 else f"{slug}-{n}")
    return found


def links(path: Path) -> list[str]:
    return [
        t for line in _prose_lines(path.read_text(encoding="utf-8")) for t in LINK.findall(line)
    ]


@pytest.mark.parametrize(
    "page", [*PAGES, ROOT / "README.md"], ids=lambda p: str(p.relative_to(ROOT))
)
def test_every_relative_link_and_anchor_resolves(page: Path):
    broken = []
    for target in links(page):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        dest = (page.parent / file_part).resolve() if file_part else page
        if not dest.exists():
            broken.append(f"{target}: no file {dest.relative_to(ROOT)}")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading or anchor #{anchor} in {dest.name}")
    assert not broken, f"{page.name}: " + "; ".join(broken)


@pytest.mark.parametrize(
    "page", [*PAGES, ROOT / "README.md"], ids=lambda p: str(p.relative_to(ROOT))
)
def test_every_table_row_has_as_many_cells_as_its_header(page: Path):
    """A row with a cell too many or too few renders broken (an unescaped | splits a cell,
    in code spans too)."""
    cells = re.compile(r"(?<!\\)\|")
    bad, fenced, previous = [], False, ""
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), start=1):
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced and line.startswith("|") and previous.startswith("|"):
            if len(cells.findall(line)) != len(cells.findall(previous)):
                bad.append(f"line {number}: {line[:60]}")
        previous = "" if fenced else line
    assert not bad, f"{page.name}: " + "; ".join(bad)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_page_opens_with_who_it_is_for(page: Path):
    first = [line for line in page.read_text(encoding="utf-8").splitlines()[1:] if line.strip()]
    assert first and first[0].startswith("For: "), (
        f"{page.name}: the line after the title says who the page is for ('For: ...')"
    )


def test_the_docs_stay_reference_sized():
    sizes = {p.name: p.stat().st_size for p in PAGES}
    assert sizes["benchmarks.md"] <= MAX_BENCHMARKS_BYTES, sizes["benchmarks.md"]
    assert sum(sizes.values()) <= MAX_DOCS_BYTES, sorted(sizes.items(), key=lambda kv: -kv[1])


def test_the_anchor_rule_matches_githubs():
    assert _slug("bench/answer_lengths.py: how long the default model's answers are") == (
        "benchanswer_lengthspy-how-long-the-default-models-answers-are"
    )
    assert _slug("From a rate to its answers: `pair_details`") == (
        "from-a-rate-to-its-answers-pair_details"
    )
    assert _slug("Offline batch on Ray Data (`vllm` targets)") == (
        "offline-batch-on-ray-data-vllm-targets"
    )


def _command_line_parser():
    """The `ableaudit` parser, from whichever module of `ableaudit.cli` builds it."""
    import argparse
    import importlib
    import inspect
    import pkgutil

    import ableaudit.cli

    for info in pkgutil.iter_modules(ableaudit.cli.__path__, "ableaudit.cli."):
        if info.name.endswith("__main__"):  # importing it runs the command line
            continue
        module = importlib.import_module(info.name)
        for name, function in inspect.getmembers(module, inspect.isfunction):
            if "parser" not in name or function.__module__ != info.name:
                continue
            if any(p.default is p.empty for p in inspect.signature(function).parameters.values()):
                continue
            parser = function()
            if isinstance(parser, argparse.ArgumentParser) and parser.prog == "ableaudit":
                return parser
    raise AssertionError("no function of ableaudit.cli builds the `ableaudit` parser")


def test_every_command_line_option_is_documented():
    """Each `ableaudit` option is named on a page (the README or docs/), so the reference
    holds every flag a user can pass."""
    import argparse

    text = (ROOT / "README.md").read_text(encoding="utf-8") + "".join(
        page.read_text(encoding="utf-8") for page in PAGES
    )
    missing = []

    def walk(parser: argparse.ArgumentParser, path: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, f"{path} {name}")
            for option in action.option_strings:
                if option.startswith("--") and option not in ("--help", "--version"):
                    if not re.search(rf"{re.escape(option)}(?![\w-])", text):
                        missing.append(f"{path} {option}")

    walk(_command_line_parser(), "ableaudit")
    assert not missing, f"options no page names: {missing}"


def test_every_config_key_is_documented():
    """Each key of the audit config, at every level, is named on a page of docs/."""
    import typing

    from pydantic import BaseModel

    from ableaudit.config import AuditConfig

    text = "".join(page.read_text(encoding="utf-8") for page in PAGES)
    missing, seen = [], set()

    def models(annotation) -> list[type[BaseModel]]:
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            return [annotation]
        return [m for arg in typing.get_args(annotation) for m in models(arg)]

    def walk(model: type[BaseModel], path: str) -> None:
        if model in seen:
            return
        seen.add(model)
        for name, field in model.model_fields.items():
            key = field.alias or name
            if not re.search(rf"`{re.escape(key)}`|\b{re.escape(key)}:", text):
                missing.append(path + key)
            for sub in models(field.annotation):
                walk(sub, f"{path}{key}.")

    walk(AuditConfig, "")
    assert not missing, f"config keys no page names: {missing}"
