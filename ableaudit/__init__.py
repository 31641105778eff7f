"""ableaudit: a disability-bias audit warehouse for language and vision-language models."""

from pathlib import Path

__version__ = "0.1.0"

# The dbt project root (dbt_project.yml, models/, seeds/ ...) when run from a checkout.
PROJECT_ROOT = Path(__file__).resolve().parent.parent
