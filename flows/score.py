"""The `score` deployment's entry point (prefect.yaml): the flow lives in the package,
so `ableaudit score` and `prefect deployment run 'score/score'` run the same code."""

from ableaudit.scoring.flow import score

__all__ = ["score"]

if __name__ == "__main__":
    score()
