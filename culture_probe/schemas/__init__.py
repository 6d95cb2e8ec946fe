"""The JSON Schema of metrics.json, generated from the types its readers read
(`culture_probe.record`: `Metrics`, `Results`, `Estimate`, ...), so that the document is declared
once: the writers fill those types, `read_metrics` checks a file against them, and this schema, for
users and tools outside Python, says the same. `python -m culture_probe.schemas` prints it.

What the schema adds to the types is said here, each once: every part is closed (a key its type
does not name is refused, so a writer's typo fails the tests) except the parts that hold keys no
type names (`OPEN`: the benchmark's own detail beside `results`); every whole number is a count, 0
or more, but a seed; and the rules a type cannot state (`RULES`: a value without an interval says
why, a chance range has both ends, a confidence lies between 0 and 1).
"""

from __future__ import annotations

import functools
import inspect
import types
import typing
from typing import Any, Literal, Union

from culture_probe.errors import CultureProbeError
from culture_probe.record import STRATUM_KEY, Consistency, Metrics, PlantedPart, Results, Strata

DRAFT = "https://json-schema.org/draft/2020-12/schema"
#: the parts that hold keys their type does not name: metrics.json's benchmark detail, and the
#: consistency and planted records' per-benchmark extras
OPEN = frozenset({Metrics, Consistency, PlantedPart})
#: what no type states, by the part it constrains
RULES: dict[str, dict[str, Any]] = {
    "Estimate": {
        # a value without an interval says why (one unit, a statistic that cannot vary, ...)
        "if": {"properties": {"value": {"type": "number"}, "ci_low": {"type": "null"}}},
        "then": {"required": ["no_interval"]},
    },
    "Chance": {
        "required": ["value", "method"],
        "dependentRequired": {"low": ["high"], "high": ["low"]},
    },
    "Intervals": {
        "required": ["method", "methods", "confidence"],
        "properties": {"confidence": {"exclusiveMinimum": 0, "exclusiveMaximum": 1}},
    },
    "Results": {"required": ["schema_version", "headline", "unit", "ci", "overall", "omitted"]},
    "Metrics": {"required": ["results", "n_probes", "n_skipped", "skipped"]},
}
_SCALARS = {bool: "boolean", int: "integer", float: "number", str: "string", type(None): "null"}


def metrics_schema() -> dict[str, Any]:
    """The JSON Schema of metrics.json, made from `culture_probe.record.Metrics`."""
    definitions: dict[str, dict[str, Any]] = {}
    _part(Metrics, definitions)
    return {
        "$schema": DRAFT,
        "$id": "https://culture-probe.readthedocs.io/schemas/metrics.schema.json",
        "title": "culture_probe metrics.json",
        **definitions.pop("Metrics"),
        "$defs": definitions,
    }


def _part(
    hint: Any, definitions: dict[str, dict[str, Any]], *, count: bool = True
) -> dict[str, Any]:
    """The schema of one annotation (`count`: whether a whole number there is a count, 0 or
    more).
    """
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return {}
    if typing.is_typeddict(hint):
        return _typeddict(hint, definitions)
    if origin in (Union, types.UnionType):
        if all(a in _SCALARS for a in args):
            return {"type": [_SCALARS[a] for a in args]}
        return {"anyOf": [_part(a, definitions, count=count) for a in args]}
    if origin is Literal:
        return {"enum": list(args)}
    if origin in (dict, typing.Mapping) or hint is dict:
        values = args[1] if args else Any
        return {"type": "object", "additionalProperties": _part(values, definitions)}
    if origin in (list, tuple, typing.Sequence) or hint is list:
        items = args[0] if args else Any
        return {"type": "array", "items": _part(items, definitions)}
    if hint in _SCALARS:
        scalar: dict[str, Any] = {"type": _SCALARS[hint]}
        return scalar | ({"minimum": 0} if hint is int and count else {})
    raise CultureProbeError(f"metrics.json's schema has no JSON form for the annotation {hint!r}.")


def _typeddict(hint: Any, definitions: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """A `$ref` to the definition of TypedDict `hint`, made once: its keys, those it requires, its
    docstring as the description, closed unless `OPEN`, and its `RULES`.
    """
    name = hint.__name__
    if name not in definitions:
        definitions[name] = {}  # a part that holds itself refers to the definition being made
        fields = typing.get_type_hints(hint)
        rules = RULES.get(name, {})
        properties = {
            key: _part(value, definitions, count=key != "seed")
            | rules.get("properties", {}).get(key, {})
            for key, value in fields.items()
        }
        required = rules.get("required") or [k for k in fields if k in hint.__required_keys__]
        made: dict[str, Any] = {"type": "object", "description": _description(hint)}
        made |= {"required": required} if required else {}
        made["properties"] = properties
        if hint is Results:
            made["patternProperties"] = {STRATUM_KEY: _part(Strata, definitions)}
        if hint not in OPEN:
            made["additionalProperties"] = False
        made |= {k: v for k, v in rules.items() if k not in ("required", "properties")}
        definitions[name] = made
    return {"$ref": f"#/$defs/{name}"}


def _description(hint: Any) -> str:
    """A type's docstring as one paragraph of the schema."""
    return " ".join((inspect.getdoc(hint) or "").split())


def validate_metrics(metrics: Any) -> None:
    """Check a metrics.json value against the schema; the error names the first offending path."""
    try:
        import jsonschema
    except ImportError:
        raise CultureProbeError(
            "Validating needs the jsonschema package: pip install jsonschema"
        ) from None
    error = jsonschema.exceptions.best_match(_validator().iter_errors(metrics))
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "(top level)"
        raise CultureProbeError(
            f"metrics.json does not follow its schema (culture_probe.schemas) at {where}: {error.message}"
        )


@functools.cache
def _validator() -> Any:
    """The schema's validator, made once: the tests check every metrics.json they write."""
    import jsonschema

    return jsonschema.Draft202012Validator(metrics_schema())
