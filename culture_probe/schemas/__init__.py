"""JSON Schemas of the files a run writes, shipped in the package so that users, CI and the tests
validate against the same file: `metrics.schema.json` (the results schema of every benchmark's
metrics.json).
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from culture_probe.errors import CultureProbeError

METRICS_SCHEMA = "metrics.schema.json"


def metrics_schema() -> dict[str, Any]:
    """The JSON Schema of metrics.json."""
    return json.loads(
        resources.files(__package__).joinpath(METRICS_SCHEMA).read_text(encoding="utf-8")
    )


def validate_metrics(metrics: Any) -> None:
    """Check a metrics.json value against the schema; the error names the first offending path."""
    try:
        import jsonschema
    except ImportError:
        raise CultureProbeError(
            "Validating needs the jsonschema package: pip install jsonschema"
        ) from None
    error = jsonschema.exceptions.best_match(
        jsonschema.Draft202012Validator(metrics_schema()).iter_errors(metrics)
    )
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "(top level)"
        raise CultureProbeError(
            f"metrics.json does not follow {METRICS_SCHEMA} at {where}: {error.message}"
        )
