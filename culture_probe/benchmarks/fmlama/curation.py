"""Curate FmLAMA-style dish/ingredient records (FmLAMA paper section 3; upstream
`construct_Data/template_klg.py`).

For each origin country: dishes that are instances or subclasses (transitively) of dish (Q746549),
whose country of origin (P495) or cuisine/parent's country is that country and which name no other
origin; their ingredients are "has part(s)" (P527). Dishes found for two origin countries are
dropped (the paper excludes multi-origin dishes). Output mirrors the release:
`data_lang/<la>/<la>_dishes.jsonl` (url, origin = the origin's English label, lang, sub_label,
obj_label as a list: the v2 field format the FmLAMA builder accepts) and `<la>_count.jsonl`.
"""

from __future__ import annotations

import argparse
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from culture_probe.curation import queries
from culture_probe.curation.checkpoint import Checkpoints, write_jsonl
from culture_probe.curation.cli import Curate, refuse_empty
from culture_probe.curation.endpoints import SparqlEndpoint, endpoint_identity
from culture_probe.curation.regions import Region
from culture_probe.curation.sizes import StoreSizes
from culture_probe.curation.steps import Context, fetch_labels, qid_order
from culture_probe.errors import CultureProbeError
from culture_probe.util import jsonl


@dataclass(frozen=True)
class FmlamaCuration:
    """Dishes from the countries of `region`, labelled in `languages`."""

    region: Region
    languages: tuple[str, ...]
    chunk_size: int = 50

    def __post_init__(self) -> None:
        if not self.region.countries:
            raise CultureProbeError(
                f"FmLAMA curation needs the origin countries as QIDs; region {self.region.name!r} has only a "
                "SPARQL condition. Define it as NAME=QID,QID,..."
            )
        if not self.languages:
            raise CultureProbeError(
                "Give at least one label language, e.g. languages=('en', 'zh')."
            )
        if self.chunk_size < 1:
            raise CultureProbeError(f"chunk_size must be positive, got {self.chunk_size}.")


def curate_fmlama(
    config: FmlamaCuration,
    endpoint: SparqlEndpoint,
    out_dir: str | Path,
    *,
    checkpoint_dir: str | Path | None = None,
) -> dict[str, int]:
    """Query, label and write the dishes; returns {language: number of dishes written}."""
    out = Path(out_dir)
    # origins are named by their English label
    labels_in = tuple(dict.fromkeys((*config.languages, "en")))
    checkpoints = Checkpoints(checkpoint_dir or out / ".checkpoints", endpoint_identity(endpoint))
    ctx = Context(endpoint, StoreSizes(endpoint), checkpoints, labels_in, config.chunk_size)
    ingredients: dict[str, set[str]] = defaultdict(set)
    origins: dict[str, set[str]] = defaultdict(set)
    for index, country in enumerate(config.region.countries):
        for row in ctx.select("fmlama_dishes", index, queries.dishes_query(country)):
            ingredients[row["dish"]].add(row["ingredient"])
            origins[row["dish"]].add(country)
    dishes = sorted((d for d in ingredients if len(origins[d]) == 1), key=qid_order)
    wanted = [*config.region.countries, *dishes, *{i for d in dishes for i in ingredients[d]}]
    labels = fetch_labels(ctx, "fmlama_labels", wanted) if dishes else {}
    written = {}
    for lang in config.languages:
        records = [r for d in dishes if (r := _record(d, origins[d], ingredients[d], labels, lang))]
        records.sort(key=lambda r: (r["origin"], qid_order(r["url"].rsplit("/", 1)[-1])))
        folder = out / "data_lang" / lang
        write_jsonl(folder / f"{lang}_dishes.jsonl", records)
        counts = Counter(r["origin"] for r in records)
        ordered = [
            ["All", len(records)],
            *([o, n] for o, n in sorted(counts.items(), key=lambda x: (-x[1], x[0]))),
        ]
        (folder / f"{lang}_count.jsonl").write_text(
            "".join(jsonl.line(c) for c in ordered), encoding="utf-8"
        )
        written[lang] = len(records)
    return written


def _record(
    dish: str, origin: set[str], parts: set[str], labels: dict[str, dict[str, str]], lang: str
) -> dict[str, Any] | None:
    """One record, or None when the dish, its origin or all of its ingredients lack a label in
    `lang`.
    """
    (country,) = origin
    name = labels.get(dish, {}).get(lang)
    origin_label = labels.get(country, {}).get("en")
    found = sorted({labels[p][lang] for p in parts if labels.get(p, {}).get(lang)})
    if not name or not origin_label or not found:
        return None
    return {
        "url": queries.WD + dish,
        "origin": origin_label,
        "lang": lang,
        "sub_label": name,
        "obj_label": found,
    }


DLAMA_ONLY = ("contrast", "top", "predicates", "sizes", "object_filters")


def _refuse_dlama_only(args: argparse.Namespace) -> None:
    """FmLAMA curation has no contrast region, subject ranking or predicates: say so instead of
    ignoring them.
    """
    given = [
        f"--{name.replace('_', '-')}"
        for name in DLAMA_ONLY
        if getattr(args, name, None) not in (None, False)
    ]
    if given:
        raise CultureProbeError(
            f"`culture-probe curate fmlama` does not use {', '.join(given)}: FmLAMA collects every dish of --region "
            "with its ingredients (no contrast region, predicates, ranking or article sizes). Drop "
            f"{'it' if len(given) == 1 else 'them'}, or use `curate dlama`."
        )


def curate_command(args: argparse.Namespace, curate: Curate) -> int:
    """`culture-probe curate fmlama ...`: every dish of --region with its ingredients, under
    --out/data_lang.
    """
    _refuse_dlama_only(args)
    written = curate_fmlama(
        FmlamaCuration(curate.region, curate.languages, curate.chunk_size),
        curate.endpoint,
        args.out,
        checkpoint_dir=getattr(args, "checkpoints", None),
    )
    print(f"wrote FmLAMA-style dishes to {args.out}/data_lang: {written}")
    return refuse_empty(args, {lang: n for lang, n in written.items() if not n}, "dishes in")
