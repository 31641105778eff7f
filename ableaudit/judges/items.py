"""What a verdict is keyed by: the judge's identity, the subject texts, and one item to judge per subject.

A verdict's key (``judgment_id``) is a hash of the judge (backend, model
fingerprint incl. revision, decoding), the prompt version, the judge kind and the
subject texts (``subject_hash``), so a re-run skips what was landed and two
generations with identical texts share one verdict.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ableaudit.config import Judge
from ableaudit.judges.dimensions import DimensionSet, definition_json, dimensions_of
from ableaudit.judges.prompts import contrastive_messages, rubric_messages
from ableaudit.judges.schemas import decoding_schema
from ableaudit.keys import content_key, model_fingerprint

KINDS = ("rubric", "contrastive")


def judge_identity(judge: Judge) -> dict[str, Any]:
    """Everything about the judge that determines its verdicts (its name does not)."""
    t = judge.target
    d = t.decoding
    identity: dict[str, Any] = {
        "backend": t.backend,
        "model": model_fingerprint(t.model, t.revision),
        "adapter": model_fingerprint(t.adapter) if t.adapter else None,
        "decoding": {
            "temperature": 0.0 if d.temperature is None else d.temperature,
            "top_p": d.top_p,
            "max_new_tokens": d.max_new_tokens,
            "seed": d.seed,
        },
    }
    if judge.structured:
        # constrained decoding changes the verdicts: keys of their own, tied to the schemas decoded against
        # (free-text keys stay as they were; a change of decoding_schema judges again)
        dims = dimensions_of(judge)
        identity["structured_output"] = content_key({k: decoding_schema(k, dims) for k in KINDS})
    return identity


def judgment_key(
    identity: dict[str, Any], kind: str, prompt_version: str, subject_hash: str
) -> str:
    return content_key(
        {
            "judge": identity,
            "kind": kind,
            "prompt_version": prompt_version,
            "subject_hash": subject_hash,
        }
    )


def rubric_subject(query: str, response: str, disability: str | None) -> dict[str, Any]:
    return {"query": query, "response": response, "disability": disability}


def contrastive_subject(
    question_a: str, response_a: str, question_b: str, response_b: str
) -> dict[str, Any]:
    return {
        "question_a": question_a,
        "response_a": response_a,
        "question_b": question_b,
        "response_b": response_b,
    }


@dataclass(frozen=True)
class JudgeItem:
    """One verdict to obtain: its key, its prompt and the generations it is about."""

    judgment_id: str
    kind: str
    prompt_version: str
    subject_hash: str
    messages: tuple[dict, ...]
    nonce: str
    generation_id: str | None = None
    neutral_generation_id: str | None = None
    disability_generation_id: str | None = None
    response_b: str | None = None
    dimensions: DimensionSet | None = None
    """Contrastive: the dimension set the prompt asks (None: the built-in set)."""

    @property
    def dimension_set(self) -> str | None:
        """Contrastive: the set's definition as the warehouse keeps it, landed with the verdict
        (None for the built-in set, which every build knows: ``dimensions.catalog``)."""
        if self.kind != "contrastive" or self.dimensions is None or self.dimensions.is_default:
            return None
        return definition_json(self.dimensions, self.prompt_version)


def rubric_item(identity: dict[str, Any], row: dict[str, Any]) -> JudgeItem:
    """The rubric verdict for one generation row (prompt_text, response_text, condition, disability)."""
    disability = None
    if row.get("condition") == "disability" or row.get("disability_id"):
        disability = row.get("disability_label") or row.get("disability_id")
        if not disability:
            raise ValueError(
                f"generation {row.get('generation_id')} is disability-aware but names no disability"
            )
    subject = rubric_subject(row["prompt_text"], row["response_text"], disability)
    tpl, nonce, messages = rubric_messages(subject["query"], subject["response"], disability)
    subject_hash = content_key(subject)
    return JudgeItem(
        judgment_id=judgment_key(identity, "rubric", tpl.prompt_version, subject_hash),
        kind="rubric",
        prompt_version=tpl.prompt_version,
        subject_hash=subject_hash,
        messages=messages,
        nonce=nonce,
        generation_id=row["generation_id"],
    )


def contrastive_item(
    identity: dict[str, Any], pair: dict[str, Any], dimensions: DimensionSet | None = None
) -> JudgeItem:
    """The contrastive verdict for one (neutral, disability) pair, on ``dimensions``."""
    subject = contrastive_subject(
        pair["question_a"], pair["response_a"], pair["question_b"], pair["response_b"]
    )
    tpl, nonce, messages = contrastive_messages(**subject, dimensions=dimensions)
    subject_hash = content_key(subject)
    return JudgeItem(
        judgment_id=judgment_key(identity, "contrastive", tpl.prompt_version, subject_hash),
        kind="contrastive",
        prompt_version=tpl.prompt_version,
        subject_hash=subject_hash,
        messages=messages,
        nonce=nonce,
        neutral_generation_id=pair["neutral_generation_id"],
        disability_generation_id=pair["disability_generation_id"],
        response_b=pair["response_b"],
        dimensions=dimensions,
    )
