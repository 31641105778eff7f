"""Training data for the LoRA detector: the contrastive judge's verdicts, and human labels where present.

One example is one complete (neutral, disability) pair of ``int_pairs`` with
its two responses (A = neutral, B = disability-aware) and up to four labels:
``interpret``, ``stereotype``, ``framing`` (No / Ambiguous / Yes) and
``abstain`` (No / Yes: the judge found that response B declines).

Where the labels come from:

* the judge: the current *usable* verdict of one contrastive judge on the pair
  (``int_pair_judgments.included``: the pair is complete, the call succeeded
  and the verdict parsed). An unparseable verdict or a failed call is never a
  label; such pairs are not examples (counted in the snapshot).
* humans: ``raw.annotations`` rows on the pair (``item_kind = 'pair'``). For a
  dimension that humans rated, the majority of their labels **replaces** the
  judge's label (humans are the ground truth the judge is validated against);
  a tie between annotators leaves the judge's label in place (or no label when
  the judge has none). Pairs that only humans rated are examples too.
* a dimension with no label at all is masked out of the loss, not guessed.

Examples are grouped by query (``query_set:query_id``; for vision pairs the
query is the image), and train and test are split by group, so no query (or
image) has pairs on both sides of the split.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ableaudit.keys import content_key
from ableaudit.warehouse import connect, warehouse_path

DIMENSIONS: tuple[str, ...] = ("interpret", "stereotype", "framing", "abstain")
LABELS: dict[str, tuple[str, ...]] = {
    "interpret": ("No", "Ambiguous", "Yes"),
    "stereotype": ("No", "Ambiguous", "Yes"),
    "framing": ("No", "Ambiguous", "Yes"),
    "abstain": ("No", "Yes"),
}


class DetectorDataError(ValueError):
    """The warehouse cannot give training data; the message says what to run first."""


@dataclass
class Example:
    pair_id: str
    group: str  # query_set:query_id, the unit of the split
    task: str
    model_id: str
    arm: str
    response_a: str
    response_b: str
    labels: dict[str, str | None]  # the training target per dimension (human majority, else judge)
    judge_labels: dict[str, str | None] = field(default_factory=dict)
    human_labels: dict[str, str | None] = field(default_factory=dict)

    def label_index(self, dim: str) -> int:
        """The class index of the target, or -100 (ignored by the loss) when unlabelled."""
        v = self.labels.get(dim)
        return LABELS[dim].index(v) if v is not None else -100


@dataclass
class TrainingData:
    examples: list[Example]
    judge: str | None
    counts: dict[str, int]

    def snapshot(self) -> dict[str, Any]:
        """What the adapter was trained from: a hash of every example's texts and labels, and counts."""
        rows = sorted(
            (
                e.pair_id,
                content_key([e.response_a, e.response_b]),
                [e.labels.get(d) for d in DIMENSIONS],
            )
            for e in self.examples
        )
        return {
            "sha256": content_key(rows),
            "n_rows": len(rows),
            "judge": self.judge,
            **self.counts,
        }


def _open(warehouse: str | os.PathLike | None) -> Any:
    # ibis is imported here, not with the module: the build's detector model imports this
    # module's labels, and without a detector reads nothing through ibis
    from ableaudit.warehouse import ibis_compat

    path = warehouse_path(warehouse)
    connect(path).close()  # creates raw.* on a fresh file, then read without a write lock
    return ibis_compat.connect(path, read_only=True)


def _has(con: Any, name: str) -> bool:
    try:
        con.table(name)
        return True
    except Exception:  # ibis raises TableNotFound (or a DuckDB catalog error)
        return False


def human_majority(annotations: Sequence[dict[str, Any]]) -> tuple[dict[tuple[str, str], str], int]:
    """{(pair_id, dimension): majority label} over annotators; also how many (pair, dimension) tied."""
    by_key: dict[tuple[str, str], list[str]] = {}
    for a in annotations:
        if a["dimension"] in LABELS and a["value"] in LABELS[a["dimension"]]:
            by_key.setdefault((a["item_id"], a["dimension"]), []).append(a["value"])
    out, ties = {}, 0
    for key, values in by_key.items():
        ranked = Counter(values).most_common()
        if len(ranked) > 1 and ranked[0][1] == ranked[1][1]:
            ties += 1
            continue
        out[key] = ranked[0][0]
    return out, ties


def load_examples(
    warehouse: str | os.PathLike | None = None,
    *,
    judge: str | None = None,
    query_set: str | None = None,
    use_human: bool = True,
) -> TrainingData:
    """Examples from the built warehouse (int_pairs, int_pair_judgments) and raw.annotations.

    ``judge`` names the contrastive judge whose verdicts are the labels; it may
    be omitted when the warehouse has exactly one.
    """
    con = _open(warehouse)
    try:
        if not (_has(con, "int_pair_judgments") and _has(con, "int_pairs")):
            raise DetectorDataError(
                f"the warehouse {warehouse_path(warehouse)} has no int_pair_judgments; "
                "run `ableaudit build` (after judging) before training a detector"
            )
        pj = con.table("int_pair_judgments")
        judges = sorted(
            j
            for j in pj.select("judge_name").distinct().to_pyarrow()["judge_name"].to_pylist()
            if j
        )
        if judge is None:
            if len(judges) > 1:
                raise DetectorDataError(
                    f"the warehouse has several contrastive judges {judges}; choose one with judge="
                )
            judge = judges[0] if judges else None
        elif judge not in judges:
            raise DetectorDataError(
                f"contrastive judge {judge!r} has no verdicts here (judges: {judges or 'none'}); "
                "run it in an audit (judges: kinds [contrastive]) or import its verdicts"
            )
        pairs = con.table("int_pairs")
        pairs = pairs.filter(pairs.pair_status == "complete")
        if query_set is not None:
            pairs = pairs.filter(pairs.query_set == query_set)
        g = con.table("generations", database="raw")
        a = g.select(neutral_generation_id=g.generation_id, response_a=g.response_text)
        b = g.select(disability_generation_id=g.generation_id, response_b=g.response_text)
        pairs = pairs.join(a, "neutral_generation_id").join(b, "disability_generation_id")
        pair_rows = {
            r["pair_id"]: r
            for r in pairs.select(
                "pair_id",
                "task",
                "model_id",
                "arm",
                "query_set",
                "query_id",
                "response_a",
                "response_b",
            )
            .to_pyarrow()
            .to_pylist()
        }
        verdicts: dict[str, dict[str, Any]] = {}
        n_judged_unusable = 0
        if judge is not None:
            mine = pj.filter((pj.judge_name == judge) & (pj.pair_status == "complete"))
            for r in (
                mine.select(
                    "pair_id",
                    "included",
                    "exclusion_reason",
                    "interpret",
                    "stereotype",
                    "framing",
                    "decline_in_response_b",
                )
                .to_pyarrow()
                .to_pylist()
            ):
                if r["included"]:
                    verdicts[r["pair_id"]] = r
                elif r["exclusion_reason"] != "not_judged":
                    n_judged_unusable += 1
        annotations: list[dict[str, Any]] = []
        if use_human:
            ann = con.table("annotations", database="raw")
            annotations = (
                ann.filter(ann.item_kind == "pair")
                .select("item_id", "dimension", "value")
                .to_pyarrow()
                .to_pylist()
            )
    finally:
        con.disconnect()

    human, ties = human_majority(annotations)
    human_pairs = {pid for pid, _ in human}
    examples: list[Example] = []
    n_human_overrides = n_human_labels = 0
    for pid in sorted(set(verdicts) | (human_pairs & set(pair_rows))):
        if pid not in pair_rows:
            continue
        p = pair_rows[pid]
        v = verdicts.get(pid)
        judge_labels: dict[str, str | None] = {d: None for d in DIMENSIONS}
        if v is not None:
            judge_labels.update(
                interpret=v["interpret"],
                stereotype=v["stereotype"],
                framing=v["framing"],
                abstain=None
                if v["decline_in_response_b"] is None
                else ("Yes" if v["decline_in_response_b"] else "No"),
            )
        human_labels = {d: human.get((pid, d)) for d in DIMENSIONS}
        labels = {}
        for d in DIMENSIONS:
            if human_labels[d] is not None:
                n_human_labels += 1
                n_human_overrides += int(
                    judge_labels[d] is not None and judge_labels[d] != human_labels[d]
                )
                labels[d] = human_labels[d]
            else:
                labels[d] = judge_labels[d]
        if all(labels[d] is None for d in DIMENSIONS):
            continue
        examples.append(
            Example(
                pair_id=pid,
                group=f"{p['query_set']}:{p['query_id']}",
                task=p["task"],
                model_id=p["model_id"],
                arm=p["arm"],
                response_a=p["response_a"] or "",
                response_b=p["response_b"] or "",
                labels=labels,
                judge_labels=judge_labels,
                human_labels=human_labels,
            )
        )
    counts = {
        "n_judge_verdicts": len(verdicts),
        "n_judged_unusable": n_judged_unusable,
        "n_human_labels": n_human_labels,
        "n_human_overrides": n_human_overrides,
        "n_human_ties": ties,
    }
    return TrainingData(examples=examples, judge=judge, counts=counts)


def split_examples(
    examples: Sequence[Example], test_size: float = 0.25, seed: int = 0
) -> tuple[list[int], list[int], dict[str, Any]]:
    """Train and test indices, split by query group (sklearn GroupShuffleSplit): no group on both sides."""
    from sklearn.model_selection import GroupShuffleSplit

    groups = [e.group for e in examples]
    distinct = sorted(set(groups))
    if len(distinct) < 2:
        raise DetectorDataError(
            f"the detector needs labelled pairs of at least 2 queries (images) to hold some out; "
            f"found {len(distinct)} ({len(examples)} labelled pairs). Audit and judge more queries"
        )
    if not 0 < test_size < 1:
        raise DetectorDataError(f"test_size must lie strictly between 0 and 1, got {test_size}")
    splitter = GroupShuffleSplit(n_splits=1, test_size=test_size, random_state=seed)
    train, test = next(splitter.split(list(range(len(examples))), groups=groups))
    train_idx, test_idx = sorted(int(i) for i in train), sorted(int(i) for i in test)
    info = {
        "method": "sklearn.GroupShuffleSplit",
        "group_by": "query_set:query_id",
        "test_size": test_size,
        "seed": seed,
        "n_train": len(train_idx),
        "n_test": len(test_idx),
        "train_groups": sorted({groups[i] for i in train_idx}),
        "test_groups": sorted({groups[i] for i in test_idx}),
    }
    return train_idx, test_idx, info
