"""The LLM judges of the two papers, run on the audit's own backends.

* rubric (AccessEval): one response to one query, 1..10 from relevance,
  completeness, accuracy (3 points each) and clarity (1 point); a declined
  answer scores 1. Two prompts: neutral and disability-aware.
* contrastive (vision paper, C.5): the neutral response A against the
  disability response B: interpret / stereotype / framing as No, Ambiguous or
  Yes with spans quoted from B, and a decline flag for each response; or the
  dimensions of a set of the user's own.

Modules: ``dimensions`` (dimension sets as data: the built-in one and users'),
``prompts`` (versioned templates, nonce fences; a set's prompt), ``schemas`` (JSON
Schemas), ``parsing`` (raw text -> verdict, never guessing), ``runner``
(subjects, keys, cache, calls). Verdicts land through
``ableaudit.warehouse.landing``; verdicts made elsewhere are read by
``ableaudit.ingest.judgments``.
"""
