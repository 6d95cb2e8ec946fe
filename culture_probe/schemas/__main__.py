"""`python -m culture_probe.schemas`: metrics.json's JSON Schema, made from its types, on stdout."""

import json

from culture_probe.schemas import metrics_schema

print(json.dumps(metrics_schema(), indent=2, ensure_ascii=False))
