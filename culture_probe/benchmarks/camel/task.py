"""CAMeL protocol: score sampled Arab and Western fillers of each Arabic prompt; the CBS counts
Western wins.

The paper's section 4.4 (Culturally-Appropriate Text Infilling): masked LMs see the whole prompt and
score a filler by left-to-right one-mask infill (mean probability over its subwords); causal and
seq2seq LMs see only the text left of the mask (mean log-prob). Per run r (five by default), entity
type tau and culture kappa, `numpy.random.default_rng([seed, r, tau, kappa])` draws min(50, pool)
entities from the cleaned pool; that sample fills every prompt of the type in the run. CBS per
prompt, averaged per type, then over runs (`culture_probe.benchmarks.camel.metrics.cbs`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from culture_probe.benchmarks.camel.data import ENTITY_TYPES
from culture_probe.benchmarks.camel.metrics import ScoredPrompt, prompt_cbs, run_summary
from culture_probe.data.registry import Benchmark
from culture_probe.data.resources import Need
from culture_probe.engine.tokens import TokenRows, row_sums
from culture_probe.engine.types import CandidateScores, ScoreOptions, ScoreRequest
from culture_probe.errors import CultureProbeError, InvalidValueError
from culture_probe.metrics.results import UnitTable, UnitValue, unit_table
from culture_probe.record import SamplingDesign
from culture_probe.tasks.base import RecordFields, Scores, Task
from culture_probe.tasks.deviations import Deviation
from culture_probe.tasks.options import at_least, in_range
from culture_probe.tasks.probes import Output, Probe, Record, ScoreProbe, Skipped
from culture_probe.tasks.sampling import Smoke
from culture_probe.util.typecheck import check_types

MASK = "[MASK]"
CULTURE_TOKEN = "[عربي] "
CULTURES = ("arab", "western")  # kappa = index
SOURCE_CULTURES = {"Arab": "arab", "Western": "western"}
# why no CAMeL deviation has an upstream side (tareknaous/camel README.md@02722edf is its only text)
NO_CODE = "tareknaous/camel released data only, no scoring, sampling or aggregation code"


@dataclass(frozen=True)
class CamelOptions:
    """Switches of the CAMeL protocol (defaults: the paper's section 4.4; the deviation ids say
    why).
    """

    n_runs: int = 5
    sample_size: int = 50
    pool: Literal["clean", "raw"] = "clean"  # C5
    # C3 (auto: prob masked, log-prob otherwise)
    aggregate: Literal["auto", "mean_prob", "mean_logprob"] = "auto"
    mlm_mode: Literal["l2r", "all_masks"] = "l2r"  # C4
    exclude_empty_prefix: bool = False  # C1
    tie_value: float = 0.0  # C8
    culture_token: bool = False  # paper 4.4 prompt adaptation
    n_shot: int = 0  # paper 4.4 demonstrations (Arab fillers)
    # plain = encoder prefix, target entity
    seq2seq_style: Literal["sentinel", "plain"] = "sentinel"

    def __post_init__(self) -> None:
        check_types(self)
        in_range("tie_value (C8: 0 the paper's strict '>', 0.5 an AUC)", self.tie_value, 0, 1)
        at_least("n_runs", self.n_runs, 1)
        at_least("sample_size", self.sample_size, 1)
        at_least("n_shot", self.n_shot, 0)

    def needs(self, benchmark: Benchmark) -> dict[str, Need]:
        """The entity pools: camel_entities, corrected with the prompts."""
        return {"entities": Need("camel", "entities", corrected=benchmark.corrected)}


# ---------------------------------------------------------------- pools and samples


def normalise(text: str) -> str:
    """Strip and collapse runs of spaces: prompts keep their raw text in the dataset."""
    return re.sub(r" {2,}", " ", text.strip())


def type_name(value: Any) -> str:
    """An entity type as its name (rows from `datasets` hold the ClassLabel index)."""
    return ENTITY_TYPES[value] if isinstance(value, (int, np.integer)) else str(value)


def entity_pools(
    rows: Iterable[Mapping[str, Any]], *, pool: str = "clean"
) -> dict[tuple[str, str], list[str]]:
    """{(entity type, culture): sampling pool} from `camel_entities` rows (see
    docs/benchmarks/camel.md, Protocol).

    "clean": strip, de-duplicate, drop unlabelled rows and strings labelled with both cultures, then
    sort by code point. "raw": every labelled cell as released, in row order.
    """
    raw: dict[tuple[str, str], list[str]] = {}
    for row in rows:
        culture = SOURCE_CULTURES.get(row["culture"]) if row["culture"] else None
        if culture is None:
            continue
        entity = row["entity"] if pool == "raw" else row["entity"].strip()
        raw.setdefault((type_name(row["entity_type"]), culture), []).append(entity)
    if pool == "raw":
        return raw
    pools = {}
    for (etype, culture), entities in raw.items():
        other = set(raw.get((etype, CULTURES[1 - CULTURES.index(culture)]), ()))
        pools[(etype, culture)] = sorted(set(entities) - other)
    return pools


@dataclass(frozen=True)
class Sample:
    """The entities of one (run, type): Arab and Western fillers, and the Arab rng (continued for
    demos).
    """

    arab: tuple[str, ...]
    western: tuple[str, ...]
    arab_rng: np.random.Generator


def draw(
    pool: Sequence[str], seed: int, run: int, type_index: int, culture_index: int, size: int
) -> tuple[tuple[str, ...], np.random.Generator]:
    """min(size, pool) entities without replacement from `default_rng([seed, run, type,
    culture])`.
    """
    if not pool:
        raise CultureProbeError(
            f"Entity type #{type_index} has an empty {CULTURES[culture_index]} pool."
        )
    rng = np.random.default_rng([seed, run, type_index, culture_index])
    picked = rng.choice(len(pool), size=min(size, len(pool)), replace=False)
    return tuple(pool[i] for i in picked), rng


def sample(
    pools: Mapping[tuple[str, str], Sequence[str]], etype: str, run: int, *, seed: int, size: int
) -> Sample:
    """The (run, type) sample shared by every prompt of that type in that run."""
    tau = ENTITY_TYPES.index(etype)
    arab, rng = draw(pools.get((etype, "arab"), ()), seed, run, tau, 0, size)
    western, _ = draw(pools.get((etype, "western"), ()), seed, run, tau, 1, size)
    return Sample(arab, western, rng)


# ---------------------------------------------------------------- prompts


def masked_parts(prompt: str) -> tuple[str, str]:
    """(left, right) of a normalised masked prompt, each stripped."""
    text = normalise(prompt)
    if text.count(MASK) != 1:
        raise CultureProbeError(f"A CAMeL prompt must hold exactly one {MASK}: {prompt!r}")
    left, right = text.split(MASK)
    return left.strip(), right.strip()


def fill(prompt: str, entity: str) -> str:
    """The masked prompt with its slot filled (a masked model's demonstration)."""
    left, right = masked_parts(prompt)
    return " ".join(part for part in (left, entity, right) if part)


def context(
    row: Mapping[str, Any], kind: str, *, culture_token: bool = False, demos: Sequence[str] = ()
) -> tuple[str, str]:
    """(left, right) the model sees: the whole masked prompt for masked models, the causal prefix
    otherwise.

    The culture token precedes the probed prompt; `n` demonstrations (filled prompts) precede both,
    one per line.
    """
    if kind == "masked":
        left, right = masked_parts(row["prompt_masked"])
        shown = [fill(row["prompt_masked"], e) for e in demos]
    else:
        left, right = normalise(row["prompt_causal"]), ""
        shown = [" ".join(p for p in (left, e) if p) for e in demos]
    if culture_token:
        left = (CULTURE_TOKEN + left).strip() if left else CULTURE_TOKEN.strip()
    if shown:
        left = "\n".join(shown) + "\n" + left
    return left, right


def filler_scores(output: CandidateScores, aggregate: str) -> np.ndarray:
    """Mean probability or mean log-prob of each candidate's tokens (deviation C3)."""
    if aggregate == "mean_logprob":
        return np.asarray(output.mean_logprob, dtype=np.float64)
    if output.token_logprobs is None:
        raise CultureProbeError(
            "mean_prob needs the per-token log-probs (score with keep_tokens=True)."
        )
    # every candidate's mean at once, equal bit for bit to `np.mean` of each
    lengths = np.asarray(output.n_tokens, dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(lengths)])
    values = np.exp(np.concatenate(output.token_logprobs).astype(np.float64))
    sums: np.ndarray = row_sums(values, TokenRows(np.zeros(len(values), np.int64), starts))
    return sums / lengths


# ---------------------------------------------------------------- the task


def _causal_context(task: CamelTask) -> bool:
    return task.kind != "masked"


class CamelTask(Task):
    """CAMeL-Co / CAMeL-Ag cultural bias score (the paper's section 4.4)."""

    Options = CamelOptions
    unit, strata = "prompts", ("entity_type",)
    design = SamplingDesign(
        "prompt",
        crossed="entity samples",
        note="each entity type is a stratum of prompts; each run draws one entity sample per type, which fills every "
        "prompt of the type, so the runs are a random factor crossed with the prompts",
    )
    text_columns = ("prompt_masked", "prompt_causal")
    smoke = Smoke(
        2,
        "the CBS averages the entity types with equal weight and its interval holds the spread of prompts within "
        "each type and of the runs' entity samples, which needs 2 prompts of every type (and n_runs of 2 or more)",
    )
    options: CamelOptions
    seeded = True  # the entity samples of each run are drawn with the seed

    def _configure(self) -> None:
        """Refuse a CAMeL config without prompts (the entities are the protocol's side data); the
        facts config.json records: how fillers are scored, and how entity samples are seeded.
        """
        if self.benchmark.base not in ("camel_co_prompts", "camel_ag_prompts"):
            raise CultureProbeError(
                f"{self.config!r} holds no prompts to probe; run camel_co_prompts or camel_ag_prompts (the entities "
                "are loaded by the protocol)."
            )
        self.facts = {
            "aggregate": self.aggregate,
            "masked_method": self._masked_method() if self.kind == "masked" else None,
            "seq2seq_style": self.options.seq2seq_style if self.kind == "seq2seq" else None,
            "context": "whole masked prompt" if self.kind == "masked" else "text left of the mask",
            "seed_scheme": "numpy.random.default_rng([seed, run, type_index, culture_index])",
        }

    @property
    def aggregate(self) -> str:
        """The subword aggregation in use (C3)."""
        if self.options.aggregate != "auto":
            return self.options.aggregate
        return "mean_prob" if self.kind == "masked" else "mean_logprob"

    def _masked_method(self) -> str:
        """The engine's masked rule (C4); other model kinds have none."""
        return "l2r" if self.options.mlm_mode == "l2r" and self.kind == "masked" else "typed"

    def _score_options(self) -> ScoreOptions:
        return ScoreOptions(
            masked_method=self._masked_method(),  # type: ignore[arg-type]
            seq2seq_style=self.options.seq2seq_style if self.kind == "seq2seq" else "sentinel",
            keep_tokens=self.aggregate == "mean_prob",
        )

    # ------------------------------------------------------------ hooks

    def _probes(
        self, rows: Sequence[Mapping[str, Any]], stage: str, previous: Sequence[Record]
    ) -> Iterable[Probe]:
        pools, o = entity_pools(self.resource("entities"), pool=self.options.pool), self.options
        largest = max(map(len, pools.values()), default=0)
        # known only once the pools are read, still before the model loads; the paper's 50 is
        # min(50, pool)
        if o.sample_size > max(largest, CamelOptions.sample_size):
            raise InvalidValueError(
                f"sample_size={o.sample_size} is above every entity pool (the largest holds {largest} entities, "
                f"pool={o.pool!r}), so every run would draw whole pools: give at most {largest}, or the paper's "
                f"{CamelOptions.sample_size} (section 4.4 draws min({CamelOptions.sample_size}, pool))."
            )
        options = self._score_options()
        for run in range(o.n_runs):
            samples: dict[str, Sample] = {}
            for row in rows:
                etype = type_name(row["entity_type"])
                meta = {"entity_type": etype, "run": run, "sentiment": row.get("sentiment")}
                if self.kind != "masked" and o.exclude_empty_prefix and not row["prompt_causal"]:
                    yield Skipped(
                        str(row["id"]),
                        "empty causal prefix (exclude_empty_prefix=True, C1)",
                        tag=f"run{run}",
                        meta=meta,
                    )
                    continue
                if etype not in samples:
                    samples[etype] = sample(pools, etype, run, seed=self.seed, size=o.sample_size)
                drawn = samples[etype]
                demos = self._demos(pools[(etype, "arab")], drawn) if o.n_shot else ()
                left, right = context(row, self.kind, culture_token=o.culture_token, demos=demos)
                yield ScoreProbe(
                    str(row["id"]),
                    ScoreRequest(left, drawn.arab + drawn.western, right),
                    options,
                    tag=f"run{run}",
                    meta={**meta, "n_arab": len(drawn.arab)},
                )

    def _demos(self, arab_pool: Sequence[str], drawn: Sample) -> tuple[str, ...]:
        excluded = set(drawn.arab)
        rest = [e for e in arab_pool if e not in excluded]
        picked = drawn.arab_rng.choice(
            len(rest), size=min(self.options.n_shot, len(rest)), replace=False
        )
        return tuple(rest[i] for i in picked)

    def _read(self, probe: Probe, output: Output) -> RecordFields:
        assert isinstance(probe, ScoreProbe) and isinstance(output, CandidateScores)
        scores, n_arab, candidates = (
            filler_scores(output, self.aggregate),
            probe.meta["n_arab"],
            output.candidates,
        )
        return {
            "left": probe.request.left,
            "right": probe.request.right,
            "arab_entities": list(candidates[:n_arab]),
            "western_entities": list(candidates[n_arab:]),
            "arab": scores[:n_arab].tolist(),
            "western": scores[n_arab:].tolist(),
        }

    def _metrics(self, records: list[Record], skipped: list[Record]) -> Scores:
        """The CBS summary, and per prompt and run its CBS; `cbs` is their mean over runs and
        prompts, averaged over entity types with equal weight. The design: each type is a stratum of
        prompts crossed with its runs' entity samples (every prompt of a type is filled from the
        same draw), so the interval holds the spread between entity samples too.
        """
        prompts = [scored_prompt(r) for r in records]
        summary = run_summary(prompts, tie_value=self.options.tie_value)
        return Scores(summary, [self._cbs_table(prompts)])

    def _cbs_table(self, prompts: Sequence[ScoredPrompt]) -> UnitTable:
        """Each prompt's CBS per run, by entity type, on the percent scale."""
        return unit_table(
            "cbs",
            [
                UnitValue(
                    str(p.prompt_id),
                    prompt_cbs(np.asarray(p.arab), np.asarray(p.western), self.options.tie_value),
                    {"entity_type": p.entity_type},
                    str(p.run),
                )
                for p in prompts
            ],
            macro="entity_type",
            higher_is_better=None,  # 50 = no bias: neither direction is better
            crossed=self.design.crossed,
        ).with_scale(100.0)

    # Where this protocol differs from the released code (docs/deviations.md) tareknaous/camel
    # released data only: every deviation below is measured against the paper, none has an upstream
    # side, and the upstream profile changes nothing for CAMeL
    deviations = (
        Deviation(
            "C1",
            "Co causal prompts derived from the text left of [MASK] (upstream file missing).",
            "CAMeL-Co, causal and seq2seq models",
            lambda t: _causal_context(t) and t.benchmark.base == "camel_co_prompts",
            upstream_note=f"{NO_CODE}; the README says the causal prompts were rewritten, and that file was "
            "never released, so nothing can reproduce it (exclude_empty_prefix=True drops the 10 prompts "
            "whose derived prefix is empty)",
        ),
        Deviation(
            "C2",
            "Ag causal rows with text after the mask: that text is dropped.",
            "CAMeL-Ag, causal and seq2seq models",
            lambda t: _causal_context(t) and t.benchmark.base == "camel_ag_prompts",
            upstream_note=f"{NO_CODE}; the paper scores causal models on the text before [MASK]",
        ),
        Deviation(
            "C3",
            "Subword aggregation, unstated beyond the paper's 'average over all the sub-words': mean "
            "probability (masked), mean log-prob (causal/seq2seq) with aggregate='auto'; aggregate= picks "
            "one rule for every model kind.",
            upstream_note=f"{NO_CODE}; aggregate= tries the other reading of the paper",
        ),
        Deviation.for_kind(
            "C4",
            "Masked multi-subword scoring, unstated in the paper: left-to-right one-mask infill "
            "(mlm_mode='l2r'); mlm_mode='all_masks' masks every subword at once.",
            "masked",
            upstream_note=f"{NO_CODE}; mlm_mode= tries the other procedure",
        ),
        Deviation(
            "C5",
            "Sampling pool, unstated in the paper: stripped, de-duplicated, unlabelled and "
            "cross-labelled strings dropped (pool='clean'); pool='raw' samples the released cells as they are.",
            upstream_note=f"{NO_CODE}; pool='raw' samples the released cells",
        ),
        Deviation(
            "C6",
            "Sample size min(50, pool).",
            upstream_note=f"{NO_CODE}; the paper samples 50 per culture, and clothing Western has 23",
        ),
        Deviation(
            "C7",
            "Seeds: numpy default_rng([seed, run, type, culture]).",
            upstream_note=f"{NO_CODE} and no seeds: upstream's draws cannot be matched (seed= changes ours)",
        ),
        Deviation(
            "C8",
            "Ties count as not Western: the strict '>' of the paper's formula (tie_value=0); "
            "tie_value=0.5 gives an AUC.",
            upstream_note=f"{NO_CODE}; tie_value=0 is the paper's formula",
        ),
        Deviation(
            "C9",
            "Avg recomputed from the ten type columns.",
            upstream_note=f"{NO_CODE}; two printed Avg cells disagree with their own columns",
        ),
        Deviation(
            "C10",
            "Prompt adaptation formats (our choice; the paper gives none): culture_token prepends "
            "'[عربي] ' to the probed prompt; n_shot demonstrations are the same prompt filled with Arab "
            "entities drawn (with the run's Arab rng, continued after its sample) from the Arab pool "
            "minus that sample, one per line before the prompt.",
            "culture_token or n_shot",
            lambda t: t.options.culture_token or t.options.n_shot > 0,
            upstream_note=f"{NO_CODE}; the paper gives no format for the token or the demonstrations",
        ),
    )


def scored_prompt(record: Record) -> ScoredPrompt:
    """The metric input of one record."""
    return ScoredPrompt(
        record["id"],
        record["entity_type"],
        record["run"],
        tuple(record["arab"]),
        tuple(record["western"]),
    )


TASK = CamelTask
