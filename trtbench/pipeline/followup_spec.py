"""The spec of a follow-up run: the original run's recorded spec with the recommended config
beside the run's best fixed variants (read from ``run.json`` and ``recommendation.json``; no
I/O here).

* The recorded spec is ``run.json`` ``build.spec``: every field written out, defaults included
  (``BenchSpec.model_dump(mode="json")``, ``builders/build.py``). Read back as given it would
  fail validation (a baseline with ``speculative_options: {}``; ``concurrency`` beside
  ``request_rate``), so fields equal to their default are dropped first
  (:func:`without_defaults`): what is left is what the user set, or an equivalent.
* The recommended variant (:func:`recommended_variant`): with a speculative winner, the
  winner's recorded fields with the trtbench snippet's fields over them (name
  ``<winner>-recommended``, ``max_draft_len``) and its ``speculation:`` (none when the snippet
  has none: a fixed K at every batch); without one, the baseline variant, renamed
  ``<baseline>-recommended``.
* :func:`is_measured_config`: whether that variant is, but for its name, a variant the run
  measured as it ran (no ``speculation:`` policy, the same fields): then the run's own rounds
  already compared it side by side with the best fixed variant of every tier, and the
  follow-up has nothing to add.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, get_args

from pydantic import BaseModel, ValidationError
from pydantic_core import to_jsonable_python

from trtbench.core.errors import ConfigError
from trtbench.core.validation_errors import format_validation_error
from trtbench.spec.bench import BenchSpec, VariantSpec

SNIPPET_TARGET = "trtbench variant"
"""recommendation.json ``snippets[].target`` of the snippet the reference backend runs."""
RECOMMENDED_SUFFIX = "-recommended"


def _model_of(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model inside a field's annotation (``X``, ``X | None``, ``list[X]``)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for a in get_args(annotation):
        if (inner := _model_of(a)) is not None:
            return inner
    return None


def without_defaults(model: type[BaseModel], data: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` (a JSON dump of ``model``) without the fields equal to their default, nested
    models and lists of models included; unknown keys are kept (validation names them)."""
    out: dict[str, Any] = {}
    for name, value in data.items():
        field = model.model_fields.get(name)
        if field is None:
            out[name] = value
            continue
        inner = _model_of(field.annotation)
        if inner is not None and isinstance(value, Mapping):
            value = without_defaults(inner, value)
        elif inner is not None and isinstance(value, list):
            value = [
                without_defaults(inner, v) if isinstance(v, Mapping) else v
                for v in value
            ]
        if field.is_required():
            out[name] = value
            continue
        default = to_jsonable_python(field.get_default(call_default_factory=True))
        if isinstance(default, Mapping) and inner is not None:
            default = without_defaults(inner, default)
        if value != default:
            out[name] = value
    return out


def _snippet_variant(rec: Mapping[str, Any], where: str) -> dict[str, Any]:
    for s in rec.get("snippets") or []:
        if isinstance(s, Mapping) and s.get("target") == SNIPPET_TARGET:
            variants = (s.get("config") or {}).get("variants") or []
            if variants and isinstance(variants[0], Mapping):
                return dict(variants[0])
    raise ConfigError(
        f"{where} names winner {rec.get('winner')!r} but has no {SNIPPET_TARGET!r} "
        "snippet; render it again with `trtbench report RUN`"
    )


def recommended_variant(
    recorded: Mapping[str, Any], rec: Mapping[str, Any], where: str
) -> tuple[dict[str, Any], str]:
    """The recommended variant as spec fields (module docstring), and the variant it came
    from.

    Args:
        recorded: ``run.json`` ``build.spec`` (variants as recorded, defaults included).
        rec: ``recommendation.json``.
        where: how messages name recommendation.json.

    Raises:
        ConfigError: the winner (or, without one, the baseline) is not a variant of the
            recorded spec, or there is no baseline to fall back to.
    """
    variants = {
        v.get("name"): v
        for v in recorded.get("variants") or []
        if isinstance(v, Mapping)
    }
    winner, baseline = rec.get("winner"), rec.get("baseline")
    source = winner or baseline
    if source is None:
        raise ConfigError(
            f"{where} has neither a winner nor a baseline: there is no config to check; "
            "add a baseline variant to the spec and run it again"
        )
    if source not in variants:
        raise ConfigError(
            f"{where} recommends {source!r}, which is not a variant of the run's recorded "
            "spec (run.json build.spec); render the report again with `trtbench report RUN`"
        )
    fields = without_defaults(VariantSpec, variants[source])
    if winner is None:
        return {**fields, "name": f"{source}{RECOMMENDED_SUFFIX}"}, source
    snippet = _snippet_variant(rec, where)
    fields.pop("speculation", None)
    fields.update(snippet)
    fields.setdefault("name", f"{source}{RECOMMENDED_SUFFIX}")
    return fields, source


def is_measured_config(
    recorded: Mapping[str, Any], variant: Mapping[str, Any], source: str
) -> bool:
    """Whether ``variant`` (from :func:`recommended_variant`) has the fields, but for its
    name, of the recorded variant ``source``: the config the run measured (both compared
    without their defaults, so a default written out on one side does not count)."""
    recorded_variant = next(
        (
            v
            for v in recorded.get("variants") or []
            if isinstance(v, Mapping) and v.get("name") == source
        ),
        None,
    )
    if recorded_variant is None:
        return False

    def fields(v: Mapping[str, Any]) -> dict[str, Any]:
        return {
            k: x for k, x in without_defaults(VariantSpec, v).items() if k != "name"
        }

    return fields(variant) == fields(recorded_variant)


def follow_up_spec(
    recorded: Mapping[str, Any],
    variant: Mapping[str, Any],
    best: Sequence[str],
    rounds: int,
    source: str,
    race: bool = False,
) -> BenchSpec:
    """The recorded spec with the recommended ``variant`` and the recorded variants named in
    ``best`` (the run's best fixed variant of each tier), named ``<name>-follow-up``;
    ``rounds`` fixed rounds, or with ``race`` a race of ``rounds: auto`` within a budget of
    ``rounds`` (it stops measuring a tier once its comparison is decided); tiers,
    requests, seed, deploy and profile as recorded.

    Raises:
        ConfigError: a name of ``best`` is not a recorded variant, or the result does not
            validate (``source`` names where it came from).
    """
    data = without_defaults(BenchSpec, recorded)
    fields = {
        v.get("name"): v for v in data.get("variants") or [] if isinstance(v, Mapping)
    }
    if missing := [b for b in best if b not in fields]:
        raise ConfigError(
            f"{source} names best fixed variant {missing[0]!r}, which is not a variant of "
            "the run's recorded spec; render the report again with `trtbench report RUN`"
        )
    data["variants"] = [dict(variant), *(dict(fields[b]) for b in dict.fromkeys(best))]
    data["name"] = f"{data.get('name', 'bench')}-follow-up"
    loadtest = {
        k: v
        for k, v in (data.get("loadtest") or {}).items()
        if k
        not in ("repeats", "rounds", "stop_when_decided", "rounds_by_default", "budget")
    }
    if race:  # the follow-up's own budget, whatever the run's was
        loadtest |= {"rounds": "auto", "budget": {"max_rounds": rounds}}
    else:  # a fixed count, whatever the run's rounds were
        loadtest |= {"repeats": rounds, "stop_when_decided": False}
    data["loadtest"] = loadtest
    try:
        return BenchSpec.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, source, BenchSpec)) from None
