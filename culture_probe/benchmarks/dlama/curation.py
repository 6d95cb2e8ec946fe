"""Curate a DLAMA-style culture pair and write it in the DLAMA-v1 layout that DLAMA's builder
(`data`) reads.

    out/<region>-<contrast>/dlama/<lang>/<P>_general_<TOKEN>.jsonl      facts after augmentation
    out/<region>-<contrast>/dlama_raw/<lang>/<P>_general_<TOKEN>.jsonl  facts before augmentation
    out/<region>-<contrast>/curation.json                               what was run, with counts

Records follow the v1 schema (docs/benchmarks/dlama.md, Features): sub_uri, obj_uri (sorted),
sub_label, obj_label (aligned), country (sorted: the objects when they are countries, the subject
when it is one, else the region's countries that selected the fact), size, uuid
`{P}_general_{TOKEN}_{rank}`.
"""

from __future__ import annotations

import argparse
import logging
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from culture_probe.curation.checkpoint import Checkpoints, write_json_atomic, write_jsonl
from culture_probe.curation.cli import Curate, refuse_empty, size_provider, split_list
from culture_probe.curation.endpoints import SparqlEndpoint, endpoint_identity
from culture_probe.curation.predicates import PREDICATES, Predicate, resolve_predicates
from culture_probe.curation.regions import Region, resolve_region
from culture_probe.curation.sizes import SizeProvider, StoreSizes
from culture_probe.curation.steps import (
    Context,
    step1_facts,
    step2_rank,
    step5_hierarchy,
    steps34_objects_and_labels,
)
from culture_probe.errors import CultureProbeError
from culture_probe.version import __version__

log = logging.getLogger(__name__)
DOMAIN = "general"  # the only domain of DLAMA-v1; part of every file name and uuid
# Where this implementation knowingly differs from upstream's code (recorded in curation.json), each
# as "<when it applies>: <what differs>", like OBJECT_FILTERS.
DEVIATIONS = (
    "Every run (step 2): ties in article size are ranked by QID in numeric order (upstream sorted with pandas' "
    "default quicksort, which is not stable, so its order within a tie is arbitrary).",
    "Every run (step 4): labels come from rdfs:label via SPARQL (upstream used the wbgetentities API); same "
    "Wikidata labels.",
    "Every run (queries: regions given as a country list): region-list queries send one query per country (as "
    "upstream's grouped queries); sizes use the sites of the countries that selected the subject (Table F8).",
    "Places of birth and death (P19, P20; step 5): located-in chains stop below the country level (released "
    "code; the paper's prose example lists the country).",
)


OBJECT_FILTERS = (
    "object_filters=True: step 3 drops non-sovereign and historical countries, lost cities, the "
    "instrument 'voice' and sign languages (culture_probe's option; the release was built without it)."
)


@dataclass(frozen=True)
class DlamaCuration:
    """One culture pair to curate: `region` vs `contrast`, labelled in `languages`."""

    region: Region
    contrast: Region
    languages: tuple[str, ...]
    predicates: tuple[str, ...] = tuple(PREDICATES)
    top: int = 1000
    chunk_size: int = 50
    object_filters: bool = False  # culture_probe's optional step-3 type filters (upstream has none)

    def __post_init__(self) -> None:
        object.__setattr__(self, "languages", tuple(self.languages))
        object.__setattr__(
            self, "predicates", tuple(p.pid for p in resolve_predicates(self.predicates))
        )
        if not self.languages:
            raise CultureProbeError(
                "Give at least one label language, e.g. languages=('ar', 'en')."
            )
        if self.top < 1 or self.chunk_size < 1:
            raise CultureProbeError(
                f"top and chunk_size must be positive, got {self.top} and {self.chunk_size}."
            )
        if self.region.token == self.contrast.token:
            raise CultureProbeError(
                f"The two regions of a pair must differ, got {self.region.name!r} twice."
            )

    @property
    def pair_dir(self) -> str:
        """Folder name of the pair, as in the release: `arab-west`, `south_america-west`."""
        return f"{self.region.name}-{self.contrast.name}"

    @property
    def pair(self) -> str:
        """The pair's name in configs: `arab_west`."""
        return f"{self.region.name}_{self.contrast.name}"


@dataclass(frozen=True)
class CurationResult:
    """Where the pair was written and how many facts each (predicate, region) file holds."""

    pair_dir: Path
    counts: dict[str, dict[str, int]] = field(default_factory=dict)
    files: tuple[Path, ...] = ()


def record(
    fact: dict[str, Any], obj: list[str], labels: dict[str, dict[str, str]], lang: str, uuid: str
) -> dict[str, Any]:
    """One v1 record (keys in release order)."""
    return {
        "sub_uri": fact["sub"],
        "obj_uri": obj,
        "sub_label": labels[fact["sub"]][lang],
        "obj_label": [labels[o][lang] for o in obj],
        "country": fact["country"],
        "size": fact["size"],
        "uuid": uuid,
    }


def curate_dlama(
    config: DlamaCuration,
    endpoint: SparqlEndpoint,
    out_dir: str | Path,
    *,
    sizes: SizeProvider | None = None,
    checkpoint_dir: str | Path | None = None,
) -> CurationResult:
    """Run the five steps for every predicate and both regions, then write the pair in the DLAMA-v1
    layout.

    Every query result is checkpointed under `checkpoint_dir` (default `out_dir/.checkpoints`), so
    rerunning the same call after a crash resumes where it stopped and a finished run is rebuilt
    without any query.
    """
    out = Path(out_dir)
    checkpoints = Checkpoints(checkpoint_dir or out / ".checkpoints", endpoint_identity(endpoint))
    ctx = Context(
        endpoint,
        sizes or StoreSizes(endpoint),
        checkpoints,
        tuple(config.languages),
        config.chunk_size,
    )
    pair_root = out / config.pair_dir
    counts: dict[str, dict[str, int]] = {}
    files: list[Path] = []
    for predicate in resolve_predicates(config.predicates):
        per_region = {}
        for region in (config.region, config.contrast):
            facts = step1_facts(ctx, predicate, region)
            ranked = step2_rank(ctx, predicate, region, facts)
            per_region[region] = steps34_objects_and_labels(
                ctx, predicate, region, ranked, config.top, object_filters=config.object_filters
            )
            name = f"{predicate.pid}_{DOMAIN}_{region.token}"
            counts[name] = {
                "step1_rows": len(facts),
                "ranked_subjects": len(ranked),
                "examined": per_region[region]["n_examined"],
                "facts": len(per_region[region]["facts"]),
            }
            log.info("%s: %s", name, counts[name])
        files += _write_predicate(ctx, predicate, per_region, pair_root)
    _write_manifest(config, ctx, pair_root, counts)
    return CurationResult(pair_root, counts, tuple(files))


def _write_predicate(
    ctx: Context, predicate: Predicate, per_region: dict[Region, dict[str, Any]], pair_root: Path
) -> list[Path]:
    objects = [o for result in per_region.values() for fact in result["facts"] for o in fact["obj"]]
    hierarchy = (
        step5_hierarchy(ctx, predicate, objects) if objects else {"ancestors": {}, "labels": {}}
    )
    written = []
    for region, result in per_region.items():
        labels = {**result["labels"], **hierarchy["labels"]}
        name = f"{predicate.pid}_{DOMAIN}_{region.token}.jsonl"
        for lang in ctx.languages:
            raw, augmented = [], []
            for rank, fact in enumerate(result["facts"]):
                uuid = f"{predicate.pid}_{DOMAIN}_{region.token}_{rank}"
                grown = sorted({a for o in fact["obj"] for a in hierarchy["ancestors"].get(o, [o])})
                raw.append(record(fact, fact["obj"], labels, lang, uuid))
                augmented.append(record(fact, grown, labels, lang, uuid))
            for folder, records in (("dlama_raw", raw), ("dlama", augmented)):
                path = pair_root / folder / lang / name
                write_jsonl(path, records)
                written.append(path)
    return written


def _write_manifest(
    config: DlamaCuration, ctx: Context, pair_root: Path, counts: dict[str, dict[str, int]]
) -> None:
    manifest = {
        "framework": "dlama",
        "culture_probe_version": __version__,
        "pair": config.pair,
        "config": {
            **asdict(config),
            "region": asdict(config.region),
            "contrast": asdict(config.contrast),
        },
        "endpoint": ctx.endpoint.name,
        "sizes": ctx.sizes.name,
        "counts": counts,
        "deviations": [*DEVIATIONS, *([OBJECT_FILTERS] if config.object_filters else [])],
    }
    write_json_atomic(pair_root / "curation.json", manifest)


def curate_command(args: argparse.Namespace, curate: Curate) -> int:
    """`culture-probe curate dlama ...`: the pair of --region and --contrast, written under
    --out.
    """
    top = {"top": args.top} if getattr(args, "top", None) is not None else {}
    config = DlamaCuration(
        curate.region,
        resolve_region(getattr(args, "contrast", None) or "west", sites=curate.sites),
        curate.languages,
        predicates=split_list(args.predicates) or tuple(PREDICATES),
        chunk_size=curate.chunk_size,
        object_filters=bool(getattr(args, "object_filters", False)),
        **top,
    )
    sizes = getattr(args, "sizes", "auto") or "auto"
    result = curate_dlama(
        config,
        curate.endpoint,
        args.out,
        sizes=size_provider(sizes, curate.endpoint, curate.policy),
        checkpoint_dir=getattr(args, "checkpoints", None),
    )
    facts = sum(c["facts"] for c in result.counts.values())
    print(f"wrote {facts} facts ({len(result.files)} files) to {result.pair_dir}")
    return refuse_empty(
        args, {name: 0 for name, c in result.counts.items() if not c["facts"]}, "facts for"
    )
