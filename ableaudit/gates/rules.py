"""The gates file: release rules over the marts, read and checked before anything runs.

A gates file is YAML with one key, ``rules``, a list of rules. Each rule has a ``kind``
(KINDS), its threshold, and the common fields ``id``, ``severity`` (error | warn),
``min_pairs``, ``allow_inconclusive``, ``description`` and the target filters
``model_id`` / ``arm``. ``load_gates`` reports every mistake of the file at once, one
line each, naming the rule and the field (GateFileError). docs/gates.md has an example
of every kind.
"""

from __future__ import annotations

import difflib
import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ableaudit.validation import load_yaml_file, yaml_problem

SEVERITIES = ("error", "warn")
SLICES = ("overall", "domain", "disability", "domain_disability")
DIMENSIONS = ("interpret", "stereotype", "framing", "abstain")
"""The built-in contrastive dimensions; a judge's own dimension set adds its own names."""
AGAINST_KEYWORDS = ("previous", "last_passing")
DEFAULT_MIN_PAIRS = 20


@dataclass(frozen=True)
class Param:
    """One kind-specific field of a rule."""

    kind: str
    """'number', 'string', 'strings' (a list of strings), 'choice' or 'dimension' (a
    built-in choice, or any lowercase name that is not a near miss of one)."""
    help: str
    """What the field means, for the message when it is missing or wrong."""
    required: bool = False
    default: Any = None
    choices: tuple[str, ...] = ()
    low: float | None = None
    high: float | None = None


KINDS: dict[str, dict[str, Param]] = {
    "degradation_max": {
        "metric": Param(
            "string",
            "the measure of run_rates: vader, regard, verbosity, judge_score:<judge>, a pair "
            "metric (cosine_similarity, rouge_l, bleu, ...), refusal or at_mismatch",
            required=True,
        ),
        "max_pct": Param(
            "number", "the highest rate allowed, in %", required=True, low=0.0, high=100.0
        ),
        "slice": Param("choice", "which slices are held to it", default="overall", choices=SLICES),
        "slice_value": Param("string", "one slice value only (e.g. a disability id)"),
    },
    "judge_drop": {
        "max_drop": Param(
            "number",
            "the largest judge-score drop (neutral - disability-aware, in score points) allowed "
            "when it is significant",
            required=True,
            low=0.0,
        ),
        "judge": Param("string", "one rubric judge (default: every rubric judge)"),
        "alpha": Param(
            "number",
            "Holm-adjusted p below which a drop is significant",
            default=0.05,
            low=0.0,
            high=1.0,
        ),
        "slice": Param(
            "choice", "which slices are held to it", default="disability", choices=SLICES
        ),
    },
    "interpretive_shift_max": {
        "max_pct": Param(
            "number", "the highest Yes-rate allowed, in %", required=True, low=0.0, high=100.0
        ),
        "judge": Param("string", "one contrastive judge (default: every contrastive judge)"),
        "dimension": Param(
            "dimension",
            "the contrastive dimension: a built-in one or one of a judge's own dimension set",
            default="interpret",
            choices=DIMENSIONS,
        ),
        "slice": Param("choice", "which slices are held to it", default="overall", choices=SLICES),
    },
    "no_regression": {
        "against": Param(
            "string",
            "the baseline: 'previous' (the run before), 'last_passing' (the latest earlier run "
            "that passed every error rule of the other kinds) or a run id",
            required=True,
        ),
        "metrics": Param(
            "strings", "the measures compared (default: every measure of run_comparison)"
        ),
        "slice": Param("choice", "which slices are compared", default="overall", choices=SLICES),
        "max_increase": Param(
            "number",
            "points of rate increase tolerated even when significant (default 0)",
            default=0.0,
            low=0.0,
        ),
    },
}

COMMON: dict[str, Param] = {
    "id": Param("string", "the rule's name in verdicts and JUnit (default: <kind>-<n>)"),
    "kind": Param("choice", "the rule kind", required=True, choices=tuple(KINDS)),
    "severity": Param(
        "choice", "error blocks a release, warn reports", default="error", choices=SEVERITIES
    ),
    "min_pairs": Param(
        "number",
        "fewer pairs (units) than this make the verdict inconclusive",
        default=DEFAULT_MIN_PAIRS,
        low=1,
    ),
    "allow_inconclusive": Param(
        "bool", "an inconclusive verdict does not block (error rules)", default=False
    ),
    "description": Param("string", "free text shown beside the verdict"),
    "model_id": Param("string", "apply to this model only (default: every model)"),
    "arm": Param("string", "apply to this arm only (default: every arm)"),
}


@dataclass
class GateRule:
    """One rule of a gates file, checked and with its defaults filled in."""

    id: str
    """Unique within the file; names the rule in gate_results and JUnit."""
    kind: str
    """One of KINDS."""
    severity: str = "error"
    """'error' (a failure blocks the release) or 'warn'."""
    min_pairs: int = DEFAULT_MIN_PAIRS
    """Under this many pairs (or matched units) the verdict is 'inconclusive'."""
    allow_inconclusive: bool = False
    """An inconclusive verdict of an error rule passes the gate (it never does otherwise)."""
    description: str | None = None
    """Free text."""
    model_id: str | None = None
    """Restricts the rule to one model."""
    arm: str | None = None
    """Restricts the rule to one arm."""
    params: dict[str, Any] = field(default_factory=dict)
    """The kind's own fields (KINDS[kind]), defaults filled in."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GateRule:
        return cls(**data)


class GateFileError(ValueError):
    """A gates file with mistakes; the message lists each one on its own line."""


def _suggest(word: str, options: list[str] | tuple[str, ...]) -> str:
    close = difflib.get_close_matches(str(word), list(options), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


def _check_value(name: str, value: Any, p: Param) -> tuple[Any, str | None]:
    """The value, converted, or a message saying what is wrong with it."""
    if p.kind == "bool":
        if isinstance(value, bool):
            return value, None
        return None, f"'{name}' must be true or false, not {value!r}"
    if p.kind == "number":
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None, f"'{name}' must be a number ({p.help}), not {value!r}"
        if p.low is not None and value < p.low or p.high is not None and value > p.high:
            bounds = f"from {p.low:g}" + (f" to {p.high:g}" if p.high is not None else " up")
            return None, f"'{name}' is {value!r}; it must be {bounds} ({p.help})"
        return value, None
    if p.kind == "strings":
        if isinstance(value, str):
            value = [value]
        if (
            not isinstance(value, list)
            or not value
            or not all(isinstance(v, str) and v for v in value)
        ):
            return None, f"'{name}' must be a list of names ({p.help}), not {value!r}"
        return value, None
    if not isinstance(value, str) or not value.strip():
        return None, f"'{name}' must be a non-empty text ({p.help}), not {value!r}"
    if p.kind == "dimension" and value not in p.choices:
        # any dimension of a judge's set may be named; one a letter or two from a built-in is a typo
        near = difflib.get_close_matches(value, list(p.choices), n=1, cutoff=0.85)
        if near or not re.fullmatch(r"[a-z][a-z0-9_]*", value):
            return None, (
                f"'{name}' is '{value}'{_suggest(value, p.choices)}; name a built-in dimension "
                f"({', '.join(p.choices)}) or one of a judge's dimension set (a lowercase name)"
            )
    if p.kind == "choice" and value not in p.choices:
        return None, (
            f"'{name}' is '{value}'{_suggest(value, p.choices)}; choose one of {', '.join(p.choices)}"
        )
    return value, None


def parse_rules(data: Any, source: str = "gates file") -> list[GateRule]:
    """The rules of a parsed gates file; GateFileError listing every mistake."""
    problems: list[str] = []
    if not isinstance(data, dict) or "rules" not in data:
        raise GateFileError(
            f"{source}: expected a mapping with a `rules:` list of rules at the top (see docs/gates.md)"
        )
    for key in data:
        if key != "rules":
            problems.append(
                f"unknown top-level key '{key}'{_suggest(key, ['rules'])}; only `rules:` is read"
            )
    items = data["rules"]
    if not isinstance(items, list) or not items:
        raise GateFileError(f"{source}: `rules:` must be a non-empty list of rules")
    rules: list[GateRule] = []
    seen: dict[str, int] = {}
    for index, item in enumerate(items, start=1):
        where = f"rule {index}"
        if not isinstance(item, dict):
            problems.append(
                f"{where}: expected a mapping with `kind:` and its fields, got {item!r}"
            )
            continue
        if isinstance(item.get("id"), str):
            where = f"rule {index} ({item['id']})"
        kind = item.get("kind")
        if kind is None:
            problems.append(f"{where}: missing 'kind' (one of {', '.join(KINDS)})")
            continue
        if kind not in KINDS:
            problems.append(
                f"{where}: unknown rule kind '{kind}'{_suggest(kind, tuple(KINDS))}; "
                f"kinds: {', '.join(KINDS)}"
            )
            continue
        spec = {**COMMON, **KINDS[kind]}
        values: dict[str, Any] = {}
        for name, value in item.items():
            if name not in spec:
                problems.append(
                    f"{where}: unknown field '{name}' for kind {kind}{_suggest(name, tuple(spec))}; "
                    f"fields: {', '.join(spec)}"
                )
                continue
            checked, error = _check_value(name, value, spec[name])
            if error:
                problems.append(f"{where}: {error}")
            else:
                values[name] = checked
        for name, p in spec.items():
            if p.required and name not in item:
                what = "threshold" if p.kind == "number" else "field"
                problems.append(f"{where}: missing {what} '{name}' ({p.help})")
        rule_id = values.get("id", f"{kind}-{index}")
        if rule_id in seen:
            problems.append(f"{where}: id '{rule_id}' is already used by rule {seen[rule_id]}")
        seen.setdefault(rule_id, index)
        params = {
            name: values.get(name, p.default)
            for name, p in KINDS[kind].items()
            if name in values or p.default is not None
        }
        rules.append(
            GateRule(
                id=rule_id,
                kind=kind,
                severity=values.get("severity", "error"),
                min_pairs=int(values.get("min_pairs", DEFAULT_MIN_PAIRS)),
                allow_inconclusive=values.get("allow_inconclusive", False),
                description=values.get("description"),
                model_id=values.get("model_id"),
                arm=values.get("arm"),
                params=params,
            )
        )
    if problems:
        n = len(problems)
        raise GateFileError(
            f"{source}: {n} mistake{'s' if n > 1 else ''}:\n"
            + "\n".join(f"  - {p}" for p in problems)
        )
    return rules


def load_gates(path: str | os.PathLike) -> list[GateRule]:
    """Read and check a gates file (docs/gates.md)."""
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(
            f"no gates file at {p}: pass an existing file (e.g. configs/gates.example.yml)"
        )
    try:
        data = load_yaml_file(p)
    except yaml.YAMLError as err:
        raise GateFileError(f"{p}: not valid YAML {yaml_problem(err)}") from None
    return parse_rules(data, str(p))


def rules_for_build(path: str | None) -> list[GateRule]:
    """The rules of var('gates_file') as the build reads them: none when the var is empty."""
    if path in (None, "", "None"):
        return []
    return load_gates(path)
