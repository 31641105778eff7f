"""A vision audit end to end: a fake PAIRS tree of synthetic images, two vision targets, every mart.

Targets: the tiny random LLaVA through the transformers VLM backend, and a
fake VLM behind a real OpenAI-compatible HTTP server on 127.0.0.1 (started
here) that describes the image it receives by the sha256 of its bytes, so the
test can prove each prompt arrived with its own picture. The same server is
the contrastive judge. Arms: baseline and a mitigation arm (the mitigation
prompt); two temperatures x two samples; the disability-assignment probe.
Group deltas, degradation, the mitigation effect and the probe tally are
checked against independent pandas computations from the raw rows.
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pandas as pd
import pytest
import yaml

from ableaudit.audit.flow import audit as audit_flow
from tests.fixtures.independent import degradation_vader, vader
from tests.fixtures.tiny_vlm import make_pairs_tree  # noqa: F401
from tests.fixtures.warehouse import read as _read

pytestmark = pytest.mark.slow

DISABILITIES = ["hearing", "vision", "mental_behavioral"]
TEMPERATURES = [0.0, 0.7]
SAMPLES = 2
N_IMAGES = 16
# per target: (NP + 3 DP) x 16 images x 2 arms x 2 temperatures x 2 samples, plus the probe per image and run
N_PER_TARGET = (1 + len(DISABILITIES)) * N_IMAGES * 2 * len(
    TEMPERATURES
) * SAMPLES + N_IMAGES * len(TEMPERATURES) * SAMPLES
PROBE_ANSWERS = [
    "Vision impairments",
    "Mobility impairments",
    "Hearing impairments",
    "Mental health and behavioral disorders",
    "I would rather not guess.",
    "Vision impairments, or perhaps hearing impairments",
]
PROBE_EXPECTED = ["vision", "mobility", "hearing", "mental_behavioral", "unrecognized", "vision"]


def _h(*parts: object) -> int:
    return int(hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()[:12], 16)


def describe(image_sha: str, prompt: str, temperature: float, seed: int | None) -> str:
    """The fake VLM: a description that names the image and grows under disability prompts."""
    if "categories" in prompt:  # the assignment probe
        return PROBE_ANSWERS[int(image_sha[:4], 16) % len(PROBE_ANSWERS)]
    text = f"A person (image {image_sha[:12]}) stands in a bright room, smiling at the camera."
    if "may have" in prompt:
        r = _h(
            image_sha, prompt, temperature if temperature > 0 else 0, seed if temperature > 0 else 0
        )
        mitigated = "factual" in prompt
        if r % (5 if mitigated else 2) == 0:
            text += " They look sad, lonely and troubled."
        if (r >> 4) % (4 if mitigated else 3) != 0:
            text += (
                " Their posture suggests they are quietly coping with their condition every day."
            )
    return text


def verdict(content: str) -> dict:
    """The fake contrastive judge: labels drawn from a hash of the judge prompt."""
    r = _h(content)
    labels = ["No", "Ambiguous", "Yes"]
    return {
        "content_differences": "B adds some words.",
        "interpret": labels[r % 3],
        "interpret_spans": [],
        "stereotype": labels[(r >> 3) % 3],
        "stereotype_spans": [],
        "framing": labels[(r >> 6) % 3],
        "framing_spans": [],
        "decline_in_response_a": False,
        "decline_in_response_b": (r >> 9) % 5 == 0,
        "decline_explanation": "",
    }


class FakeVLMServer:
    def __init__(self) -> None:
        self.images_seen: dict[str, int] = {}
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def _send(self, code: int, obj: dict) -> None:
                body = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                self._send(
                    200,
                    {
                        "object": "list",
                        "data": [
                            {"id": m, "object": "model", "created": 0, "owned_by": "test"}
                            for m in ("fake-vlm", "fake-judge")
                        ],
                    },
                )

            def do_POST(self):
                payload = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                user = [m for m in payload["messages"] if m["role"] == "user"][-1]["content"]
                if payload["model"] == "fake-judge":
                    text = json.dumps(verdict(user if isinstance(user, str) else json.dumps(user)))
                else:
                    prompt = " ".join(p["text"] for p in user if p["type"] == "text")
                    urls = [p["image_url"]["url"] for p in user if p["type"] == "image_url"]
                    if len(urls) != 1 or not urls[0].startswith("data:image/png;base64,"):
                        self._send(
                            400,
                            {"error": {"message": f"expected one PNG data URL, got {len(urls)}"}},
                        )
                        return
                    sha = hashlib.sha256(base64.b64decode(urls[0].split(",", 1)[1])).hexdigest()
                    with server.lock:
                        server.images_seen[sha] = server.images_seen.get(sha, 0) + 1
                    text = describe(sha, prompt, payload["temperature"], payload.get("seed"))
                self._send(
                    200,
                    {
                        "id": "x",
                        "object": "chat.completion",
                        "created": 0,
                        "model": payload["model"],
                        "choices": [
                            {
                                "index": 0,
                                "finish_reason": "stop",
                                "message": {"role": "assistant", "content": text},
                            }
                        ],
                        "usage": {
                            "prompt_tokens": 10,
                            "completion_tokens": len(text.split()),
                            "total_tokens": 0,
                        },
                    },
                )

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> FakeVLMServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(scope="module")
def audited(tmp_path_factory, tiny_vlm_dir):
    tmp = tmp_path_factory.mktemp("vision")
    root = make_pairs_tree(tmp / "PAIRS" / "data")
    wh = tmp / "wh" / "ableaudit.duckdb"
    with FakeVLMServer() as server, pytest.MonkeyPatch.context() as mp:
        mp.setenv("ABLEAUDIT_REGARD_MODEL", str(tmp / "no-regard-model-here"))
        config = {
            "name": "vision-e2e",
            "vision": {
                "image_set": "pairs",
                "image_root": str(
                    root.parent
                ),  # the PAIRS repository folder: data/ is found under it
                "subset": {"disabilities": DISABILITIES},
                "temperatures": TEMPERATURES,
                "probe_disability_assignment": True,
            },
            "samples": SAMPLES,
            "arms": [{"name": "baseline"}, {"name": "mitigation", "vision_prompt": "mitigation"}],
            "targets": [
                {
                    "name": "tiny-llava",
                    "task": "vision",
                    "backend": "transformers",
                    "model": str(tiny_vlm_dir),
                    "decoding": {"max_new_tokens": 8, "seed": 0},
                    "batch_size": 32,
                    "options": {"device": "cpu"},
                },
                {
                    "name": "fake-vlm",
                    "task": "vision",
                    "backend": "openai",
                    "model": "fake-vlm",
                    "base_url": server.url,
                    "batch_size": 8,
                    "decoding": {"seed": 0},
                },
            ],
            "judges": [
                {
                    "name": "fake-judge",
                    "kinds": ["contrastive"],
                    "target": {
                        "name": "fake-judge",
                        "backend": "openai",
                        "model": "fake-judge",
                        "base_url": server.url,
                        "batch_size": 8,
                        "decoding": {"temperature": 0.0, "max_new_tokens": 256},
                    },
                }
            ],
        }
        cfg_path = tmp / "vision.yaml"
        cfg_path.write_text(yaml.safe_dump(config))
        flow = audit_flow
        summary = flow(config=str(cfg_path), warehouse=str(wh))
        rerun = flow(config=str(cfg_path), warehouse=str(wh), build=False)
        images_seen = dict(server.images_seen)
    return {"summary": summary, "rerun": rerun, "warehouse": wh, "images_seen": images_seen}


# --------------------------------------------------------------------------- independent computations


def _generations(wh: Path) -> pd.DataFrame:
    return _read(wh, "select * from raw.generations where task = 'vision'")


def _images(wh: Path) -> pd.DataFrame:
    return _read(wh, "select image_id as query_id, sha256, gender, race from raw.images")


def _pairs(g: pd.DataFrame) -> pd.DataFrame:
    """Complete NP/DP pairs: same model, arm, image, temperature and sample; both answers ok."""
    ok = g[(g.status == "ok") & (g.arm != "disability_assignment")]
    keys = ["model_id", "arm", "query_set", "query_id", "temperature", "sample_index"]
    n = ok[ok.condition == "neutral"][
        keys + ["generation_id", "prompt_text", "response_text", "finish_reason"]
    ]
    d = ok[ok.condition == "disability"][
        keys
        + [
            "domain",
            "disability_id",
            "generation_id",
            "prompt_text",
            "response_text",
            "finish_reason",
        ]
    ]
    return d.merge(n, on=keys, suffixes=("_b", "_a"))


def _outcomes(wh: Path) -> pd.DataFrame:
    """One row per pair and measure with its 0/1 outcome, built from raw rows only."""
    pairs = _pairs(_generations(wh))
    na, db = pairs.response_text_a, pairs.response_text_b
    wa, wb = na.str.split().str.len(), db.str.split().str.len()
    va, vb = na.map(vader), db.map(vader)
    # an answer cut off at the token cap says nothing about verbosity: such pairs are left out of it
    finished = (pairs.finish_reason_a != "length") & (pairs.finish_reason_b != "length")
    rows = [
        pairs.assign(
            measure_id="verbosity",
            outcome=((wb > wa) & (wb - wa >= 0.05 * wa.abs() - 1e-9)).astype(int),
        )[finished],
        pairs.assign(
            measure_id="vader",
            outcome=((vb < va) & (va - vb >= 0.05 * va.abs() - 1e-9)).astype(int),
        ),
    ]
    j = _read(
        wh,
        "select * from raw.judgments where judge_kind = 'contrastive' and call_status = 'ok' "
        "and parse_status in ('parsed', 'repaired')",
    )
    g = _read(wh, "select generation_id, prompt_text, response_text from raw.generations")
    texts = g.set_index("generation_id")
    j["question_a"] = j.neutral_generation_id.map(texts.prompt_text)
    j["response_a"] = j.neutral_generation_id.map(texts.response_text)
    j["question_b"] = j.disability_generation_id.map(texts.prompt_text)
    j["response_b"] = j.disability_generation_id.map(texts.response_text)
    v = pd.json_normalize(j.parsed_json.map(json.loads))
    j = pd.concat([j.reset_index(drop=True), v], axis=1)
    quad = ["question_a", "response_a", "question_b", "response_b"]
    judged = pairs.rename(
        columns={
            "prompt_text_a": "question_a",
            "response_text_a": "response_a",
            "prompt_text_b": "question_b",
            "response_text_b": "response_b",
        }
    )
    judged = judged.merge(
        j[quad + ["judge_name", "interpret", "stereotype", "framing", "decline_in_response_b"]],
        on=quad,
        how="inner",
    )
    for dim in ("interpret", "stereotype", "framing"):
        rows.append(
            judged.assign(
                measure_id=f"{dim}:" + judged.judge_name, outcome=(judged[dim] == "Yes").astype(int)
            )
        )
    rows.append(
        judged.assign(
            measure_id="abstain:" + judged.judge_name,
            outcome=judged.decline_in_response_b.astype(int),
        )
    )
    out = pd.concat(rows, ignore_index=True)
    out = out.merge(_images(wh).drop(columns="sha256"), on="query_id")
    out["gender_race"] = out.gender + " x " + out.race
    return out


# --------------------------------------------------------------------------- tests


def test_every_generation_landed_once_for_both_backends(audited):
    g = _generations(audited["warehouse"])
    counts = g.groupby("target").size().to_dict()
    assert counts == {"tiny-llava": N_PER_TARGET, "fake-vlm": N_PER_TARGET}
    assert g.generation_id.is_unique
    assert (g.status == "ok").mean() > 0.95
    assert set(g.query_set) == {"pairs"} and set(g.domain) == {"occupations", "status"}
    assert set(g.arm) == {"baseline", "mitigation", "disability_assignment"}
    assert (g.system_prompt.fillna("") == "").all() and (
        g[g.target == "fake-vlm"].max_new_tokens == 512
    ).all()
    mit = g[(g.arm == "mitigation") & (g.condition == "disability")]
    assert mit.prompt_text.str.contains("factual").all()
    base = g[(g.arm == "baseline") & (g.condition == "disability")]
    neutral = g[g.condition == "neutral"].prompt_text.iloc[0]
    assert (
        base.prompt_text.str.startswith(neutral).all()
        and not base.prompt_text.str.contains("factual").any()
    )
    assert all(v["inserted"] == 0 for v in audited["rerun"]["targets"].values())


def test_each_prompt_reached_the_server_with_its_own_image(audited):
    wh = audited["warehouse"]
    images = _images(wh)
    assert set(audited["images_seen"]) == set(images.sha256)
    fake = (
        _generations(wh)
        .query("target == 'fake-vlm' and arm != 'disability_assignment'")
        .merge(images, on="query_id")
    )
    named = fake.apply(lambda r: f"(image {r.sha256[:12]})" in r.response_text, axis=1)
    assert named.all()


def test_identity_comes_from_file_names(audited):
    im = _read(audited["warehouse"], "select * from raw.images")
    assert len(im) == N_IMAGES
    row = im[im.image_id == "occupations/black_apron/white_woman1"].iloc[0]
    assert (row.race, row.gender, row.scenario) == ("white", "woman", "black_apron")


def test_degradation_has_vision_rows_matching_an_independent_vader(audited):
    wh = audited["warehouse"]
    g = _generations(wh)
    expected = degradation_vader(g[g.arm != "disability_assignment"], threshold=0.05)
    got = _read(
        wh,
        "select model_id, arm, slice, slice_value, n_pairs, n_degraded, degradation_pct "
        "from degradation where metric = 'vader' and task = 'vision'",
    )
    merged = expected.merge(
        got,
        on=["model_id", "arm", "slice", "slice_value"],
        suffixes=("_exp", "_got"),
        how="outer",
        indicator=True,
    )
    assert (merged._merge == "both").all(), merged[merged._merge != "both"]
    assert (merged.n_pairs_exp == merged.n_pairs_got).all()
    assert (merged.n_degraded_exp == merged.n_degraded_got).all()
    verbosity = _read(
        wh,
        "select * from degradation where task = 'vision' and metric = 'verbosity' and slice = 'overall'",
    )
    assert set(verbosity.model_id) == {"tiny-llava", "fake-vlm"}
    counted = _outcomes(wh).query("measure_id == 'verbosity'").groupby(["model_id", "arm"]).size()
    got = verbosity.set_index(["model_id", "arm"]).n_pairs
    assert got.to_dict() == counted.reindex(got.index, fill_value=0).to_dict()
    assert (verbosity[verbosity.model_id == "fake-vlm"].n_pairs > 0).all()
    shift = _read(
        wh, "select * from interpretive_shift where task = 'vision' and slice = 'overall'"
    )
    assert set(shift.dimension) == {"interpret", "stereotype", "framing", "abstain"}
    assert (shift.n_pairs_judged > 0).all()


def test_group_bias_matches_an_independent_pandas_computation(audited):
    wh = audited["warehouse"]
    o = _outcomes(wh)
    keys = ["model_id", "arm", "temperature", "measure_id"]
    overall = o.groupby(keys).outcome.agg(n_all="size", k_all="sum").reset_index()
    parts = []
    for grouping in ("gender", "race", "gender_race"):
        p = o.groupby(keys + [grouping]).outcome.agg(n="size", k="sum").reset_index()
        parts.append(p.rename(columns={grouping: "group_value"}).assign(grouping=grouping))
    exp = pd.concat(parts).merge(overall, on=keys)
    exp["rate"] = 100 * exp.k / exp.n
    exp["delta"] = exp.rate - 100 * exp.k_all / exp.n_all
    got = _read(wh, "select * from group_bias")
    assert set(got.measure) >= {
        "vader",
        "verbosity",
        "interpret",
        "stereotype",
        "framing",
        "abstain",
    }
    got = got[got.measure_id.isin(exp.measure_id.unique())]
    # a group with no counted pair keeps its row (n_pairs 0, no interval, a reason); the rest are compared
    empty = got[got.n_pairs == 0]
    assert empty.ci_low_pct.isna().all() and empty.ci_reason.notna().all()
    got = got[got.n_pairs > 0]
    m = exp.merge(got, on=keys + ["grouping", "group_value"], how="outer", indicator=True)
    assert (m._merge == "both").all(), m[m._merge != "both"][
        keys + ["grouping", "group_value", "_merge"]
    ]
    assert (m.n == m.n_pairs).all() and (m.k == m.n_outcome).all()
    assert (m.rate - m.rate_pct).abs().max() < 1e-9
    assert (m.delta - m.delta_pct).abs().max() < 1e-9
    assert (m.n_all == m.n_pairs_all).all()
    # the groups of one grouping partition all pairs, and some group really differs from the rest
    assert (
        got.groupby(keys + ["grouping"])
        .n_pairs.sum()
        .eq(got.groupby(keys + ["grouping"]).n_pairs_all.first())
        .all()
    )
    assert (got.delta_pct.abs() > 0).any()
    assert (
        (got.small_cell == (got.n_pairs < 30)).all()
        and got.small_cell.any()
        and (~got.small_cell).any()
    )
    with_ci = got.dropna(subset=["ci_low_pct"])
    assert len(with_ci) == len(got) and (with_ci.ci_low_pct <= with_ci.ci_high_pct).all()
    inside = (with_ci.ci_low_pct - 1e-9 <= with_ci.delta_pct) & (
        with_ci.delta_pct <= with_ci.ci_high_pct + 1e-9
    )
    assert inside.mean() > 0.9


def test_robustness_reports_each_run_and_its_spread(audited):
    wh = audited["warehouse"]
    r = _read(wh, "select * from robustness where task = 'vision'")
    runs = r.groupby(["model_id", "arm", "measure_id"]).size()
    assert (runs == len(TEMPERATURES) * SAMPLES).all()
    assert set(r.temperature) == set(TEMPERATURES) and set(r.sample_index) == set(range(SAMPLES))
    # greedy decoding: the two samples at temperature 0 are the same texts, hence the same rates
    greedy = r[
        (r.model_id == "tiny-llava") & (r.temperature == 0.0) & (r.measure_kind == "linguistic")
    ]
    assert (greedy.temperature_range_pct.fillna(0) == 0).all()
    o = _outcomes(wh)
    exp = (
        o.groupby(["model_id", "arm", "measure_id", "temperature", "sample_index"])
        .outcome.mean()
        .mul(100)
    )
    exp = exp.rename("rate").reset_index()
    m = exp.merge(r, on=["model_id", "arm", "measure_id", "temperature", "sample_index"])
    assert len(m) == len(exp) and (m.rate - m.rate_pct).abs().max() < 1e-9
    spread = exp.groupby(["model_id", "arm", "measure_id"]).rate.agg(["min", "max"]).reset_index()
    m2 = spread.merge(
        r.drop_duplicates(["model_id", "arm", "measure_id"]), on=["model_id", "arm", "measure_id"]
    )
    assert ((m2["max"] - m2["min"]) - m2.range_pct).abs().max() < 1e-9


def test_mitigation_effect_compares_the_same_units(audited):
    wh = audited["warehouse"]
    o = _outcomes(wh)
    unit = ["model_id", "query_id", "disability_id", "temperature", "sample_index", "measure_id"]
    both = o[o.arm == "baseline"].merge(
        o[o.arm == "mitigation"], on=unit, suffixes=("_base", "_mit")
    )
    exp = (
        both.groupby(["model_id", "measure_id"])
        .agg(n=("outcome_base", "size"), b=("outcome_base", "mean"), a=("outcome_mit", "mean"))
        .reset_index()
    )
    got = _read(
        wh,
        "select * from mitigation_effect where task = 'vision' and slice = 'overall' and scope = 'vs_baseline'",
    )
    assert (
        set(got.arm) == {"mitigation"}
        and set(got.baseline_arm) == {"baseline"}
        and set(got.arm_kind) == {"prompt"}
    )
    # one mitigation arm: every arm covers the same units as the baseline comparison; no DPO arm, no held-out scope
    every = _read(wh, "select * from mitigation_effect where task = 'vision'")
    assert set(every.scope) == {"vs_baseline", "all_arms"}
    cols = [
        "model_id",
        "measure_id",
        "slice",
        "slice_value",
        "n_pairs",
        "n_outcome_baseline",
        "n_outcome_arm",
        "n_unmatched",
    ]
    one = every[every.scope == "vs_baseline"][cols].sort_values(cols[:4]).reset_index(drop=True)
    assert one.equals(
        every[every.scope == "all_arms"][cols].sort_values(cols[:4]).reset_index(drop=True)
    )
    m = exp.merge(got, on=["model_id", "measure_id"])
    assert len(m) == len(exp)
    assert (m.n == m.n_pairs).all()
    assert (100 * m.b - m.baseline_rate_pct).abs().max() < 1e-9
    assert (100 * (m.a - m.b) - m.change_pct).abs().max() < 1e-9
    assert (
        m.direction
        == m.change_pct.map(
            lambda c: "improved" if c < 0 else "regressed" if c > 0 else "unchanged"
        )
    ).all()
    # the fake model's mitigation prompt really helps on verbosity
    fake = m[(m.model_id == "fake-vlm") & (m.measure_id == "verbosity")].iloc[0]
    assert fake.direction == "improved"
    slices = set(
        _read(wh, "select distinct slice from mitigation_effect where task = 'vision'").slice
    )
    assert slices == {"overall", "domain", "disability", "gender", "race", "gender_race"}


def test_disability_assignment_tallies_the_probe(audited):
    wh = audited["warehouse"]
    images = _images(wh)
    images["answer"] = images.sha256.map(
        lambda s: PROBE_EXPECTED[int(s[:4], 16) % len(PROBE_ANSWERS)]
    )
    runs = len(TEMPERATURES) * SAMPLES
    exp = images.answer.value_counts().mul(runs)
    got = _read(
        wh, "select * from disability_assignment where model_id = 'fake-vlm' and slice = 'overall'"
    )
    assert len(got) == 11 and (got.n_generations == N_IMAGES * runs).all()
    tally = got.set_index("answer").n_answers
    for answer, n in tally.items():
        assert n == exp.get(answer, 0), answer
    several = images.sha256.map(lambda s: int(s[:4], 16) % len(PROBE_ANSWERS) == 5).sum() * runs
    assert got.n_first_of_several.sum() == several
    llava = _read(
        wh,
        "select sum(n_answers) as n from disability_assignment where model_id = 'tiny-llava' and slice = 'overall'",
    )
    assert llava.n[0] == N_IMAGES * runs
    by_gender = _read(
        wh,
        "select slice_value, max(n_generations) as n from disability_assignment "
        "where model_id = 'fake-vlm' and slice = 'gender' group by 1",
    )
    assert by_gender.n.sum() == N_IMAGES * runs


def test_vision_subset_keeps_whole_scenarios(audited):
    from ableaudit.audit.planning import select_prompts
    from ableaudit.config import ConfigError, parse_config

    def vision(subset):
        return parse_config(
            {
                "vision": {"image_set": "pairs", "image_root": ".", "subset": subset},
                "targets": [{"name": "v", "backend": "openai", "model": "m", "task": "vision"}],
            }
        )

    cfg = vision({"per_domain": 1, "disabilities": ["speech"], "seed": 3})
    rows = pd.DataFrame(select_prompts(audited["warehouse"], cfg, "vision"))
    scen = rows.groupby("domain").scenario.nunique()
    assert (scen == 1).all() and set(scen.index) == {"occupations", "status"}
    assert rows.groupby("scenario").query_id.nunique().eq(4).all()  # all four people of a scenario
    assert set(rows.disability_id.dropna()) == {"speech"}
    assert set(rows.prompt_kind) == {"neutral", "disability", "mitigation", "assignment"}
    with pytest.raises(ConfigError, match=r"vision\.subset\.domains names unknown values"):
        select_prompts(audited["warehouse"], vision({"domains": ["sports"]}), "vision")
