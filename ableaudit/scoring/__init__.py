"""Scoring at scale outside dbt: the per-text scorers mapped over text batches.

``texts`` (free of Prefect) finds the texts a scorer has not scored, reads them in
Arrow batches and scores one batch; ``runners`` builds a Prefect task runner by
name; ``flow`` is the Prefect flow ``score`` that maps a task per batch and lands
the scores in ``raw.text_scores``, which the score models read. The default stays
scoring inside ``dbt build``; see docs/scale-out.md.
"""
