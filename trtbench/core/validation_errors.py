"""One-line messages for pydantic validation errors: the first bad field, with a suggestion
for a misspelt key. Used by the bench spec (``trtbench/spec/bench.py``) and the commands that
build a spec from options."""

from __future__ import annotations

import difflib
from typing import get_args

from pydantic import BaseModel, ValidationError


def format_loc(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def _nested(annotation: object) -> list[object]:
    """``annotation`` and every type inside it (``list[X] | None`` → list, X, None …)."""
    out = [annotation]
    for arg in get_args(annotation):
        out += _nested(arg)
    return out


def _model_at(
    root: type[BaseModel], loc: tuple[int | str, ...]
) -> type[BaseModel] | None:
    """The model class under ``root`` that holds the last key of ``loc`` (None: unknown)."""
    model: type[BaseModel] = root
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(part)
        if field is None:
            return None
        found = [
            a
            for a in _nested(field.annotation)
            if isinstance(a, type) and issubclass(a, BaseModel)
        ]
        if not found:
            return None
        model = found[0]
    return model


def _did_you_mean(root: type[BaseModel], loc: tuple[int | str, ...]) -> str:
    """'; did you mean X?' for a misspelt key, else a list of the allowed keys."""
    model = _model_at(root, loc)
    if model is None or not isinstance(loc[-1], str):
        return ""
    allowed = sorted(model.model_fields)
    close = difflib.get_close_matches(loc[-1], allowed, n=1)
    if close:
        return f"; did you mean {close[0]!r}?"
    return f"; allowed keys: {', '.join(allowed)}"


def format_validation_error(
    exc: ValidationError, source: str, root: type[BaseModel]
) -> str:
    """One line naming the first invalid field, e.g. ``spec.yaml: variants[1].mode: ...``.

    ``root`` is the model that was validated (the bench spec), for key suggestions.

    An unknown key is reported first (a misspelt key also makes its intended field look
    missing), with the closest allowed key.
    """
    errors = sorted(exc.errors(), key=lambda e: e["type"] != "extra_forbidden")
    err = errors[0]
    raw_loc = tuple(p for p in err["loc"] if p not in ("function-after",))
    loc = format_loc(raw_loc)
    msg = err["msg"].removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        msg = f"unknown key{_did_you_mean(root, raw_loc)}"
    elif err["type"] == "missing":
        msg = "required and missing: add it"
    where = f"{loc}: " if loc else ""
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{source}: {where}{msg}{more}"
