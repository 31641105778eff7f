"""A config file's validation errors as one message: each wrong field by its place in the
file and the names of the entries on the way, with the fix (the near key, the block a key
belongs in, the values allowed).
"""

from __future__ import annotations

import types
import typing
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import BaseModel, ValidationError

from ableaudit.errors import close_matches, did_you_mean


def _model_class(tp: Any) -> type[BaseModel] | None:
    """The pydantic model inside an annotation (``X``, ``list[X]``, ``X | None``), if any."""
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return tp
    if typing.get_origin(tp) in (list, typing.Union, types.UnionType, Annotated):
        for arg in typing.get_args(tp):
            found = _model_class(arg)
            if found is not None:
                return found
    return None


def _keys_at(root: type[BaseModel], loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The model whose keys are allowed at ``loc`` (the place a key sits in the config)."""
    model: type[BaseModel] | None = root
    for part in loc:
        if model is None:
            return None
        if isinstance(part, int):
            continue
        field_info = model.model_fields.get(str(part))
        model = _model_class(field_info.annotation) if field_info else None
    return model


def _unknown_key(root: type[BaseModel], loc: tuple[Any, ...]) -> str:
    """What to say about an unknown key: the near miss, the block it belongs in, or the keys allowed."""
    key, model = str(loc[-1]), _keys_at(root, loc[:-1])
    if model is None:
        return "unknown key"
    allowed = list(model.model_fields)
    hint = did_you_mean(key, allowed)
    if hint:
        return f"unknown key {key!r}{hint}"
    for name, field_info in model.model_fields.items():
        nested = _model_class(field_info.annotation)
        if nested is not None and key in nested.model_fields:
            return f"unknown key {key!r} here; it belongs under `{name}:`"
        near = close_matches(key, nested.model_fields if nested is not None else [], n=1)
        if near:
            return f"unknown key {key!r}; did you mean {near[0]!r} under `{name}:`?"
    return f"unknown key {key!r}; the keys allowed here are {', '.join(allowed)}"


def _where(loc: tuple[Any, ...], data: Any) -> str:
    """A config place: its dotted path, then the names of the entries on the way, e.g.
    ``targets.0.decoding.temperature (target 'smollm2')``."""
    names, node, parent = [], data, ""
    for part in loc:
        if isinstance(part, int):
            node = node[part] if isinstance(node, list) and 0 <= part < len(node) else None
            if isinstance(node, dict) and isinstance(node.get("name"), str):
                names.append(f"{parent.removesuffix('s')} {node['name']!r}")
        else:
            node = node.get(part) if isinstance(node, dict) else None
            parent = str(part)
    dotted = ".".join(str(p) for p in loc) or "(top level)"
    return f"{dotted} ({', '.join(names)})" if names else dotted


def format_validation(
    err: ValidationError,
    source: str,
    data: Any,
    root: type[BaseModel],
    what: str = "audit config",
    example: str = "configs/default.yaml",
) -> str:
    """``err`` as one message: a line per wrong field of ``data`` (validated as ``root``, read
    from ``source``), then where to find a complete ``example`` of the file."""
    lines = [f"invalid {what} ({source}):"]
    for e in err.errors():
        loc = tuple(e["loc"])
        msg = e["msg"].removeprefix("Value error, ")
        if e["type"] == "extra_forbidden":
            msg = _unknown_key(root, loc)
        elif msg.startswith("Input should be") and "input" in e:
            ranged = e["type"].startswith(("greater_than", "less_than"))
            said = "is out of range: it must be" if ranged else "is wrong: it must be"
            msg = f"{e['input']!r} {said}{msg.removeprefix('Input should be')}"
        lines.append(f"  - {_where(loc, data)}: {msg}")
    lines.append(f"Fix the fields above; see {example} for a complete example.")
    return "\n".join(lines)


def load_yaml_file(path: Path) -> Any:
    """The YAML document in ``path``, read from the file so that an error's marks name it."""
    with path.open(encoding="utf-8") as f:
        return yaml.safe_load(f)


def yaml_problem(err: yaml.YAMLError) -> str:
    """Where and what a YAML syntax error is: ``"at line 3, column 7: <what the parser saw>"``."""
    mark = getattr(err, "problem_mark", None)
    at = f"at line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
    context = getattr(err, "context", None)
    problem = getattr(err, "problem", None) or str(err)
    return at + (f"{context}, {problem}" if context else problem)
