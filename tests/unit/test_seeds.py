"""The taxonomy seeds and the ableaudit query set, checked the way the paper validated its own.

AccessEval (section 3.2) kept a pair only if the neutral query carries no
disability context and no two queries are near-duplicates; the comparison
between a neutral and a disability-aware answer is only meaningful if both are
true and if the template is the same question plus disability context. These
tests make those three properties mechanical, so an edit to seeds/queries.csv
that breaks one of them fails here rather than skewing every mart.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

import numpy as np
import pytest
import yaml
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.metrics.pairwise import cosine_similarity

ROOT = Path(__file__).resolve().parents[2]
SEEDS = ROOT / "seeds"

DISABILITY_IDS = [
    "vision",
    "hearing",
    "speech",
    "mobility",
    "neurological",
    "genetic_developmental",
    "learning",
    "sensory_cognitive",
    "mental_behavioral",
]
DOMAIN_IDS = ["education", "finance", "healthcare", "hospitality", "media", "technology"]
DOMAIN_PREFIX = {
    "education": "edu",
    "finance": "fin",
    "healthcare": "hea",
    "hospitality": "hos",
    "media": "med",
    "technology": "tec",
}
PER_DOMAIN = 39
PLACEHOLDER = "{disability}"

# Words that put disability context into a neutral query. Deliberately broad
# (a neutral query should not need "access", "speech", "hearing" or "vision" at
# all, so those are banned outright rather than only in disability senses), and
# it includes indirect hints: conditions, aids, support services, benefits.
# Not listed because they false-positive on ordinary queries: "ADD" (as in "add
# online ordering"), "diagnosis" (a diabetes diagnosis is health, not disability
# context); "all-inclusive" (resorts) is exempted from "inclusi*".
LEAKAGE_PATTERNS = [
    r"disab\w*",
    r"access\w*",
    r"impair\w*",
    r"handicap\w*",
    r"wheel\s*chair\w*",
    r"deaf\w*",
    r"blind\w*",
    r"autis\w*",
    r"adhd",
    r"dyslex\w*",
    r"dyspra\w*",
    r"dyscalcul\w*",
    r"special\s+(?:needs|education|ed)",
    r"accommodat\w*",
    r"mobility",
    r"hearing",
    r"sign\s+language",
    r"asl",
    r"braille",
    r"screen\s*readers?",
    r"mental\s+health",
    r"mental(?:ly)?",
    r"psychiatr\w*",
    r"disorders?",
    r"neuro\w*",
    r"cognitiv\w*",
    r"sensory",
    r"developmental\w*",
    r"genetic\w*",
    r"syndrome\w*",
    r"speech",
    r"stutter\w*",
    r"vision",
    r"visual(?:ly)?",
    r"sight(?:ed)?",
    r"caption\w*",
    r"subtitle\w*",
    r"alt[\s-]text",
    r"assistive",
    r"adaptive",
    r"(?<!all-)inclusi\w*",
    r"ableis\w*",
    r"able[\s-]bodied",
    r"paraly\w*",
    r"paraplegi\w*",
    r"quadriplegi\w*",
    r"amputee\w*",
    r"prosthe\w*",
    r"crutch\w*",
    r"cane",
    r"walker",
    r"guide\s+dogs?",
    r"service\s+(?:animals?|dogs?)",
    r"ramps?",
    r"step[\s-]free",
    r"seizures?",
    r"epilep\w*",
    r"dementia",
    r"alzheimer\w*",
    r"parkinson\w*",
    r"cerebral\s+palsy",
    r"down\s+syndrome",
    r"anxiety",
    r"depress\w*",
    r"bipolar",
    r"ptsd",
    r"ocd",
    r"schizo\w*",
    r"therap\w*",
    r"chronic\w*",
    r"caregiv\w*",
    r"iep",
    r"504",
    r"ssdi",
    r"ssi",
    r"medicaid",
    r"neurodiverg\w*",
    r"neurotypical",
    r"wellbeing",
    r"well-being",
    r"struggl\w*",
    r"condition\w*",
]
LEAKAGE_RE = re.compile(r"\b(?:" + "|".join(LEAKAGE_PATTERNS) + r")\b", re.IGNORECASE)

# Near-duplicate thresholds (TF-IDF cosine over the 234 neutral queries).
# Measured on this set: the most similar pair scores ~0.36 on word 1-2grams and
# ~0.42 on char_wb 3-5grams (pairs that merely share a stem such as "What is the
# best way to ..."). A light paraphrase of one query ("How can I make new friends
# in my first semester living in the dorms?") scores ~0.55 / ~0.79 against its
# original, a near-copy ~0.68 / ~0.98. The thresholds sit between the two
# populations. TF-IDF cannot see paraphrases with no shared words (the paper's
# "note taking strategies" vs "lecture review methods" scores < 0.1); that kind of
# overlap is kept out by review, not by this test.
WORD_THRESHOLD = 0.50
CHAR_THRESHOLD = 0.60

# The template must be the neutral question plus disability context.
MIN_CONTENT_OVERLAP = 0.60
STOPWORDS = set(
    "a an the and or of to for in on at by with as is are be do does did how what which "
    "when where who whom whose why should can could would will i my me we our us you your "
    "it its that this these those if from into about than then so not no there their they "
    "them one some any all more most much very just get".split()
)


def _read_csv(name: str) -> list[dict[str, str]]:
    with open(SEEDS / name, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def disabilities() -> list[dict[str, str]]:
    return _read_csv("disabilities.csv")


@pytest.fixture(scope="module")
def domains() -> list[dict[str, str]]:
    return _read_csv("domains.csv")


@pytest.fixture(scope="module")
def queries() -> list[dict[str, str]]:
    return _read_csv("queries.csv")


def leakage(text: str) -> list[str]:
    """Every leakage term found in ``text`` (empty when the text is clean)."""
    return [m.group(0) for m in LEAKAGE_RE.finditer(text)]


def content_words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in STOPWORDS and len(w) > 1}


def similar_pairs(
    texts: list[str], vectorizer: TfidfVectorizer, threshold: float
) -> list[tuple[float, str, str]]:
    """Pairs at or above ``threshold``, most similar first."""
    sims = cosine_similarity(vectorizer.fit_transform(texts))
    i, j = np.triu_indices_from(sims, k=1)
    hits = sims[i, j] >= threshold
    pairs = [(float(s), texts[a], texts[b]) for s, a, b in zip(sims[i, j][hits], i[hits], j[hits])]
    return sorted(pairs, reverse=True)


def max_similarity(texts: list[str], vectorizer: TfidfVectorizer) -> tuple[float, str, str]:
    sims = cosine_similarity(vectorizer.fit_transform(texts))
    np.fill_diagonal(sims, -1.0)
    a, b = np.unravel_index(int(np.argmax(sims)), sims.shape)
    return float(sims[a, b]), texts[a], texts[b]


def word_vectorizer() -> TfidfVectorizer:
    return TfidfVectorizer(analyzer="word", ngram_range=(1, 2), lowercase=True)


def char_vectorizer() -> TfidfVectorizer:
    return TfidfVectorizer(analyzer="char_wb", ngram_range=(3, 5), lowercase=True)


# --- taxonomy -----------------------------------------------------------------


def test_disabilities_are_the_papers_nine_in_order(disabilities):
    assert list(disabilities[0]) == [
        "disability_id",
        "display_name",
        "short_name",
        "query_phrase",
        "sort_order",
    ]
    assert [d["disability_id"] for d in disabilities] == DISABILITY_IDS
    assert [int(d["sort_order"]) for d in disabilities] == list(range(1, 10))
    for d in disabilities:
        assert d["query_phrase"] == d["query_phrase"].lower()
        assert d["query_phrase"] == d["display_name"].lower(), (
            "phrase and label must name the same category"
        )
        assert PLACEHOLDER not in d["query_phrase"] and "{" not in d["query_phrase"]
    assert len({d["short_name"] for d in disabilities}) == 9


def test_domains_are_the_papers_six(domains):
    assert list(domains[0]) == ["domain_id", "display_name", "sort_order"]
    assert [d["domain_id"] for d in domains] == DOMAIN_IDS
    assert [int(d["sort_order"]) for d in domains] == list(range(1, 7))


def test_taxonomy_yml_describes_exactly_these_seeds():
    props = yaml.safe_load((SEEDS / "taxonomy.yml").read_text(encoding="utf-8"))
    seeds = {s["name"]: s for s in props["seeds"]}
    assert set(seeds) == {"disabilities", "domains", "queries"}
    for name, seed in seeds.items():
        header = list(_read_csv(f"{name}.csv")[0])
        assert list(seed["config"]["column_types"]) == header, name
        assert [c["name"] for c in seed["columns"]] == header, name
        assert all(c.get("description") for c in seed["columns"]), name


# --- query set shape -----------------------------------------------------------


def test_query_counts_and_ids(queries, domains):
    assert list(queries[0]) == [
        "query_id",
        "domain",
        "persona",
        "neutral_query",
        "disability_template",
    ]
    assert len(queries) == PER_DOMAIN * len(DOMAIN_IDS) == 234
    ids = [q["query_id"] for q in queries]
    assert len(set(ids)) == len(ids)
    known = {d["domain_id"] for d in domains}
    for dom in DOMAIN_IDS:
        rows = [q for q in queries if q["domain"] == dom]
        assert len(rows) == PER_DOMAIN, dom
        expected = [f"{DOMAIN_PREFIX[dom]}_{n:03d}" for n in range(1, PER_DOMAIN + 1)]
        assert [q["query_id"] for q in rows] == expected, dom
    assert {q["domain"] for q in queries} <= known


def test_personas_are_varied_per_domain(queries):
    for dom in DOMAIN_IDS:
        personas = [q["persona"] for q in queries if q["domain"] == dom]
        assert all(p.strip() for p in personas)
        assert 6 <= len(set(personas)) <= 10, (dom, sorted(set(personas)))
        # no single persona may dominate the domain
        assert max(personas.count(p) for p in set(personas)) <= PER_DOMAIN // 2, dom


# --- leakage -------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "What accessibility services does my university offer?",
        "Is my office wheelchair friendly?",
        "Tips for a student with ADHD",
        "How do I book a sign language interpreter?",
        "Does the app work with a screen reader?",
        "What special needs programs are there?",
        "Can the hotel accommodate my guide dog?",
    ],
)
def test_leakage_detector_catches_disability_context(text):
    assert leakage(text)


def test_no_neutral_query_or_persona_carries_disability_context(queries):
    leaks = {q["query_id"]: leakage(q["neutral_query"] + " | " + q["persona"]) for q in queries}
    leaks = {k: v for k, v in leaks.items() if v}
    assert not leaks, f"neutral queries with disability context: {leaks}"


def test_neutral_queries_are_questions_without_placeholders(queries):
    for q in queries:
        n = q["neutral_query"]
        assert n == n.strip() and n.endswith("?") and n[0].isupper(), q["query_id"]
        assert "{" not in n and "}" not in n, q["query_id"]


# --- templates -----------------------------------------------------------------


def test_each_template_has_exactly_one_placeholder_and_no_other_braces(queries):
    for q in queries:
        t = q["disability_template"]
        assert t.count(PLACEHOLDER) == 1, q["query_id"]
        rest = t.replace(PLACEHOLDER, "")
        assert "{" not in rest and "}" not in rest, q["query_id"]
        assert t.endswith("?") and t[0].isupper(), q["query_id"]


def test_placeholder_follows_a_head_that_takes_a_plural_noun_phrase(queries):
    """Every query_phrase is a plural noun phrase, so '{disability}' must follow 'with'/'has'/'have'."""
    for q in queries:
        before = q["disability_template"].split(PLACEHOLDER)[0].split()
        assert before and before[-1] in {"with", "has", "have"}, q["disability_template"]


def test_filled_templates_contain_each_phrase(queries, disabilities):
    phrases = [d["query_phrase"] for d in disabilities]
    filled = set()
    for q in queries:
        for phrase in phrases:
            text = q["disability_template"].format(disability=phrase)
            assert phrase in text and "{" not in text
            filled.add(text)
    assert len(filled) == len(queries) * len(phrases) == 2106


def test_template_keeps_the_neutral_question(queries):
    low = []
    for q in queries:
        words = content_words(q["neutral_query"])
        overlap = len(
            words & content_words(q["disability_template"].replace(PLACEHOLDER, ""))
        ) / len(words)
        if overlap < MIN_CONTENT_OVERLAP:
            low.append(
                (round(overlap, 2), q["query_id"], q["neutral_query"], q["disability_template"])
            )
    assert not low, f"templates that drifted from their neutral query: {low}"


def test_template_without_placeholder_is_not_itself_leaky_elsewhere(queries):
    """The only disability context in a template is the placeholder (no second, fixed disability)."""
    for q in queries:
        assert not leakage(q["disability_template"].replace(PLACEHOLDER, "")), q["query_id"]


# --- near-duplicates -----------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "threshold"),
    [(word_vectorizer, WORD_THRESHOLD), (char_vectorizer, CHAR_THRESHOLD)],
    ids=["word_1_2gram", "char_wb_3_5gram"],
)
def test_no_near_duplicate_neutral_queries(queries, make, threshold):
    texts = [q["neutral_query"] for q in queries]
    pairs = similar_pairs(texts, make(), threshold)
    worst = "\n".join(f"  {s:.3f}  {a!r}  ~  {b!r}" for s, a, b in pairs[:10])
    assert not pairs, f"{len(pairs)} near-duplicate pair(s) at >= {threshold}:\n{worst}"


@pytest.mark.parametrize(
    ("make", "threshold"),
    [(word_vectorizer, WORD_THRESHOLD), (char_vectorizer, CHAR_THRESHOLD)],
    ids=["word_1_2gram", "char_wb_3_5gram"],
)
def test_near_duplicate_check_catches_a_paraphrase(queries, make, threshold):
    """A light rewording of one of our own queries must trip the threshold."""
    texts = [q["neutral_query"] for q in queries]
    original = "How can I make friends during my first semester living in a dorm?"
    assert original in texts
    planted = texts + ["How can I make new friends in my first semester living in the dorms?"]
    pairs = similar_pairs(planted, make(), threshold)
    assert any({a, b} == {original, planted[-1]} for _, a, b in pairs)
