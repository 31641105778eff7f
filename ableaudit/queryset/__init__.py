"""Building query sets the way AccessEval built its own: personas per domain, queries per
persona, validation, human review, publishing (docs/querysets.md)."""
