"""A DLAMA-v1 folder in the exact tarball layout (spec dlama.md 2.2) holding the spec's worked
example (5.3), and an engine stand-in that returns the example's scores. Shared by the task and
runner tests.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from culture_probe.engine.types import CandidateScores

# Spec 5.3 (Arab-West, en, P30): facts, gold objects, and the scores of [Africa, Asia, Europe, North
# America].
FACTS = {
    ("ARAB_REGION", "Egypt"): (["Q15", "Q48"], ["Africa", "Asia"], [-1.10, -1.60, -2.40, -2.50]),
    ("ARAB_REGION", "Morocco"): (["Q15"], ["Africa"], [-1.90, -2.70, -1.70, -3.20]),
    ("ARAB_REGION", "Oman"): (["Q48"], ["Asia"], [-2.30, -0.90, -2.60, -3.40]),
    ("WESTERN_COUNTRIES", "France"): (["Q46"], ["Europe"], [-2.80, -2.90, -0.70, -2.20]),
    ("WESTERN_COUNTRIES", "Canada"): (["Q49"], ["North America"], [-2.60, -3.00, -1.20, -1.50]),
}
ARABIC = {
    "Egypt": "مصر",
    "Morocco": "المغرب",
    "Oman": "عمان",
    "France": "فرنسا",
    "Canada": "كندا",
    "Africa": "أفريقيا",
    "Asia": "آسيا",
    "Europe": "أوروبا",
    "North America": "أمريكا الشمالية",
}
N_TOKENS = {"Africa": 1, "Asia": 1, "Europe": 1, "North America": 2}
# 24 facts of P30 (12 per culture), each country's gold one of four continents in turn: what
# compare's tests pair
CONTINENTS = ("Africa", "Asia", "Europe", "North America")
CONTINENT_FACTS = {
    (region, f"Land{region[0]}{i}"): ([f"Q{i % 4}"], [CONTINENTS[i % 4]], [0.0] * 4)
    for region in ("ARAB_REGION", "WESTERN_COUNTRIES")
    for i in range(12)
}


def write_dlama(root: Path, facts=FACTS, predicate="P30") -> Path:
    """A DLAMA-v1 folder in the exact tarball layout (spec 2.2), in English and Arabic."""
    for language in ("en", "ar"):
        for region in ("ARAB_REGION", "WESTERN_COUNTRIES"):
            folder = root / "arab-west" / "dlama" / language
            folder.mkdir(parents=True, exist_ok=True)
            lines = []
            for rank, ((_, subject), (uris, labels, _scores)) in enumerate(
                (k, v) for k, v in facts.items() if k[0] == region
            ):
                name = (lambda s: s) if language == "en" else (lambda s: ARABIC.get(s, s))
                lines.append(
                    json.dumps(
                        {
                            "sub_uri": f"Q{100 + rank}",
                            "obj_uri": uris,
                            "sub_label": name(subject),
                            "obj_label": [name(label) for label in labels],
                            "country": ["Q79"],
                            "size": 1000 - rank,
                            "uuid": f"{predicate}_general_{region}_{rank}",
                        },
                        ensure_ascii=False,
                    )
                )
            (folder / f"{predicate}_general_{region}.jsonl").write_text(
                "\n".join(lines) + "\n", encoding="utf-8"
            )
    return root


class TableScorer:
    """A stand-in for the engine: scores from a table {(subject, candidate): mean log-prob}."""

    kind = "masked"
    identity = {"name_or_path": "table"}

    def __init__(self, table):
        self.table, self.calls = table, 0

    def score(self, requests, options=None):
        self.calls += 1
        out = []
        for request in requests:
            subject = request.left.split(" is located in")[0]
            tokens = np.array([N_TOKENS.get(c, 1) for c in request.candidates])
            means = np.array([self.table.get((subject, c), -9.0) for c in request.candidates])
            out.append(CandidateScores(request.candidates, means * tokens, tokens))
        return out


def spec_table():
    candidates = ["Africa", "Asia", "Europe", "North America"]
    return {
        (s, c): v
        for (_, s), (_, _, scores) in FACTS.items()
        for c, v in zip(candidates, scores, strict=True)
    }
