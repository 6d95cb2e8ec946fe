"""`culture-probe run`, and suites: `culture-probe run dlama fmlama_en camel_co_prompts --model M
--out DIR` runs several configs (or named groups: each benchmark's paper experiments, see
`culture-probe list`) on one model loaded once, into one folder: a run directory per config, and a
summary across them (`suite.md`, `suite.json`, a figure per benchmark).

Before the model loads, every config's options are checked and then its run is planned: rows and
languages, declared resources, first-stage probes. A config whose data cannot be had
(`MissingDataError`: MAPS without its folder, a DLAMA language the release lacks) is skipped with
its reason, said at once and kept in `suite.md` and `suite.json`; `strict=True` (`--strict`) stops
instead, and a suite with nothing left to run is an error. The summary is written once the model is
loaded (every planned config listed, those not started as not run), after each config finishes, and
when the suite stops on an error or Ctrl-C (the config it was running marked INCOMPLETE k/N), so a
suite stopped half-way keeps what it computed; `--resume` continues it, or adds configs to it, and
names at its start the configs it continues and those not run yet.

A suite folder is marked as one (`rundir.SUITE_MARKER`): a run of one config refuses it, a suite
refuses a run's folder, a second process writing it fails at once (its lock), and its summary lists
every run it holds, also those of configs the current call does not name (docs/running.md,
"Suites").
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from culture_probe import rundir
from culture_probe.data.registry import check_data_options, expand, resolve
from culture_probe.engine.loading import ModelInput
from culture_probe.engine.scorer import ScorerProtocol
from culture_probe.errors import CultureProbeError, InvalidValueError, MissingDataError
from culture_probe.runner import planning, stage_models
from culture_probe.runner.api import RunResult, run_with
from culture_probe.runner.execution import is_main_process
from culture_probe.runner.planning import (
    Plan,
    SmallLimitWarning,
    check_language,
    first_asked,
    limit_for,
)
from culture_probe.settings import RunSettings
from culture_probe.tasks import task_for
from culture_probe.tasks.routing import joined, options_per_config
from culture_probe.throughput import RunCostNotice, estimate_for, loaded_workload, total_line
from culture_probe.util.typecheck import checked, names_given

if TYPE_CHECKING:
    from culture_probe.report.summary import SuiteRun

T = TypeVar("T")
# the exit code of a suite that ran, but skipped configs whose data it could not have (2 is an
# error)
SKIPPED_EXIT = 3


class SkippedConfigWarning(UserWarning):
    """A suite's config whose data cannot be had (the message says why): skipped, said before the
    model loads.
    """


class SuiteResumeNotice(UserWarning):
    """A suite resumed: the configs it continues (INCOMPLETE k/N) and those not run yet, said before
    the model loads.
    """


@dataclass(frozen=True)
class SuiteResult:
    """Every config's run, the configs skipped for want of data ({config: why}), and the summary
    across them.
    """

    runs: dict[str, RunResult]
    summary: dict[str, Any]
    out: Path | None = None
    skipped: dict[str, str] = field(default_factory=dict)


@checked()
def run_suite(
    names: str | Sequence[str],
    model: ModelInput,
    settings: RunSettings | None = None,
    *,
    out: str | os.PathLike | None = None,
    resume: bool = False,
    progress: bool = True,
    strict: bool = False,
    options: Mapping[str, Any] | None = None,
    **keywords: Any,
) -> SuiteResult:
    """Run every config that `names` (configs or groups) name on `model`, loaded once; `settings`
    and keywords as `run` takes them (`data_dir` may name a folder per benchmark). A protocol option
    (a keyword, or a key of `options`) goes to every config that has it; a prefixed key of `options`
    (`{"xfakt.judge": "string"}`) to the configs of that benchmark or to that config only
    (`tasks.routing.options_per_config`). With `out`, each config's run goes to `out/<config>` and
    the summary to `out/suite.md` and `out/suite.json`. A config whose data cannot be had is skipped
    (`SkippedConfigWarning`, `SuiteResult.skipped`) unless `strict`. An `out` that holds a suite's
    runs already takes `resume` (to continue it, or add configs to it) and the same model. `names`
    is one name or a list of them.
    """
    configs = expand(names_given(names, "run_suite(names)"))
    settings, each, data_dirs = suite_settings(configs, settings, keywords, options)
    check_configs(configs, settings, each)
    folder = Path(out) if out is not None else None
    main = is_main_process()
    if folder is not None and main:  # only the writer checks whose folder it is, as a run's does
        # new, empty, or a suite's: never a run's nor anyone's
        rundir.check_writable(folder, "suite")
    with ExitStack() as claim:
        # A second writer of a suite folder fails at once (its lock); a new folder is made, and
        # locked, only once the suite is planned, so that a suite refused while planning leaves
        # nothing behind.
        early = folder is not None and main and folder.is_dir()
        if early:
            claim.enter_context(rundir.lock(folder, "suite"))
        earlier, skipped_before = (
            held(folder, model, configs, resume) if folder is not None else ({}, {})
        )
        plans, skipped = plan_each(
            configs, lambda c: planned(c, model, settings, each[c], data_dirs), strict
        )
        skipped = {**skipped_before, **skipped}
        if folder is not None:
            if main and not early:
                claim.enter_context(rundir.lock(folder, "suite"))
            folder.mkdir(parents=True, exist_ok=True)
            if main:
                rundir.write_text(folder / rundir.SUITE_MARKER, rundir.SUITE_NOTE)
        from culture_probe.report.summary import (
            planned_of,
            read_summary,
            summarize_suite,
            write_summary,
        )

        order = [*(planned_of(read_summary(folder)) if folder is not None else ()), *configs]
        if resume and main and (notice := resume_notice(earlier, configs, order, skipped)):
            warnings.warn(
                f"Resuming the suite in {folder}: {notice}.", SuiteResumeNotice, stacklevel=2
            )
        scorer = stage_models.model_spec(model, settings).load()
        if progress and main and len(plans) > 1:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", SmallLimitWarning)  # said by plan_each already
                line, plans = suite_cost(plans, model, scorer, settings, folder)
                RunCostNotice(line).say()
        summary = summarize_suite(model, earlier, skipped, order)
        # every planned config listed from the start, those not started as not run
        if folder is not None and main:
            write_summary(folder, summary)

        def run_one(config: str) -> RunResult:
            return run_with(
                config,
                model,
                replace(settings, data_dir=data_dirs[config]),
                each[config],
                out=folder / config if folder else None,
                resume=resume,
                progress=progress,
                scorer=scorer,
                prepared=plans.pop(config),  # each plan is dropped as its run starts
            )

        try:
            runs, summary = run_planned(
                list(plans), run_one, model, earlier, skipped, order, folder
            )
        except BaseException:
            if folder is not None and main:
                keep_stopped(folder, model, skipped, order)
            raise
    return SuiteResult(runs, summary, folder, skipped)


def check_configs(
    configs: Sequence[str], settings: RunSettings, each: Mapping[str, Mapping[str, Any]]
) -> None:
    """Every config's options and language, checked before the model loads: an error names the
    config.
    """
    for config in configs:
        try:
            benchmark = resolve(config)
            task_for(benchmark).options_for(settings.protocol, each[config])
            check_language(benchmark, settings.language, custom_rows=False)
        except CultureProbeError as error:
            raise CultureProbeError(f"In the suite's config {config}: {error}") from None


def run_planned(
    configs: Sequence[str],
    run_one: Callable[[str], RunResult],
    model: ModelInput,
    earlier: Mapping[str, SuiteRun],
    skipped: Mapping[str, str],
    order: Sequence[str],
    folder: Path | None,
) -> tuple[dict[str, RunResult], dict[str, Any]]:
    """Run each config in turn (`run_one`), the summary rewritten after each (with the suite's
    `earlier` runs), so that a suite stopped at any point has the summary of what it finished; (the
    runs, the last summary).
    """
    from culture_probe.report.summary import SuiteRun, summarize_suite, write_summary

    runs: dict[str, RunResult] = {}
    summary = summarize_suite(model, earlier, skipped, order)
    with warnings.catch_warnings():
        # each run's notice was given by plan_suite
        warnings.simplefilter("ignore", SmallLimitWarning)
        for config in configs:
            runs[config] = run_one(config)
            done = {c: SuiteRun(r.config, r.metrics) for c, r in runs.items()}
            summary = summarize_suite(model, {**earlier, **done}, skipped, order)
            if folder is not None:
                write_summary(folder, summary)
    return runs, summary


def suite_cost(
    plans: Mapping[str, Plan],
    model: ModelInput,
    scorer: ScorerProtocol,
    settings: RunSettings,
    folder: Path | None,
) -> tuple[str, dict[str, Plan]]:
    """What the suite's configs will put through its model, together, said once the model has
    loaded: each config's first stage as its run will ask it (--limit, --shard, less the probes a
    resumed folder answers), timed at the config's own rate. Returns the line, and the plans with
    their workloads (`Plan.work`): each run says its own part as it starts without counting it
    again.
    """
    parts, costed = [], {}
    spec = stage_models.model_spec(model, settings, scorer)
    for config, ahead in plans.items():
        _, part = first_asked(ahead.task, ahead.probes, settings, spec)
        done = (
            rundir.read_records(folder / config / rundir.ITEMS_FILE) if folder is not None else []
        )
        answered = {r.key for r in done if r.stage == ahead.task.stage_names[0]}
        work = loaded_workload(scorer, [p for p in part.probes if p.key not in answered])
        parts.append((work, estimate_for(work, scorer, config)))
        costed[config] = replace(ahead, work=work)
    return total_line(f"the suite starts: {len(plans)} configs' first stages", parts), costed


def resume_notice(
    earlier: Mapping[str, SuiteRun],
    configs: Sequence[str],
    planned: Sequence[str],
    skipped: Mapping[str, str],
) -> str:
    """What a resumed suite will do, said at its start: the configs it continues (`INCOMPLETE k/N`),
    those not run yet that it runs now, and those it leaves as they are (planned before, not named
    now); "" when nothing is left.
    """
    unfinished = {c: run.status for c, run in earlier.items() if run.status}
    later = [c for c in dict.fromkeys(planned) if c not in configs and c not in skipped]
    parts = [
        ("continuing", [f"{c} ({unfinished[c]})" for c in configs if c in unfinished]),
        ("not run yet, running now", [c for c in configs if c not in earlier and c not in skipped]),
        (
            "left as they are (not named now)",
            [
                f"{c} ({unfinished.get(c, 'not run')})"
                for c in later
                if c not in earlier or c in unfinished
            ],
        ),
    ]
    return "; ".join(f"{what}: {', '.join(names)}" for what, names in parts if names)


def keep_stopped(
    folder: Path, model: ModelInput, skipped: Mapping[str, str], planned: Sequence[str]
) -> None:
    """A suite stopped by an error or Ctrl-C: its summary rebuilt from the folder as it stands, the
    config it was running marked INCOMPLETE k/N rather than not run; a summary that cannot be made
    is one warning (the stop's own error follows it).
    """
    from culture_probe.report import suite_runs
    from culture_probe.report.summary import summarize_suite, write_summary

    try:
        write_summary(folder, summarize_suite(model, suite_runs(folder), skipped, planned))
    except Exception as error:  # noqa: BLE001 - the error that stopped the suite is the one to raise
        warnings.warn(
            f"The summary of {folder} could not be updated ({type(error).__name__}: {error}); "
            f"`culture-probe report {folder}` rebuilds it.",
            stacklevel=3,
        )


def held(
    folder: Path, model: ModelInput, configs: Sequence[str], resume: bool
) -> tuple[dict[str, SuiteRun], dict[str, str]]:
    """What a suite folder holds already and its summary keeps listing: its runs that answered a
    probe, and the configs it skipped that this suite does not name. A folder holding runs is
    refused without `resume`, and a suite of another model always (its summary is one model's).
    """
    from culture_probe.report import suite_runs
    from culture_probe.report.summary import read_summary

    stored, runs = read_summary(folder), suite_runs(folder)
    if runs and not resume:
        raise CultureProbeError(
            f"{folder} already holds a suite (runs of {', '.join(runs)}). Pass --resume (resume=True) to continue "
            "it or to add configs to it, or choose a new --out."
        )
    if stored.get("model", str(model)) != str(model):
        raise CultureProbeError(
            f"Cannot resume {folder}: its suite ran {stored['model']}, not {model}, and a suite is one model's. "
            "Choose a new --out."
        )
    return runs, {
        config: why for config, why in stored.get("skipped", {}).items() if config not in configs
    }


def suite_settings(
    configs: Sequence[str],
    base: RunSettings | None,
    keywords: Mapping[str, Any],
    options: Mapping[str, Any] | None = None,
) -> tuple[RunSettings, dict[str, dict[str, Any]], dict[str, Any]]:
    """A suite's settings (`base` and the setting keywords), each config's protocol options (the
    other keywords and `options`, each to the configs that have it or that its prefix names) and
    each config's data folder (`data_dir`: one for all, or per benchmark), the folders checked to
    exist.
    """
    keywords = dict(keywords)
    data_dir = keywords.pop("data_dir", None)
    settings, protocol = RunSettings.split(keywords, base)
    each = options_per_config(configs, joined(options, protocol))
    check_data_options([resolve(config) for config in configs], settings.data_options)
    data_dirs = data_dirs_of(settings.data_dir if data_dir is None else data_dir, configs)
    check_paths(data_dirs)
    return settings, each, data_dirs


def planned(
    config: str,
    model: ModelInput,
    settings: RunSettings,
    options: Mapping[str, Any],
    data_dirs: Mapping[str, Any],
) -> Plan:
    """One config's run planned before the model loads (rows, languages, resources, first-stage
    probes), with the notice of a limit too small for its headline numbers.
    """
    own = replace(settings, data_dir=data_dirs[config])
    ahead = planning.plan(config, stage_models.model_spec(model, own), own, options)
    limit_for(config, ahead.task, ahead.probes, settings.limit)
    return ahead


def plan_each(
    configs: Sequence[str], plan_one: Callable[[str], T], strict: bool
) -> tuple[dict[str, T], dict[str, str]]:
    """`plan_one(config)` for every config, before any model loads; returns the plans, and {config:
    why} for those whose data cannot be had (`MissingDataError`: skipped, said at once). Any other
    error stops, naming the config, as does missing data under `strict`, in a single config, or in
    every config.
    """
    if len(configs) == 1:  # one config: its own error, as a run gives it
        return {configs[0]: plan_one(configs[0])}, {}
    plans: dict[str, T] = {}
    skipped: dict[str, str] = {}
    for config in configs:
        try:
            plans[config] = plan_one(config)
        except MissingDataError as error:
            if strict:
                raise MissingDataError(f"In the suite's config {config}: {error}") from None
            skipped[config] = str(error)
            warnings.warn(f"{config} skipped: {error}", SkippedConfigWarning, stacklevel=3)
        except CultureProbeError as error:
            raise CultureProbeError(f"In the suite's config {config}: {error}") from None
    if len(skipped) == len(configs):
        reasons = {
            reason: [c for c, r in skipped.items() if r == reason] for reason in skipped.values()
        }
        raise MissingDataError(
            "No config of the suite has its data: "
            + "; ".join(f"{', '.join(c)}: {r.rstrip('.')}" for r, c in reasons.items())
            + "."
        )
    return plans, skipped


def check_paths(data_dirs: Mapping[str, Any]) -> None:
    """A `--data-dir` that does not exist is a mistyped path, an error: a suite skips only data that
    cannot be had.
    """
    for path in dict.fromkeys(p for p in data_dirs.values() if p is not None):
        if not Path(path).exists():
            raise InvalidValueError(f"--data-dir {path} does not exist: check the path.")


def data_dirs_of(
    data_dir: str | os.PathLike | Mapping[str, Any] | None, configs: Sequence[str]
) -> dict[str, Any]:
    """Each config's local data: one folder for all (a suite of one benchmark), or per benchmark
    (`"dlama=dlama-v1/,maps=maps/"` or a mapping, as `culture-probe export` takes it).
    """
    from culture_probe.data.export import parse_data_dirs

    if isinstance(data_dir, str) and "=" in data_dir:
        data_dir = parse_data_dirs(data_dir)
    if not isinstance(data_dir, Mapping):
        return {config: data_dir for config in configs}
    return {config: data_dir.get(resolve(config).info.name) for config in configs}
