"""Test images a DPO adapter never saw: the re-audit refuses an image it trained on.

The VLM paper (section 6.2) trains DPO on one image population (COCO) and compares
base, prompt mitigation and DPO on a held-out paired test set. A vision DPO
adapter records the sha256 of every image it trained on (``data_snapshot.image_digests``
in raw.adapters). Before an audit generates anything, every image a DPO arm would
describe is checked against those digests: the same bytes under another name or in
another image set are the same picture, so the audit stops and names them. The
``mitigation_effect`` mart's scope ``dpo_unseen`` applies the same digest rule to
what has landed.

An arm runs a registered DPO adapter when its ``adapter`` is the adapter's path, its
id, or a folder named after its id (the rule of mitigation_effect's ``dpo_arms``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ableaudit.errors import UsageError

SHOWN = 10


class TrainedImageError(UsageError):
    """A test image is one a DPO arm's adapter trained on."""


def registered_dpo(warehouse: str | Path) -> list[tuple[str, str, list[str] | None]]:
    """(adapter_id, path, the image digests it trained on or None) of every DPO adapter."""
    from ableaudit.warehouse import connect

    con = connect(warehouse)
    try:
        rows = con.execute(
            "select adapter_id, path, data_snapshot from raw.adapters where kind = 'dpo' "
            "order by adapter_id"
        ).fetchall()
    finally:
        con.close()
    out = []
    for adapter_id, path, snapshot in rows:
        digests = json.loads(snapshot or "{}").get("image_digests")
        out.append((adapter_id, path, digests))
    return out


def runs_adapter(arm_adapter: str, adapter_id: str, path: str) -> bool:
    """Whether an arm's ``adapter`` names this registered adapter (by path, id or folder name)."""
    return (
        arm_adapter == path
        or arm_adapter == adapter_id
        or arm_adapter.rstrip("/").endswith("/" + adapter_id)
    )


def refuse_trained_images(warehouse: str | Path, plans: Iterable[Any]) -> None:
    """Stop an audit whose DPO arms would describe an image their adapter trained on.

    ``plans``: ``ableaudit.audit.planning.TargetPlan`` objects (each group: an adapter and its
    planned generations). Text plans and arms without a DPO adapter pass.
    """
    plans = [p for p in plans if p.target.task == "vision"]
    if not plans:
        return
    adapters = [a for a in registered_dpo(warehouse) if a[2]]
    lines = []
    for plan in plans:
        for arm_adapter, planned in plan.groups:
            if not arm_adapter:
                continue
            for adapter_id, path, digests in adapters:
                if not runs_adapter(arm_adapter, adapter_id, path):
                    continue
                trained = set(digests)
                seen = sorted(
                    {
                        (p.query_set, p.query_id, p.image_sha256)
                        for p in planned
                        if p.image_sha256 in trained
                    }
                )
                if not seen:
                    continue
                arms = sorted({p.arm for p in planned})
                shown = "; ".join(f"{s}:{i} (sha256 {d[:12]})" for s, i, d in seen[:SHOWN])
                more = f" and {len(seen) - SHOWN} more" if len(seen) > SHOWN else ""
                lines.append(
                    f"target {plan.target.name!r}, arm(s) {', '.join(arms)}: {len(seen)} test "
                    f"image(s) are in the training data of DPO adapter {adapter_id}: {shown}{more}"
                )
    if lines:
        raise TrainedImageError(
            "refused as test images: a DPO arm would describe pictures its adapter trained on "
            "(checked by the bytes' sha256, whatever their name or image set):\n  "
            + "\n  ".join(lines)
            + "\nFix: test on images the adapter never saw: remove these from the test set (or "
            "leave them out with vision.subset.query_ids), or train the adapter without them."
        )
