"""The `audit` deployment's entry point (prefect.yaml): the flow lives in the package,
so `ableaudit audit` and `prefect deployment run 'audit/audit'` run the same code."""

from ableaudit.audit.flow import audit

__all__ = ["audit"]

if __name__ == "__main__":
    audit()
