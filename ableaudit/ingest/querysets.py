"""Load the published AccessEval query set and land it in ``raw.external_queries``.

The project's own query set is a dbt seed; this module exists so an audit can
also be run on the paper's own queries, for a like-for-like comparison. The
published CSV (hub id ``Srikant86/AccessEval``) is looser than our seed: column
names vary in case and spacing, rows are duplicated, and the
"Disability-Specific Query" column either holds a template with a
``{disability}`` placeholder or an already-filled query. Everything here turns
that into the same shape as our own prompts (one neutral row plus one row per
disability, under a stable query id) and refuses to guess silently: rows whose
domain or disability cannot be resolved are reported, and raise unless the
caller opts out with ``strict=False``.
"""

from __future__ import annotations

import csv
import hashlib
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ableaudit import PROJECT_ROOT
from ableaudit.ingest import files
from ableaudit.warehouse.reference_landing import replace_query_set

DEFAULT_HUB_ID = "Srikant86/AccessEval"
SEEDS_DIR = PROJECT_ROOT / "seeds"
INT_PROMPTS_SQL = PROJECT_ROOT / "models" / "intermediate" / "int_prompts.sql"
BUILTIN_QUERY_SETS = ("ableaudit",)
"""Query sets int_prompts builds from the seeds (``'ableaudit' as query_set``). A landed set
under one of these names would give every one of its prompt ids twice, and every later
build would fail on int_prompts' unique test; a test keeps this list in step with the SQL."""

# Normalised header -> role. Headers are compared lower-case with runs of
# spaces, underscores and hyphens collapsed to one space.
NEUTRAL_HEADERS = ("neutral query", "neutral", "nq")
DISABILITY_QUERY_HEADERS = (
    "disability specific query",
    "disability aware query",
    "disability query",
    "dq",
)
DOMAIN_HEADERS = ("domain",)
DISABILITY_HEADERS = ("disability", "disability type", "disability category", "disability types")

PLACEHOLDER_RE = re.compile(r"\{\s*disability\s*\}", re.IGNORECASE)

# Synonyms for reading the disability out of free text, in the order they are
# tried. Order matters: a matched span is consumed before the next category is
# tried, so "sensory and cognitive disorders" is claimed whole before any looser
# pattern could see "cognitive", and "genetic and developmental" before
# "developmental". Patterns are deliberately specific where the bare word is
# common in ordinary questions ("learning", "behavioral", "genetic").
TEXT_SYNONYMS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "sensory_cognitive",
        (
            r"sensory\s*(?:and|&|/)\s*cognitive",
            r"cognitive\s*(?:and|&|/)\s*sensory",
            r"cognitive\s+(?:disorders?|impairments?|disabilit(?:y|ies))",
            r"sensory\s+(?:processing\s+)?(?:disorders?|issues|sensitivit(?:y|ies))",
        ),
    ),
    (
        "genetic_developmental",
        (
            r"genetic\s*(?:and|&|/)\s*developmental",
            r"genetic\s+(?:disorders?|conditions?)",
            r"developmental\s+(?:disorders?|disabilit(?:y|ies)|delays?|conditions?)",
            r"down\s+syndrome",
            r"autis\w*",
            r"intellectual\s+disabilit(?:y|ies)",
        ),
    ),
    (
        "mental_behavioral",
        (
            r"mental\s+(?:health\s+)?(?:and|&|/)\s*behaviou?ral",
            r"mental\s+health",
            r"mental\s+illness(?:es)?",
            r"psychiatric\s+\w+",
            r"behaviou?ral\s+(?:disorders?|conditions?|issues|health)",
        ),
    ),
    (
        "learning",
        (
            r"learning\s+(?:disorders?|disabilit(?:y|ies)|difficult(?:y|ies)|differences?)",
            r"dyslexi\w*",
            r"dyscalculi\w*",
            r"dysgraphi\w*",
        ),
    ),
    (
        "neurological",
        (
            r"neurological\w*",
            r"neurologic",
            r"epilep\w*",
            r"multiple\s+sclerosis",
            r"cerebral\s+palsy",
            r"parkinson\w*",
        ),
    ),
    (
        "speech",
        (
            r"speech",
            r"stutter\w*",
            r"stammer\w*",
            r"non-?verbal",
            r"aphasia",
        ),
    ),
    (
        "hearing",
        (
            r"hard\s+of\s+hearing",
            r"hearing",
            r"deaf\w*",
        ),
    ),
    (
        "vision",
        (
            r"low\s+vision",
            r"vision",
            r"visual(?:ly)?\s+impair\w*",
            r"visual(?:ly)?",
            r"blind\w*",
            r"sight\s*(?:loss|impair\w*)",
            r"partially\s+sighted",
        ),
    ),
    (
        "mobility",
        (
            r"mobility",
            r"wheelchair\w*",
            r"physical\s+disabilit(?:y|ies)",
            r"paraly\w*",
            r"amputee\w*",
            r"limb\s+(?:loss|difference)",
        ),
    ),
)

DOMAIN_SYNONYMS = {
    "education": "education",
    "educational": "education",
    "finance": "finance",
    "financial": "finance",
    "finances": "finance",
    "healthcare": "healthcare",
    "health care": "healthcare",
    "health": "healthcare",
    "hospitality": "hospitality",
    "media": "media",
    "technology": "technology",
    "tech": "technology",
}

EXAMPLES_SHOWN = 5


class QuerySetError(ValueError):
    """A query-set file cannot be loaded as asked; the message says what was found and what to do."""


@dataclass
class LoadedQuerySet:
    """Prompts ready for ``raw.external_queries`` plus what loading them found.

    ``rows``: one dict per prompt with keys query_set, query_id, domain, persona
    (always None for AccessEval), disability_id (None for the neutral prompt) and
    prompt_text. ``report``: counts that let a user check the load against the
    paper (234 neutral queries, 2,106 disability-aware ones) before auditing.
    """

    rows: list[dict[str, Any]]
    report: dict[str, Any] = field(default_factory=dict)

    def summary(self) -> str:
        """A few lines a user can check at a glance after an import."""
        r = self.report
        lines = [
            f"Read {r.get('n_input_rows', 0)} rows from {r.get('source', '?')}"
            f" ({r.get('n_duplicates_removed', 0)} exact duplicate rows removed"
            + (f", {r['n_blank_rows']} blank rows skipped" if r.get("n_blank_rows") else "")
            + ").",
            f"{r.get('n_neutral', 0)} neutral queries, {r.get('n_disability_rows', 0)} disability-aware"
            f" queries ({r.get('n_templates_expanded', 0)} templates filled for every category,"
            f" disability read from {r.get('disability_source', '?')}).",
        ]
        per_domain = r.get("per_domain") or {}
        if per_domain:
            lines.append(
                "Neutral queries per domain: "
                + ", ".join(f"{d} {n}" for d, n in per_domain.items())
                + "."
            )
        per_dis = r.get("per_disability") or {}
        if per_dis:
            lines.append(
                "Disability-aware queries per category: "
                + ", ".join(f"{d} {n}" for d, n in per_dis.items())
                + "."
            )
        unresolved = r.get("unresolved") or []
        if unresolved:
            lines.append(f"{len(unresolved)} row(s) could not be resolved and were left out:")
            lines += [f"  {_describe(u)}" for u in unresolved[:EXAMPLES_SHOWN]]
            if len(unresolved) > EXAMPLES_SHOWN:
                lines.append(
                    f"  ... and {len(unresolved) - EXAMPLES_SHOWN} more (see report['unresolved'])."
                )
        return "\n".join(lines)


# --- taxonomy ------------------------------------------------------------------


def _norm_label(text: str) -> str:
    """Fold case, '&', punctuation and plurals so 'Mental & Behavioral Disorders' meets its id."""
    t = text.strip().lower().replace("&", " and ")
    t = re.sub(r"[^a-z0-9]+", " ", t)
    words = [
        w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w for w in t.split()
    ]
    return " ".join(words)


def _norm_header(name: str) -> str:
    return re.sub(r"[\s_\-]+", " ", (name or "").strip().lower().lstrip("\ufeff")).strip()


def load_taxonomy(seeds_dir: str | os.PathLike | None = None) -> list[dict[str, str]]:
    """The nine categories from seeds/disabilities.csv, so labels and phrases have one source."""
    path = Path(seeds_dir or SEEDS_DIR) / "disabilities.csv"
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _label_lookup(taxonomy: list[dict[str, str]]) -> dict[str, str]:
    """Every way a disability column may spell a category -> its id."""
    lookup: dict[str, str] = {}
    for d in taxonomy:
        did = d["disability_id"]
        for label in (
            did,
            did.replace("_", " "),
            d["display_name"],
            d["short_name"],
            d["query_phrase"],
        ):
            lookup[_norm_label(label)] = did
    # The paper's own spellings (section 3.3, Table 6) where they differ from ours.
    for label, did in {
        "Mental and Behavioral disorders": "mental_behavioral",
        "Mental health and behavioral disorders": "mental_behavioral",
        "Mental health": "mental_behavioral",
        "Genetic & Developmental Disorders": "genetic_developmental",
        "Sensory & Cognitive Disorders": "sensory_cognitive",
        "Visual impairments": "vision",
        "Learning disorder": "learning",
    }.items():
        lookup[_norm_label(label)] = did
    return lookup


def disability_from_text(text: str) -> tuple[str | None, str]:
    """Resolve the one category a filled query mentions; (None, reason) when none or several do."""
    remaining = text
    found: list[str] = []
    for did, patterns in TEXT_SYNONYMS:
        hit = False
        for pat in patterns:
            rx = re.compile(rf"\b(?:{pat})\b", re.IGNORECASE)
            if rx.search(remaining):
                hit = True
                remaining = rx.sub(" ", remaining)
        if hit:
            found.append(did)
    if len(found) == 1:
        return found[0], ""
    if not found:
        return None, "no disability category found in the disability-specific query"
    return None, f"the disability-specific query mentions several categories ({', '.join(found)})"


def domain_id(value: str) -> str | None:
    """Map a published domain label to one of our six ids, case- and space-insensitively."""
    key = re.sub(r"\s+", " ", (value or "").strip().lower())
    return DOMAIN_SYNONYMS.get(key) or DOMAIN_SYNONYMS.get(key.replace(" ", ""))


def neutral_query_id(domain: str, neutral_text: str) -> str:
    """Stable across reloads and file re-orderings: derived from the text, not the row number."""
    digest = hashlib.sha1(neutral_text.encode("utf-8")).hexdigest()[:10]
    return f"ae_{domain[:3]}_{digest}"


def _clean(text: str | None) -> str:
    return re.sub(r"\s+", " ", text or "").strip()


def _describe(u: dict[str, Any]) -> str:
    text = u.get("disability_query") or u.get("neutral_query") or ""
    if len(text) > 90:
        text = text[:87] + "..."
    return f"line {u.get('line')}: {u.get('reason')} [domain={u.get('domain')!r}] {text!r}"


# --- reading -------------------------------------------------------------------


def _download(hub_id: str, filename: str | None) -> Path:
    """Fetch the CSV from the Hugging Face hub; any failure becomes an instruction to download by hand."""
    manual = (
        f"Download the CSV from https://huggingface.co/datasets/{hub_id} (Files and versions) "
        "and pass its path, e.g. `ableaudit import queries AccessEval.csv`."
    )
    try:
        from huggingface_hub import hf_hub_download, list_repo_files
    except ImportError as err:  # pragma: no cover - the lock file pins it
        raise QuerySetError(f"huggingface_hub is not installed ({err}). {manual}") from None
    try:
        if filename is None:
            csvs = sorted(
                f
                for f in list_repo_files(hub_id, repo_type="dataset")
                if f.lower().endswith(".csv")
            )
            if len(csvs) != 1:
                raise QuerySetError(
                    f"expected one CSV in dataset {hub_id}, found {csvs or 'none'}; pass filename=... or a local path. {manual}"
                )
            filename = csvs[0]
        return Path(hf_hub_download(repo_id=hub_id, filename=filename, repo_type="dataset"))
    except QuerySetError:
        raise
    except Exception as err:  # network absent, repo renamed, auth: all end the same way
        raise QuerySetError(
            f"could not download {hub_id} from the Hugging Face hub ({type(err).__name__}: {err}). {manual}"
        ) from None


def _find_columns(fieldnames: list[str], path: Path) -> dict[str, str | None]:
    by_norm = {_norm_header(h): h for h in fieldnames if h is not None}

    def pick(candidates: tuple[str, ...]) -> str | None:
        return next((by_norm[c] for c in candidates if c in by_norm), None)

    cols = {
        "neutral": pick(NEUTRAL_HEADERS),
        "disability_query": pick(DISABILITY_QUERY_HEADERS),
        "domain": pick(DOMAIN_HEADERS),
        "disability": pick(DISABILITY_HEADERS),
    }
    missing = [
        label
        for key, label in (
            ("neutral", "'Neutral Query'"),
            ("disability_query", "'Disability-Specific Query'"),
            ("domain", "'Domain'"),
        )
        if cols[key] is None
    ]
    if missing:
        raise QuerySetError(
            f"{path} is missing required column(s) {', '.join(missing)}. "
            f"Found columns: {[h for h in fieldnames if h is not None]}. "
            "Expected (case and spacing ignored): 'Neutral Query', 'Disability-Specific Query' "
            "(or 'Disability-Aware Query'), 'Domain'; optional: 'Disability' / 'Disability Type'."
        )
    return cols


def read_accesseval(
    path_or_none: str | os.PathLike | None,
    *,
    hub_id: str = DEFAULT_HUB_ID,
    strict: bool = True,
    query_set: str = "accesseval",
    filename: str | None = None,
    seeds_dir: str | os.PathLike | None = None,
) -> LoadedQuerySet:
    """Read the published AccessEval CSV (local file, else the hub) into our prompt shape.

    A disability-specific query holding a ``{disability}`` placeholder is filled
    with each category's ``query_phrase`` (the phrase our own set uses, so the
    two sets differ in questions, not in how categories are named); when the
    row also names a disability, only that category is filled. An already
    filled query gets its category from the disability column when there is
    one, else from the text. With ``strict`` (the default) any row that cannot
    be resolved raises ``QuerySetError`` naming the rows; with ``strict=False``
    they are left out and listed in ``report['unresolved']``.
    """
    if path_or_none is None:
        path = _download(hub_id, filename)
    else:
        path = Path(path_or_none).expanduser()
        if not path.is_file():
            raise QuerySetError(f"{path} does not exist or is not a file.")

    taxonomy = load_taxonomy(seeds_dir)
    order = [d["disability_id"] for d in taxonomy]
    phrase = {d["disability_id"]: d["query_phrase"] for d in taxonomy}
    labels = _label_lookup(taxonomy)

    blank_lines: list[int] = []
    header, records = files.read_csv(path, QuerySetError, blank_lines, unnamed=True)
    cols = _find_columns(header, path)

    seen: set[tuple] = set()
    n_dupes = n_templates = 0
    n_blank = len(blank_lines)
    unresolved: list[dict[str, Any]] = []
    # neutral query id -> (domain, neutral text); (query id, disability) -> text
    neutrals: dict[str, tuple[str, str]] = {}
    aware: dict[tuple[str, str], str] = {}
    aware_line: dict[tuple[str, str], int] = {}

    for line, rec in records:
        values = tuple(_clean(v) for v in rec.values())
        if values in seen:
            n_dupes += 1
            continue
        seen.add(values)

        neutral = _clean(rec.get(cols["neutral"]))
        dq = _clean(rec.get(cols["disability_query"]))
        raw_domain = _clean(rec.get(cols["domain"]))
        raw_dis = _clean(rec.get(cols["disability"])) if cols["disability"] else ""
        problem = {
            "line": line,
            "domain": raw_domain,
            "neutral_query": neutral,
            "disability_query": dq,
        }

        dom = domain_id(raw_domain)
        if dom is None:
            hint = files.did_you_mean(raw_domain, DOMAIN_SYNONYMS)
            unresolved.append({**problem, "reason": f"unknown domain {raw_domain!r}{hint}"})
            continue
        if not neutral or not dq:
            unresolved.append({**problem, "reason": "empty neutral or disability-specific query"})
            continue
        if PLACEHOLDER_RE.search(neutral):
            unresolved.append(
                {**problem, "reason": "the neutral query contains a {disability} placeholder"}
            )
            continue

        if raw_dis:
            did = labels.get(_norm_label(raw_dis))
            if did is None:
                did, _ = disability_from_text(raw_dis)
            if did is None:
                hint = files.did_you_mean(raw_dis, [d["disability_id"] for d in taxonomy])
                unresolved.append({**problem, "reason": f"unknown disability {raw_dis!r}{hint}"})
                continue
            targets = [did]
        elif PLACEHOLDER_RE.search(dq):
            targets = list(order)
        else:
            did, reason = disability_from_text(dq)
            if did is None:
                unresolved.append({**problem, "reason": reason})
                continue
            targets = [did]

        is_template = bool(PLACEHOLDER_RE.search(dq))
        n_templates += is_template
        qid = neutral_query_id(dom, neutral)
        neutrals.setdefault(qid, (dom, neutral))
        for did in targets:
            text = PLACEHOLDER_RE.sub(phrase[did], dq) if is_template else dq
            key = (qid, did)
            if key in aware and aware[key] != text:
                unresolved.append(
                    {
                        **problem,
                        "reason": (
                            f"a second, different {did} query for this neutral query "
                            f"(first on line {aware_line[key]})"
                        ),
                    }
                )
                continue
            aware.setdefault(key, text)
            aware_line.setdefault(key, line)

    if unresolved and strict:
        shown = "\n".join(f"  {_describe(u)}" for u in unresolved[:EXAMPLES_SHOWN])
        more = (
            f"\n  ... and {len(unresolved) - EXAMPLES_SHOWN} more"
            if len(unresolved) > EXAMPLES_SHOWN
            else ""
        )
        raise QuerySetError(
            f"{len(unresolved)} row(s) of {path} could not be resolved to a domain and a disability:\n"
            f"{shown}{more}\nFix the file, or load with strict=False (CLI: --lenient) to leave them out."
        )

    rank = {did: i for i, did in enumerate(order)}
    rows: list[dict[str, Any]] = []
    for qid, (dom, neutral) in neutrals.items():
        rows.append(
            {
                "query_set": query_set,
                "query_id": qid,
                "domain": dom,
                "persona": None,
                "disability_id": None,
                "prompt_text": neutral,
            }
        )
        for did in sorted((d for q, d in aware if q == qid), key=rank.__getitem__):
            rows.append(
                {
                    "query_set": query_set,
                    "query_id": qid,
                    "domain": dom,
                    "persona": None,
                    "disability_id": did,
                    "prompt_text": aware[(qid, did)],
                }
            )

    domain_order = ["education", "finance", "healthcare", "hospitality", "media", "technology"]
    per_domain = Counter(dom for dom, _ in neutrals.values())
    per_dis = Counter(did for _, did in aware)
    report = {
        "source": str(path),
        "n_input_rows": len(records),
        "n_duplicates_removed": n_dupes,
        "n_blank_rows": n_blank,
        "n_templates_expanded": n_templates,
        "n_neutral": len(neutrals),
        "n_disability_rows": len(aware),
        "per_domain": {d: per_domain[d] for d in domain_order if per_domain[d]},
        "per_disability": {d: per_dis[d] for d in order if per_dis[d]},
        "disability_source": (
            f"column {cols['disability']!r}"
            if cols["disability"]
            else "the {disability} placeholder, else the query text"
        ),
        "n_unresolved": len(unresolved),
        "unresolved": unresolved,
    }
    return LoadedQuerySet(rows=rows, report=report)


# --- landing -------------------------------------------------------------------


def check_query_set_name(query_set: str | None) -> str:
    """The name to land a set under; refuses an empty one and one a built-in set already uses."""
    name = (query_set or "").strip()
    if not name:
        raise QuerySetError("--query-set must be a non-empty name, e.g. --query-set accesseval")
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
        raise QuerySetError(
            f"--query-set {name!r} must be a name of letters, digits, '_', '-' or '.' "
            "(it is written into every prompt id), e.g. --query-set accesseval"
        )
    if name.lower() in BUILTIN_QUERY_SETS:
        raise QuerySetError(
            f"query set {name!r} is built in (seeds/queries.csv); landing another set under it "
            "would duplicate its prompts and break every later build. Choose another name, "
            "e.g. --query-set accesseval"
        )
    return name


def land_query_set(
    warehouse: str | Path | None,
    loaded: LoadedQuerySet,
    query_set: str = "accesseval",
    source_file: str | None = None,
) -> int:
    """Replace ``query_set`` in ``raw.external_queries`` with ``loaded.rows``, all or nothing.

    The table has no primary key (a neutral row's disability_id is NULL), so
    uniqueness of (query_id, disability_id) is checked here before anything is
    written; the landing layer replaces the set in one transaction, so a failure
    leaves the previous version of the set in place, and reloading is idempotent.
    Rows are written under ``query_set`` whatever their own ``query_set`` key says.
    """
    query_set = check_query_set_name(query_set)
    keys = Counter((r.get("query_id"), r.get("disability_id")) for r in loaded.rows)
    dupes = [k for k, n in keys.items() if n > 1]
    if dupes:
        raise QuerySetError(
            f"{len(dupes)} duplicate (query_id, disability_id) key(s), e.g. {dupes[:3]}; nothing landed"
        )
    source = source_file if source_file is not None else loaded.report.get("source")
    return replace_query_set(warehouse, query_set, loaded.rows, source)
