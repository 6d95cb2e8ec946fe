"""CAMeL protocol: score sampled Arab and Western fillers of each Arabic prompt; the CBS counts Western wins.

Spec section 4: masked LMs see the whole prompt and score a filler by left-to-right one-mask infill (mean
probability over its subwords); causal and seq2seq LMs see only the text left of the mask (mean log-prob). Per
run r (five by default), entity type tau and culture kappa, `numpy.random.default_rng([seed, r, tau, kappa])`
draws min(50, pool) entities from the cleaned pool; that sample fills every prompt of the type in the run. CBS per
prompt, averaged per type, then over runs (`culture_probe.metrics.camel.cbs`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from culture_probe.data.card import Deviation
from culture_probe.engine.types import CandidateScores, ScoreRequest
from culture_probe.errors import CultureProbeError
from culture_probe.tasks.base import Bars, Heatmap, Output, Probe, Record, ScoreProbe, Section, Skipped, Table, Task

MASK = "[MASK]"
CULTURE_TOKEN = "[عربي] "
CULTURES = ("arab", "western")  # kappa = index
SOURCE_CULTURES = {"Arab": "arab", "Western": "western"}


@dataclass(frozen=True)
class CamelOptions:
    """Switches of the CAMeL protocol (defaults: spec section 4; the deviation ids say why)."""

    n_runs: int = 5
    sample_size: int = 50
    pool: Literal["clean", "raw"] = "clean"  # C5
    aggregate: Literal["auto", "mean_prob", "mean_logprob"] = "auto"  # C3 (auto: prob masked, log-prob otherwise)
    mlm_mode: Literal["l2r", "all_masks"] = "l2r"  # C4
    exclude_empty_prefix: bool = False  # C1
    tie_value: float = 0.0  # C8
    culture_token: bool = False  # paper 4.4 prompt adaptation
    n_shot: int = 0  # paper 4.4 demonstrations (Arab fillers)
    seq2seq_style: Literal["sentinel", "plain"] = "sentinel"  # spec 4.3: plain = encoder prefix, target entity


# ---------------------------------------------------------------- pools and samples


def normalise(text: str) -> str:
    """Strip and collapse runs of spaces (spec 4.3): prompts keep their raw text in the dataset."""
    return re.sub(r" {2,}", " ", text.strip())


def type_name(value: Any) -> str:
    """An entity type as its name (rows from `datasets` hold the ClassLabel index)."""
    from culture_probe.data.camel import ENTITY_TYPES

    return ENTITY_TYPES[value] if isinstance(value, (int, np.integer)) else str(value)


def entity_pools(rows: Iterable[Mapping[str, Any]], *, pool: str = "clean") -> dict[tuple[str, str], list[str]]:
    """{(entity type, culture): sampling pool} from `camel_entities` rows (spec 4.4).

    "clean": strip, de-duplicate, drop unlabelled rows and strings labelled with both cultures, then sort by code
    point. "raw": every labelled cell as released, in row order.
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
    """The entities of one (run, type): Arab and Western fillers, and the Arab rng (continued for demos)."""

    arab: tuple[str, ...]
    western: tuple[str, ...]
    arab_rng: np.random.Generator


def draw(pool: Sequence[str], seed: int, run: int, type_index: int, culture_index: int, size: int
         ) -> tuple[tuple[str, ...], np.random.Generator]:
    """min(size, pool) entities without replacement from `default_rng([seed, run, type, culture])`."""
    if not pool:
        raise CultureProbeError(f"Entity type #{type_index} has an empty {CULTURES[culture_index]} pool.")
    rng = np.random.default_rng([seed, run, type_index, culture_index])
    picked = rng.choice(len(pool), size=min(size, len(pool)), replace=False)
    return tuple(pool[i] for i in picked), rng


def sample(pools: Mapping[tuple[str, str], Sequence[str]], etype: str, run: int, *, seed: int, size: int) -> Sample:
    """The (run, type) sample shared by every prompt of that type in that run."""
    from culture_probe.data.camel import ENTITY_TYPES

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


def context(row: Mapping[str, Any], kind: str, *, culture_token: bool = False, demos: Sequence[str] = ()
            ) -> tuple[str, str]:
    """(left, right) the model sees: the whole masked prompt for masked models, the causal prefix otherwise.

    The culture token precedes the probed prompt; `n` demonstrations (filled prompts) precede both, one per line.
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
    """Mean probability or mean log-prob of each candidate's tokens (spec 4.3, C3)."""
    if aggregate == "mean_logprob":
        return np.asarray(output.mean_logprob, dtype=np.float64)
    if output.token_logprobs is None:
        raise CultureProbeError("mean_prob needs the per-token log-probs (score with keep_tokens=True).")
    return np.array([float(np.mean(np.exp(np.asarray(t, dtype=np.float64)))) for t in output.token_logprobs])


# ---------------------------------------------------------------- the task


class CamelTask(Task):
    """CAMeL-Co / CAMeL-Ag cultural bias score (spec section 4)."""

    Options = CamelOptions
    seeded = True  # the entity samples of each run are drawn with the seed
    deviations = (
        Deviation("C10", "Prompt adaptation formats (our choice; the paper gives none): culture_token prepends "
                         "'[عربي] ' to the probed prompt; n_shot demonstrations are the same prompt filled with Arab "
                         "entities drawn (with the run's Arab rng, continued after its sample) from the Arab pool "
                         "minus that sample, one per line before the prompt."),
    )

    def __init__(self, config: str, options: Any = None, *, kind: Any, seed: int = 0):
        super().__init__(config, options, kind=kind, seed=seed)
        base = config.removesuffix("_corrected")
        if base not in ("camel_co_prompts", "camel_ag_prompts"):
            raise CultureProbeError(
                f"{config!r} holds no prompts to probe; run camel_co_prompts or camel_ag_prompts (the entities "
                "are loaded by the protocol)."
            )
        o = self.options
        if o.n_runs < 1 or o.sample_size < 1 or o.n_shot < 0:
            raise CultureProbeError(f"n_runs and sample_size must be >= 1 and n_shot >= 0; got {o}.")
        self.entity_rows: Sequence[Mapping[str, Any]] | None = None  # set to skip loading camel_entities

    @property
    def aggregate(self) -> str:
        """The subword aggregation in use (C3)."""
        if self.options.aggregate != "auto":
            return self.options.aggregate
        return "mean_prob" if self.kind == "masked" else "mean_logprob"

    def describe(self, rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """Protocol facts recorded in config.json."""
        return {"aggregate": self.aggregate, "masked_method": self._masked_method() if self.kind == "masked" else None,
                "seq2seq_style": self.options.seq2seq_style if self.kind == "seq2seq" else None,
                "context": "whole masked prompt" if self.kind == "masked" else "text left of the mask",
                "seed_scheme": "numpy.random.default_rng([seed, run, type_index, culture_index])"}

    def _masked_method(self) -> str:
        """The engine's masked rule (C4); other model kinds have none."""
        return "l2r" if self.options.mlm_mode == "l2r" and self.kind == "masked" else "typed"

    def _pools(self) -> dict[tuple[str, str], list[str]]:
        rows = self.entity_rows
        if rows is None:
            from culture_probe.data.registry import load_benchmark

            rows = load_benchmark("camel_entities", corrected=self.config.endswith("_corrected"))["test"]
        return entity_pools(rows, pool=self.options.pool)

    # ------------------------------------------------------------ hooks

    def _probes(self, rows: Sequence[Mapping[str, Any]], stage: str, previous: Sequence[Record]) -> Iterable[Probe]:
        pools, o = self._pools(), self.options
        for run in range(o.n_runs):
            samples: dict[str, Sample] = {}
            for row in rows:
                etype = type_name(row["entity_type"])
                meta = {"entity_type": etype, "run": run, "sentiment": row.get("sentiment")}
                if self.kind != "masked" and o.exclude_empty_prefix and not row["prompt_causal"]:
                    yield Skipped(str(row["id"]), "empty causal prefix (exclude_empty_prefix=True, C1)",
                                  tag=f"run{run}", meta=meta)
                    continue
                if etype not in samples:
                    samples[etype] = sample(pools, etype, run, seed=self.seed, size=o.sample_size)
                drawn = samples[etype]
                demos = self._demos(pools[(etype, "arab")], drawn) if o.n_shot else ()
                left, right = context(row, self.kind, culture_token=o.culture_token, demos=demos)
                yield ScoreProbe(str(row["id"]), ScoreRequest(left, drawn.arab + drawn.western, right),
                                 tag=f"run{run}", meta={**meta, "n_arab": len(drawn.arab)},
                                 masked_method=self._masked_method(), keep_tokens=self.aggregate == "mean_prob",
                                 seq2seq_style=self.options.seq2seq_style if self.kind == "seq2seq" else "sentinel")

    def _demos(self, arab_pool: Sequence[str], drawn: Sample) -> tuple[str, ...]:
        excluded = set(drawn.arab)
        rest = [e for e in arab_pool if e not in excluded]
        picked = drawn.arab_rng.choice(len(rest), size=min(self.options.n_shot, len(rest)), replace=False)
        return tuple(rest[i] for i in picked)

    def _record(self, probe: Probe, output: Output) -> Record:
        assert isinstance(probe, ScoreProbe) and isinstance(output, CandidateScores)
        scores, n_arab, candidates = filler_scores(output, self.aggregate), probe.meta["n_arab"], output.candidates
        return {"left": probe.request.left, "right": probe.request.right,
                "arab_entities": list(candidates[:n_arab]), "western_entities": list(candidates[n_arab:]),
                "arab": scores[:n_arab].tolist(), "western": scores[n_arab:].tolist()}

    def _metrics(self, records: list[Record]) -> dict[str, Any]:
        from culture_probe.metrics.camel import cbs

        prompt_ids, cultures, scores, types, runs = [], [], [], [], []
        scored = [r for r in records if "skipped" not in r]
        if not scored:
            raise CultureProbeError("No scored CAMeL prompts: every probe of this run was skipped.")
        for record in scored:
            for culture in CULTURES:
                values = record[culture]
                prompt_ids += [record["id"]] * len(values)
                cultures += [culture] * len(values)
                scores += values
                types += [record["entity_type"]] * len(values)
                runs += [record["run"]] * len(values)
        result = cbs(prompt_id=prompt_ids, culture=cultures, score=scores, entity_type=types, run=runs,
                     tie_value=self.options.tie_value)
        result["n_runs"] = len({r["run"] for r in scored})
        result["n_skipped"] = len(records) - len(scored)
        return result

    def sections(self, records: Sequence[Record], metrics: Mapping[str, Any]) -> list[Section]:
        """CBS per entity type (mean ± std over runs), per-prompt CBS bars, and a type x run heatmap.

        The heatmap shows how stable each type's CBS is across the seeded entity samples.
        """
        from culture_probe.data.camel import ENTITY_TYPES
        from culture_probe.metrics.camel import prompt_cbs

        present = [t for t in ENTITY_TYPES if t in metrics["per_type"]]
        rows = tuple((t, metrics["per_type"][t], metrics["per_type_std"].get(t)) for t in present)
        rows += (("Avg", metrics["cbs"], metrics.get("std")),)
        per_prompt: dict[tuple[str, int], list[float]] = {}
        for record in (r for r in records if "skipped" not in r):
            per_prompt.setdefault((record["entity_type"], record["run"]), []).append(
                prompt_cbs(np.asarray(record["arab"]), np.asarray(record["western"]), self.options.tie_value))
        runs = sorted({run for _, run in per_prompt})
        bars = {t: [v for run in runs for v in per_prompt.get((t, run), ())] for t in present}
        grid = tuple(tuple(float(np.mean(per_prompt[(t, run)])) if (t, run) in per_prompt else None for run in runs)
                     for t in present)
        heatmap = Heatmap(tuple(present), tuple(f"run {run}" for run in runs), grid, label="CBS (%)",
                          title="CBS per entity type and run")
        text = ("CBS = share (%) of (Arab, Western) filler pairs in which the model prefers the Western filler; "
                "50 is parity, 0 is a full preference for Arab entities. Mean over runs; std over runs.")
        return [Section("Cultural Bias Score", text=text,
                        tables=(Table(("entity type", "CBS", "std over runs"), rows),),
                        figures=(Bars(bars, ylabel="CBS per prompt (%)"), heatmap))]


TASK = CamelTask
