"""Export the ``preference_pairs`` mart in the layout TRL's DPOTrainer reads.

Conversational preference format (one JSON object per line, or the same
columns in Parquet)::

    {"prompt":   [{"role": "system", "content": "..."}, {"role": "user", "content": "<disability prompt>"}],
     "chosen":   [{"role": "assistant", "content": "<faithful response>"}],
     "rejected": [{"role": "assistant", "content": "<flagged response>"}],
     "preference_id": ..., "pair_id": ..., "model_id": ..., ...}

Vision pairs (``task='vision'``) put every message's content in TRL's list
form (``[{"type": "image"}, {"type": "text", "text": ...}]`` for the prompt)
and add ``images``: the image's path under ``image_root``. ``datasets`` reads
both files (``load_dataset("json" | "parquet", data_files=...)``); cast the
``images`` column to ``Sequence(Image())`` to decode the pictures.

Only rows with ``status = 'ok'`` are written; the others are counted in the
manifest. ``train.*`` holds the train split, ``heldout.*`` the held-out one,
and ``manifest.json`` the counts, a hash of the training rows, the judge and
the held-out queries: the queries a re-audit should ask, so base, prompt
mitigation and DPO are compared on queries the adapter never saw.

The split is SQL's (the ``preference_split`` macro, computed once in
``int_preference_splits``): the rows' ``split`` column, the held-out queries
and the share are read from the warehouse, never recomputed here.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ableaudit.keys import canonical_json, content_key
from ableaudit.warehouse import connect, ibis_compat, warehouse_path

METADATA_COLUMNS = (
    "preference_id",
    "pair_id",
    "judge_name",
    "model_id",
    "arm",
    "query_set",
    "query_id",
    "disability_id",
    "flagged_dimensions",
    "chosen_source",
)
SPLITS = ("train", "heldout")
FORMATS = ("jsonl", "parquet")


class PreferenceExportError(ValueError):
    """The preference pairs cannot be exported; the message says what to do first."""


@dataclass
class ExportReport:
    out_dir: Path
    files: dict[str, Path] = field(default_factory=dict)  # e.g. 'train.jsonl' -> path
    counts: dict[str, int] = field(default_factory=dict)  # rows per split
    excluded: dict[str, int] = field(default_factory=dict)  # rows not written, by status
    judge: str | None = None
    task: str = "text"
    manifest: Path | None = None
    heldout_queries: list[dict[str, str]] = field(default_factory=list)

    @property
    def train_file(self) -> Path:
        return self.files.get("train.jsonl") or self.files["train.parquet"]

    def summary(self) -> str:
        judge = self.judge or "none: no contrastive judge flagged a pair"
        lines = [
            f"Wrote {self.counts.get('train', 0)} train and {self.counts.get('heldout', 0)} held-out preference "
            f"pairs (judge {judge}, task {self.task}) to {self.out_dir}"
        ]
        if self.judge is None:
            lines.append(
                "  nothing to train on: no verdict labels interpret, stereotype or framing 'Yes' for this task "
                "(see interpretive_shift); a stronger judge, more queries or imported verdicts may flag some"
            )
        if self.excluded:
            lines.append(
                "  not written (status): "
                + ", ".join(f"{k} {v}" for k, v in sorted(self.excluded.items()))
            )
        lines.append(
            f"  held-out queries for the re-audit: {len(self.heldout_queries)} (manifest.json)"
        )
        return "\n".join(lines)


def built_heldout_share(shares: Sequence[float], expected: float | None) -> float | None:
    """The one preference_heldout_share the warehouse's split was built with, checked against ``expected``.

    ``shares`` are the distinct heldout_share values of int_preference_splits
    and preference_pairs. Several mean preference_pairs was built on a split
    since rebuilt with another share; one that differs from ``expected`` (the
    caller's) means the caller expects another split than the warehouse holds.
    """
    distinct = sorted(set(shares))
    if len(distinct) > 1:
        raise PreferenceExportError(
            f"preference_pairs was built on a split since rebuilt with another "
            f"preference_heldout_share ({distinct}); rebuild them together: "
            "`dbt build --select +preference_pairs`"
        )
    built = distinct[0] if distinct else None
    if (
        expected is not None
        and built is not None
        and not math.isclose(built, expected, abs_tol=1e-12)
    ):
        raise PreferenceExportError(
            f"the warehouse's pairs were split with another preference_heldout_share "
            f"({built}) than {expected}; pass heldout_share={built}, or rebuild with "
            f"`dbt build --select +preference_pairs --vars '{{preference_heldout_share: "
            f"{expected}}}'`"
        )
    return expected if built is None else built


def _messages(system_prompt: str | None, prompt: str, vision: bool) -> list[dict[str, Any]]:
    def content(text: str) -> Any:
        return [{"type": "text", "text": text}] if vision else text

    msgs: list[dict[str, Any]] = []
    if system_prompt:
        msgs.append({"role": "system", "content": content(system_prompt)})
    user: Any = [{"type": "image"}, {"type": "text", "text": prompt}] if vision else prompt
    msgs.append({"role": "user", "content": user})
    return msgs


def preference_record(
    row: dict[str, Any], image_root: str | os.PathLike | None = None
) -> dict[str, Any]:
    """One mart row as a TRL conversational preference example (plus metadata columns)."""
    vision = row["task"] == "vision"

    def answer(text: str) -> list[dict[str, Any]]:
        return [
            {"role": "assistant", "content": [{"type": "text", "text": text}] if vision else text}
        ]

    rec: dict[str, Any] = {
        "prompt": _messages(row.get("system_prompt"), row["prompt_text"], vision),
        "chosen": answer(row["chosen_text"]),
        "rejected": answer(row["rejected_text"]),
    }
    if vision:
        if row.get("image_rel_path") is None:
            raise PreferenceExportError(
                f"vision pair {row['pair_id']} has no image in raw.images ({row['query_id']}); "
                "land the image set (`ableaudit import images`) and rebuild"
            )
        rec["images"] = [str(Path(image_root).expanduser().resolve() / row["image_rel_path"])]
    rec.update({c: row.get(c) for c in METADATA_COLUMNS})
    return rec


def _write(records: Sequence[dict[str, Any]], path: Path, fmt: str) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    if fmt == "jsonl":
        with tmp.open("w", encoding="utf-8") as f:
            for r in records:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
    else:
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.Table.from_pylist(list(records)), tmp)
    tmp.replace(path)


def export_preference_pairs(
    warehouse: str | os.PathLike | None,
    out_dir: str | os.PathLike,
    *,
    judge: str | None = None,
    task: str = "text",
    arms: Sequence[str] | None = None,
    model_ids: Sequence[str] | None = None,
    image_root: str | os.PathLike | None = None,
    formats: Sequence[str] = FORMATS,
    heldout_share: float | None = None,
) -> ExportReport:
    """Write train/heldout files (JSONL and/or Parquet) and manifest.json from ``preference_pairs``.

    ``judge`` may be omitted when one contrastive judge flagged pairs. The
    split is the warehouse's: each row's ``split``, and in the manifest every
    held-out query of the audited pairs, flagged or not (int_preference_splits).
    ``heldout_share``, when given, must equal the var('preference_heldout_share')
    the warehouse was built with (the export fails otherwise, rather than
    write another split than the one asked for).
    """
    bad = [f for f in formats if f not in FORMATS]
    if bad or not formats:
        raise PreferenceExportError(f"formats must be among {FORMATS}, got {list(formats)}")
    if task not in ("text", "vision"):
        raise PreferenceExportError(f"task must be 'text' or 'vision', got {task!r}")
    if task == "vision" and image_root is None:
        raise PreferenceExportError(
            "a vision export needs image_root: the audit's image_root (the folder the images are under)"
        )
    path = warehouse_path(warehouse)
    connect(path).close()
    con = ibis_compat.connect(path, read_only=True)
    try:
        try:
            t = con.table("preference_pairs")
        except Exception:  # noqa: BLE001 - ibis TableNotFound
            raise PreferenceExportError(
                f"the warehouse {path} has no preference_pairs table; run `ableaudit build` "
                "after judging (contrastive judge)"
            ) from None
        t = t.filter(t.task == task)
        if arms:
            t = t.filter(t.arm.isin(list(arms)))
        if model_ids:
            t = t.filter(t.model_id.isin(list(model_ids)))
        judges = sorted(t.select("judge_name").distinct().to_pyarrow()["judge_name"].to_pylist())
        if judge is None:
            if len(judges) > 1:
                raise PreferenceExportError(
                    f"pairs were flagged by several judges {judges}; choose one with judge="
                )
            judge = judges[0] if judges else None
        elif judge not in judges:
            raise PreferenceExportError(
                f"judge {judge!r} flagged no {task} pair here (judges: {judges or 'none'})"
            )
        rows = (
            (
                t.filter(t.judge_name == judge)
                .order_by(
                    [
                        "split",
                        "model_id",
                        "arm",
                        "query_set",
                        "query_id",
                        "disability_id",
                        "sample_index",
                        "preference_id",
                    ]
                )
                .to_pyarrow()
                .to_pylist()
            )
            if judge
            else []
        )
        try:
            splits = con.table("int_preference_splits")
        except Exception:  # noqa: BLE001 - ibis TableNotFound
            raise PreferenceExportError(
                f"the warehouse {path} has no int_preference_splits; run `ableaudit build` "
                "(or `dbt build --select +preference_pairs`)"
            ) from None
        splits = splits.filter(splits.task == task)
        if model_ids:
            splits = splits.filter(splits.model_id.isin(list(model_ids)))
        built_shares = (
            splits.select("heldout_share").distinct().to_pyarrow()["heldout_share"].to_pylist()
        )
        held = splits.filter(splits.split == "heldout")
        heldout_queries = (
            held.select("query_set", "query_id")
            .distinct()
            .order_by(["query_set", "query_id"])
            .to_pyarrow()
            .to_pylist()
        )
    finally:
        con.disconnect()

    if rows and "heldout_share" not in rows[0]:
        raise PreferenceExportError(
            f"preference_pairs in {path} predates its heldout_share column; rebuild it: "
            "`dbt build --select +preference_pairs`"
        )
    share = built_heldout_share(built_shares + [r["heldout_share"] for r in rows], heldout_share)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    report = ExportReport(out_dir=out, judge=judge, task=task)
    by_split: dict[str, list[dict[str, Any]]] = {s: [] for s in SPLITS}
    for r in rows:
        if r["status"] != "ok":
            report.excluded[r["status"]] = report.excluded.get(r["status"], 0) + 1
            continue
        by_split[r["split"]].append(preference_record(r, image_root))
    for split, records in by_split.items():
        report.counts[split] = len(records)
        for fmt in formats:
            f = out / f"{split}.{fmt}"
            _write(records, f, fmt)
            report.files[f.name] = f
    report.heldout_queries = heldout_queries
    manifest = {
        "format": "trl-dpo-conversational",
        "warehouse": str(path),
        "judge": judge,
        "task": task,
        "arms": list(arms) if arms else None,
        "model_ids": list(model_ids) if model_ids else None,
        "counts": report.counts,
        "excluded_by_status": report.excluded,
        "train_sha256": content_key([canonical_json(r) for r in by_split["train"]]),
        "heldout_share": share,
        "heldout_queries": report.heldout_queries,
        "reaudit_subset": {"query_ids": sorted({q["query_id"] for q in report.heldout_queries})},
        "files": sorted(report.files),
    }
    report.manifest = out / "manifest.json"
    report.manifest.write_text(json.dumps(manifest, indent=2, sort_keys=True, ensure_ascii=False))
    return report
