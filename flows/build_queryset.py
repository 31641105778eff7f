"""The `build-queryset` deployment's entry point (prefect.yaml): the flow lives in the
package, so `ableaudit queryset build` and
`prefect deployment run 'build-queryset/build-queryset'` run the same code."""

from ableaudit.queryset.flow import build_queryset

__all__ = ["build_queryset"]

if __name__ == "__main__":
    build_queryset()
