"""The adapter registry: every trained adapter (LoRA detector or DPO adapter) is a row of raw.adapters.

A row says what the adapter is for (``kind``), what it was trained on top of
(``base_model`` and ``base_fingerprint``), from which rows (``data_snapshot``:
a hash of the training rows and their count), how the data was split, what it
scored on held-out data and with which parameters. Its files live in
``<adapters root>/<kind>/<adapter_id>/``; the root is ``$ABLEAUDIT_ADAPTERS``,
else ``adapters/`` in the project (git-ignored).

Versions count up per adapter ``name`` ('detector-v1', 'detector-v2', ...), so
'latest' is well defined and an old version stays usable by its id.
Registration is the one write to raw.adapters (like landing for generations).
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import duckdb

from ableaudit import PROJECT_ROOT
from ableaudit.keys import canonical_json
from ableaudit.warehouse import connect, warehouse_path
from ableaudit.warehouse.reference_landing import RegistryError, add_adapter

KINDS = ("detector", "dpo")


@dataclass(frozen=True)
class AdapterRecord:
    adapter_id: str
    kind: str
    name: str
    version: int
    base_model: str
    base_fingerprint: str | None
    path: str
    data_snapshot: str
    split_json: str | None
    metrics_json: str | None
    params_json: str | None
    created_at: Any = None

    @property
    def metrics(self) -> dict[str, Any]:
        return json.loads(self.metrics_json) if self.metrics_json else {}

    @property
    def params(self) -> dict[str, Any]:
        return json.loads(self.params_json) if self.params_json else {}

    @property
    def split(self) -> dict[str, Any]:
        return json.loads(self.split_json) if self.split_json else {}

    @property
    def snapshot(self) -> dict[str, Any]:
        return json.loads(self.data_snapshot) if self.data_snapshot else {}


COLUMNS = [f.name for f in fields(AdapterRecord)]


def adapters_root(root: str | os.PathLike | None = None) -> Path:
    """Where adapter folders live: explicit, then $ABLEAUDIT_ADAPTERS, then <project>/adapters."""
    chosen = root or os.environ.get("ABLEAUDIT_ADAPTERS") or (PROJECT_ROOT / "adapters")
    return Path(chosen).expanduser().resolve()


def _check_name(name: str) -> None:
    if not name or not name.replace("_", "").replace("-", "").isalnum():
        raise RegistryError(f"adapter name {name!r} must be letters, digits, '-' or '_'")


def _record(row: tuple) -> AdapterRecord:
    return AdapterRecord(**dict(zip(COLUMNS, row)))


def list_adapters(
    warehouse: str | os.PathLike | None = None,
    kind: str | None = None,
    con: duckdb.DuckDBPyConnection | None = None,
) -> list[AdapterRecord]:
    """Registered adapters, oldest first (optionally of one kind)."""
    own = con is None
    if own:
        con = connect(warehouse)  # creates raw.adapters on an older warehouse
    try:
        sql = f"select {', '.join(COLUMNS)} from raw.adapters"
        params: list[Any] = []
        if kind is not None:
            sql += " where kind = ?"
            params.append(kind)
        rows = con.execute(sql + " order by created_at, version, adapter_id", params).fetchall()
    finally:
        if own:
            con.close()
    return [_record(r) for r in rows]


def resolve_adapter(
    records: list[AdapterRecord], choice: str | None, kind: str
) -> AdapterRecord | None:
    """The adapter a choice names: an adapter_id, a path, 'latest' (newest of the kind); None when
    the choice is empty/'none' or nothing of the kind is registered. An unknown id is an error."""
    choice = (choice or "").strip()
    if choice.lower() in ("", "none"):
        return None
    of_kind = [r for r in records if r.kind == kind]
    if choice == "latest":
        return of_kind[-1] if of_kind else None
    for r in of_kind:
        if choice in (r.adapter_id, r.path):
            return r
    known = ", ".join(r.adapter_id for r in of_kind) or "none registered"
    raise RegistryError(
        f"no {kind} adapter {choice!r} in raw.adapters (known: {known}); "
        f"pass an adapter_id, 'latest', or train one with the train-{kind} flow"
    )


def get_adapter(warehouse: str | os.PathLike | None, choice: str, kind: str) -> AdapterRecord:
    rec = resolve_adapter(list_adapters(warehouse, kind), choice, kind)
    if rec is None:
        raise RegistryError(
            f"no {kind} adapter is registered in {warehouse_path(warehouse)}; "
            f"train one with the train-{kind} flow first"
        )
    return rec


def register_adapter(
    warehouse: str | os.PathLike | None,
    *,
    kind: str,
    name: str,
    files: str | os.PathLike,
    base_model: str,
    base_fingerprint: str | None,
    data_snapshot: dict[str, Any],
    split: dict[str, Any] | None,
    metrics: dict[str, Any] | None,
    params: dict[str, Any] | None,
    root: str | os.PathLike | None = None,
) -> AdapterRecord:
    """Give a trained adapter its version, move its folder into place and add its raw.adapters row.

    ``files`` is the folder the trainer saved to (e.g. a temporary one under
    the root). Names are checked before anything moves; the row is written in
    one transaction, and if that fails the folder is moved back.
    """
    if kind not in KINDS:
        raise RegistryError(f"adapter kind {kind!r} is not one of {KINDS}")
    _check_name(name)
    src = Path(files)
    if not src.is_dir():
        raise RegistryError(f"adapter files {src} are not a folder")

    def place(version: int) -> tuple[dict[str, Any], Any]:
        adapter_id = f"{name}-v{version}"
        dest = adapters_root(root) / kind / adapter_id
        if dest.exists():
            raise RegistryError(
                f"{dest} exists but is not registered in this warehouse; move it away or set "
                "ABLEAUDIT_ADAPTERS to a root that belongs to this warehouse"
            )
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(src), str(dest))
        record = AdapterRecord(
            adapter_id=adapter_id,
            kind=kind,
            name=name,
            version=version,
            base_model=base_model,
            base_fingerprint=base_fingerprint,
            path=str(dest),
            data_snapshot=canonical_json(data_snapshot),
            split_json=canonical_json(split) if split is not None else None,
            metrics_json=canonical_json(metrics) if metrics is not None else None,
            params_json=canonical_json(params) if params is not None else None,
        )
        return record.__dict__, lambda: shutil.move(str(dest), str(src))

    return AdapterRecord(**add_adapter(warehouse, name, kind, place))


def staging_dir(kind: str, root: str | os.PathLike | None = None) -> Path:
    """A fresh folder under the root to train into before registration moves it into place."""
    import tempfile

    base = adapters_root(root) / kind
    base.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=".training-", dir=base))
