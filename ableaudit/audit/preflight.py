"""Preflight: everything about an audit config that can be checked in seconds, before Prefect or dbt start.

``ableaudit audit`` and ``ableaudit judge`` run this first. It reads the config
(every key, with a suggestion for a near miss), then checks what the config
points at: the names it uses (domains, disability categories, query ids, the
query set, the baseline arm) against the seeds and the warehouse; each
target's and judge's backend (its packages, its ``options:`` keys and their
types, its model and adapter files, the vLLM worker); the API key a remote
server needs; and, for served models, that each server answers
``GET <base_url>/models`` within ``REACH_TIMEOUT_S`` and serves the model.
Every problem found is reported at once, in one ``ConfigError``, each line
naming the field and the fix.

Nothing here imports Prefect, dbt or a model runtime: a mistake surfaces in
about a second instead of after the flow's server and the dbt build.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import urllib.error
import urllib.request
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ableaudit import PROJECT_ROOT, redaction
from ableaudit.backends.base import BackendError
from ableaudit.backends.registry import backend_entry
from ableaudit.config import (
    AuditConfig,
    ConfigError,
    Subset,
    Target,
    load_config,
    resolve_config_path,
)
from ableaudit.errors import close_matches, did_you_mean
from ableaudit.keys import strip_url_credentials

REACH_TIMEOUT_S = 2.0
"""How long a server may take to answer ``GET /models`` before preflight calls it unreachable."""

SEEDS = PROJECT_ROOT / "seeds"
BASELINE_ARM = "baseline"
"""The arm the mitigation marts compare every other arm with."""


@dataclass(frozen=True)
class Taxonomy:
    """The names a config's subset may use, read from the seeds (no dbt needed)."""

    domains: dict[str, str]
    """Every spelling of a domain (id, display name) -> its id."""
    disabilities: dict[str, str]
    """Every spelling of a disability category (id, display, short name, phrase) -> its id."""
    query_ids: frozenset[str]
    """The query ids of the built-in query set."""


def _read_csv(name: str) -> list[dict[str, str]]:
    with open(SEEDS / name, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def load_taxonomy() -> Taxonomy:
    domains = {
        label: row["domain_id"]
        for row in _read_csv("domains.csv")
        for label in (row["domain_id"], row["display_name"])
    }
    disabilities = {
        label: row["disability_id"]
        for row in _read_csv("disabilities.csv")
        for label in (
            row["disability_id"],
            row["display_name"],
            row["short_name"],
            row["query_phrase"],
        )
    }
    queries = frozenset(row["query_id"] for row in _read_csv("queries.csv"))
    return Taxonomy(domains, disabilities, queries)


def _unknown_names(
    field: str, wanted: Iterable[str], labels: dict[str, str], what: str
) -> list[str]:
    """One problem per name not among ``labels``' ids, suggesting the id of the closest spelling."""
    ids = sorted(set(labels.values()))
    problems = []
    for name in wanted:
        if name in ids:
            continue
        hint = ""
        for near in close_matches(name, labels, n=1):  # a display name leads to its id
            label = "" if near == labels[near] else f" ({near})"
            hint = f"; did you mean {labels[near]!r}{label}?"
        problems.append(f"{field}: unknown {what} {name!r}; use ids, one of {', '.join(ids)}{hint}")
    return problems


def check_subset(sub: Subset, field: str, taxonomy: Taxonomy, builtin_set: bool) -> list[str]:
    """The text subset's domains, disability categories and (for the built-in set) query ids."""
    problems = _unknown_names(f"{field}.domains", sub.domains, taxonomy.domains, "domain")
    problems += _unknown_names(
        f"{field}.disabilities", sub.disabilities, taxonomy.disabilities, "disability category"
    )
    if builtin_set:
        for qid in sub.query_ids:
            if qid not in taxonomy.query_ids:
                problems.append(
                    f"{field}.query_ids: unknown query id {qid!r} (seeds/queries.csv)"
                    f"{did_you_mean(qid, taxonomy.query_ids)}"
                )
    return problems


def _landed_query_sets(warehouse: Path | None) -> set[str] | None:
    """The query sets landed by ``ableaudit import queries``; None when the warehouse cannot be read now."""
    if warehouse is None or not Path(warehouse).is_file():
        return set()
    import duckdb

    try:
        con = duckdb.connect(str(warehouse), read_only=True)
    except duckdb.Error:
        return None  # another process writes it: the flow's own check decides
    try:
        rows = con.execute("select distinct query_set from raw.external_queries").fetchall()
    except duckdb.Error:
        rows = []
    finally:
        con.close()
    return {r[0] for r in rows}


def check_query_set(cfg: AuditConfig, warehouse: Path | None) -> list[str]:
    from ableaudit.ingest.querysets import BUILTIN_QUERY_SETS

    if cfg.query_set in BUILTIN_QUERY_SETS:
        return []
    landed = _landed_query_sets(warehouse)
    if landed is None or cfg.query_set in landed:
        return []
    known = sorted({*BUILTIN_QUERY_SETS, *landed})
    return [
        f"query_set: {cfg.query_set!r} is neither built in nor landed in {warehouse} "
        f"(known: {', '.join(known)}){did_you_mean(cfg.query_set, known)}; land it with "
        f"`ableaudit import queries [FILE] --query-set {cfg.query_set}` or fix `query_set:`"
    ]


def check_arms(cfg: AuditConfig) -> list[str]:
    names = [a.name for a in cfg.arms]
    if BASELINE_ARM in names:
        return []
    return [
        f"arms: {name!r} looks like a misspelt {BASELINE_ARM!r}, the arm every mitigation is "
        f"compared with; rename it to {BASELINE_ARM}"
        for name in names
        if close_matches(name, [BASELINE_ARM])
    ]


def check_vision(cfg: AuditConfig, taxonomy: Taxonomy) -> list[str]:
    if not cfg.vision_targets:
        return []
    vision = cfg.vision
    try:
        root = vision.image_root_path()
    except ConfigError as err:
        return [str(err)]
    problems = []
    manifest = vision.manifest_path()
    if manifest is not None and not manifest.is_file():
        problems.append(
            f"vision.manifest: {vision.manifest!r} is not a file; point it at the image set's "
            "manifest CSV, or remove it for a PAIRS folder"
        )
    if manifest is None:
        from ableaudit.ingest.images import PAIRS_CATEGORIES, ImageSetError, find_pairs_root

        for category in vision.subset.domains:
            if category not in PAIRS_CATEGORIES:
                problems.append(
                    f"vision.subset.domains: unknown PAIRS category {category!r}; use "
                    f"{', '.join(PAIRS_CATEGORIES)}{did_you_mean(category, PAIRS_CATEGORIES)}"
                )
        try:
            find_pairs_root(root)
        except ImageSetError as err:
            problems.append(f"vision.image_root: {err}, or set vision.manifest for another set")
    problems += _unknown_names(
        "vision.subset.disabilities",
        vision.subset.disabilities,
        taxonomy.disabilities,
        "disability category",
    )
    return problems


def check_options(who: str, target: Target) -> list[str]:
    """The ``options:`` keys the target's backend reads, and their value types."""
    try:
        declared = backend_entry(target.backend, target.task).options
    except BackendError:
        return []  # config validation already named the backend
    if declared is None:
        return []
    problems = []
    for key, value in target.options.items():
        if key not in declared:
            secret = (
                "; a key never goes in the config: export it and name the variable in `api_key_env:`"
                if "key" in key.lower() or "token" in key.lower() or "secret" in key.lower()
                else ""
            )
            problems.append(
                f"{who}: options.{key} is not an option of backend {target.backend} "
                f"(it reads {', '.join(declared)}){did_you_mean(key, declared)}{secret}"
            )
            continue
        kinds = declared[key] if isinstance(declared[key], tuple) else (declared[key],)
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            wanted = " or ".join(k.__name__ for k in kinds)
            problems.append(f"{who}: options.{key} is {value!r}; it must be of type {wanted}")
    return problems


def check_vllm_engine(who: str, target: Target) -> list[str]:
    """A vllm target's ``options.engine`` and the ``ray_*`` options that go with ray-data."""
    if target.backend != "vllm":
        return []
    from ableaudit.backends.vllm_backend import _engine_args

    try:
        _engine_args(target.name, dict(target.options))
    except BackendError as err:
        return [f"{who}: {str(err).split(': ', 1)[1]}"]
    return []


def _looks_local_path(model: str) -> bool:
    return model.startswith((".", "/", "~"))


def check_model_files(who: str, target: Target, arm_adapters: Iterable[str]) -> list[str]:
    """The model and adapter files a backend that runs the model itself would load."""
    problems = []
    if target.backend == "llamacpp":
        from ableaudit.backends.llamacpp import resolve_gguf

        try:
            resolve_gguf(target.model)
        except BackendError as err:
            problems.append(f"{who}: {err}")
    elif target.backend == "transformers":
        if _looks_local_path(target.model) and not Path(target.model).expanduser().is_dir():
            problems.append(
                f"{who}: model folder {target.model!r} does not exist; fix `model:` (a local "
                "folder, or a Hugging Face id in the local cache)"
            )
        for adapter in {a for a in (target.adapter, *arm_adapters) if a}:
            if _looks_local_path(adapter) and not Path(adapter).expanduser().is_dir():
                problems.append(
                    f"{who}: adapter folder {adapter!r} does not exist; fix `adapter:` in the "
                    "target or arm"
                )
    elif target.backend == "vllm":
        cmd = target.options.get("worker_cmd") or (
            [os.environ["ABLEAUDIT_VLLM_PYTHON"]] if os.environ.get("ABLEAUDIT_VLLM_PYTHON") else []
        )
        exe = (cmd.split() or [""])[0] if isinstance(cmd, str) else (cmd or [""])[0]
        if not exe:
            problems.append(
                f"{who}: backend vllm has no worker: set env ABLEAUDIT_VLLM_PYTHON to the python "
                "of a venv with vllm, or options.worker_cmd (see docs/backends.md)"
            )
        elif not (shutil.which(str(exe)) or Path(str(exe)).is_file()):
            problems.append(
                f"{who}: vllm worker executable {exe!r} not found; fix options.worker_cmd or "
                "ABLEAUDIT_VLLM_PYTHON"
            )
    return problems


def check_requirements(who: str, target: Target) -> list[str]:
    try:
        backend_entry(target.backend, target.task).check_requirements()
    except BackendError as err:
        return [f"{who}: {err}"]
    return []


def _server_urls(target: Target) -> list[str | None]:
    """The servers an openai target talks to; None is the OpenAI API (OPENAI_BASE_URL unset)."""
    return target.base_urls or [os.environ.get("OPENAI_BASE_URL") or None]


def check_api_key(who: str, target: Target) -> list[str]:
    """A remote server needs the key the target's ``api_key_env`` names (local ones take any)."""
    if target.backend != "openai" or os.environ.get(target.api_key_env):
        return []
    from ableaudit.backends._common import is_local_url

    remote = [
        strip_url_credentials(u) if u else "the OpenAI API"
        for u in _server_urls(target)
        if u is None or not is_local_url(u)
    ]
    if not remote:
        return []
    return [
        f"{who}: no API key for {', '.join(remote)}: env var {target.api_key_env} is unset; "
        f"export {target.api_key_env}=... or set `api_key_env:` to the variable holding the key"
    ]


@dataclass(frozen=True)
class Probe:
    """One server to ask ``GET /models``: who uses it, for which model."""

    who: str
    url: str
    model: str
    key: str | None


def probe_server(probe: Probe, timeout_s: float = REACH_TIMEOUT_S) -> str | None:
    """None when the server answers and serves the model, else the problem, naming the fix."""
    from ableaudit.backends._common import basic_auth_header

    shown = strip_url_credentials(probe.url)
    headers = {"Accept": "application/json"}
    auth = basic_auth_header(probe.url)
    if auth:
        headers["Authorization"] = auth
    elif probe.key:
        headers["Authorization"] = f"Bearer {probe.key}"
    request = urllib.request.Request(shown.rstrip("/") + "/models", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as reply:
            body = reply.read(2_000_000)
    except urllib.error.HTTPError as err:
        if err.code in (401, 403):
            return (
                f"{probe.who}: {shown} rejected the API key (HTTP {err.code}); check the env var "
                "the target's `api_key_env:` names"
            )
        if err.code == 404 and not urlsplit(shown).path.rstrip("/").endswith("/v1"):
            return (
                f"{probe.who}: {shown} has no /models (HTTP 404); OpenAI-compatible servers "
                f"answer under /v1: did you mean base_url {shown.rstrip('/')}/v1? (options."
                "check_server: false skips this check)"
            )
        return None  # some servers have no /models; the chat calls will tell
    except (urllib.error.URLError, OSError, ValueError) as err:
        reason = getattr(err, "reason", err)
        port = urlsplit(shown).port
        serve = f"`vllm serve {probe.model}" + (f" --port {port}`" if port else "`")
        return (
            f"{probe.who}: cannot reach {shown} (GET /models: {reason}). Start the server "
            f"(e.g. {serve}), or fix `base_url:`"
        )
    try:
        served = [str(m["id"]) for m in json.loads(body).get("data", [])]
    except (ValueError, TypeError, KeyError, AttributeError):
        return None  # not a model listing; the chat calls will tell
    if served and probe.model not in served:
        return (
            f"{probe.who}: {shown} does not serve model {probe.model!r}; it serves "
            f"{', '.join(served[:20])}{did_you_mean(probe.model, served)}. Fix `model:`"
        )
    return None


def check_servers(probes: list[Probe]) -> list[str]:
    """Every server at once: N unreachable servers cost one timeout, not N."""
    unique = list(dict.fromkeys(probes))
    with ThreadPoolExecutor(max_workers=max(1, min(16, len(unique)))) as pool:
        return [p for p in pool.map(probe_server, unique) if p]


def check_task_runner(cfg: AuditConfig, reach: bool) -> list[str]:
    """``task_runner:``: the cluster packages its kind needs, its scheduler reachable (``reach``),
    and targets a cluster worker can run: a served model (``openai``), or a backend it loads
    itself (each chunk loads it again: a large ``chunk_size`` suits those)."""
    from ableaudit.audit.runners import INSTALL_HINT, missing_packages

    runner = cfg.task_runner
    if runner.kind == "thread":
        return []
    missing = missing_packages(runner.kind)
    if missing:
        return [
            f"task_runner.kind: {runner.kind} needs {', '.join(missing)}, not installed here: "
            f"{INSTALL_HINT[runner.kind]} (or remove task_runner: to run targets on threads here)"
        ]
    if not reach or runner.local:
        return []
    parts = urlsplit(runner.address if "://" in runner.address else f"tcp://{runner.address}")
    try:
        host, port = parts.hostname, parts.port
    except ValueError:
        host, port = None, None
    if not host or not port:
        return [
            f"task_runner.address: {runner.address!r} names no host and port; write it as "
            "tcp://HOST:8786 (dask) or ray://HOST:10001 (ray)"
        ]
    import socket

    try:
        socket.create_connection((host, port), timeout=REACH_TIMEOUT_S).close()
    except OSError as err:
        return [
            f"task_runner.address: the {runner.kind} scheduler at {runner.address} is not "
            f"reachable ({err}); start it (docs/scale-out.md) or set address: auto for a local cluster"
        ]
    return []


def _targets(cfg: AuditConfig, judges_only: bool = False) -> list[tuple[str, Target]]:
    """The models the audit runs (its targets, unless ``judges_only``, and its judges' targets),
    each with how messages name it."""
    targets = [] if judges_only else [(f"target {t.name!r}", t) for t in cfg.targets]
    return targets + [(f"judge {j.name!r}", j.target) for j in cfg.judges]


def check(
    cfg: AuditConfig,
    warehouse: Path | None = None,
    *,
    reach: bool = True,
    judges_only: bool = False,
) -> list[str]:
    """Every problem preflight finds in a parsed config (empty: ready to run).

    ``reach``: also ask each server for its models. ``judges_only``: the judges run alone
    (``ableaudit judge``), so only their models are checked.
    """
    models = _targets(cfg, judges_only)
    for _, target in models:
        redaction.remember_env(target.api_key_env)
        for url in _server_urls(target):
            redaction.remember_url(url)
    probes = [
        Probe(who, url, target.model, os.environ.get(target.api_key_env))
        for who, target in models
        if reach
        and target.backend == "openai"
        and target.options.get("check_server", True) is not False
        for url in _server_urls(target)
        if url
    ]
    # the servers are asked first, so their answers come while the rest is checked
    with ThreadPoolExecutor(max_workers=max(1, min(16, len(probes)))) as pool:
        answers = pool.map(probe_server, list(dict.fromkeys(probes)))
        taxonomy = load_taxonomy()
        problems: list[str] = []
        if cfg.text_targets and not judges_only:
            from ableaudit.ingest.querysets import BUILTIN_QUERY_SETS

            problems += check_query_set(cfg, warehouse)
            problems += check_subset(
                cfg.subset, "subset", taxonomy, builtin_set=cfg.query_set in BUILTIN_QUERY_SETS
            )
        problems += check_arms(cfg)
        problems += check_vision(cfg, taxonomy)
        if not judges_only:
            problems += check_task_runner(cfg, reach)
        arm_adapters = [a.adapter for a in cfg.arms if a.adapter]
        for who, target in models:
            problems += check_requirements(who, target)
            problems += check_options(who, target)
            problems += check_vllm_engine(who, target)
            problems += check_model_files(who, target, arm_adapters)
            problems += check_api_key(who, target)
        return problems + [answer for answer in answers if answer]


def preflight(
    config: str | Path,
    warehouse: str | Path | None = None,
    *,
    reach: bool = True,
    judges_only: bool = False,
) -> tuple[Path, AuditConfig]:
    """The config's resolved path and its parsed form, or one ConfigError listing every problem."""
    path = resolve_config_path(config)
    cfg = load_config(path)
    wh = Path(warehouse) if warehouse else None
    problems = check(cfg, wh, reach=reach, judges_only=judges_only)
    if problems:
        lines = "\n".join(f"  - {p}" for p in problems)
        raise ConfigError(
            f"audit config {path}: {len(problems)} problem{'s' if len(problems) > 1 else ''} "
            f"found before starting:\n{lines}"
        )
    return path, cfg


def config_yaml(data: dict[str, Any]) -> str:
    """A config as YAML, keys in the order written (the form ``--print-config`` shows)."""
    import yaml

    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
