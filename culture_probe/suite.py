"""`culture-probe run`, and suites: `culture-probe run dlama fmlama_en camel_co_prompts --model M --out DIR`
runs several configs (or named groups: each benchmark's paper experiments, see `culture-probe list`) on one model
loaded once, into one folder: a run directory per config, and a summary across them (`suite.md`, `suite.json`, a
figure per benchmark).

Every config's options are checked before the model loads. The summary is rewritten after each config finishes,
so a suite stopped half-way keeps what it computed; `--resume` continues it.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from culture_probe import rundir
from culture_probe.data.registry import expand, groups, resolve
from culture_probe.errors import CultureProbeError
from culture_probe.runner import (
    RunResult,
    RunSettings,
    SmallLimitWarning,
    as_model_args,
    check_language,
    is_main_process,
    limit_for,
    load_scorer,
    plan,
    run,
)
from culture_probe.tasks import task_for

# run() keywords that are not protocol options
_RUN_KEYWORDS = {f.name for f in fields(RunSettings)} | {"rows", "progress"}


@dataclass(frozen=True)
class SuiteResult:
    """Every config's run, and the summary across them."""

    runs: dict[str, RunResult]
    summary: dict[str, Any]
    out: Path | None = None


def run_suite(
    names: Sequence[str],
    model: Any,
    *,
    out: str | os.PathLike | None = None,
    resume: bool = False,
    progress: bool = True,
    **keywords: Any,
) -> SuiteResult:
    """Run every config that `names` (configs or groups) name on `model`, loaded once; keywords as `run` takes
    them (settings and protocol options, applied to every config). With `out`, each config's run goes to
    `out/<config>` and the summary to `out/suite.md` and `out/suite.json`.
    """
    configs = expand(list(names))
    data_dirs = data_dirs_of(keywords.pop("data_dir", None), configs)
    settings = RunSettings(
        **{k: v for k, v in keywords.items() if k in _RUN_KEYWORDS - {"rows", "progress", "model_args"}},
        model_args=as_model_args(keywords.get("model_args")),
    )
    options = {k: v for k, v in keywords.items() if k not in _RUN_KEYWORDS}
    for config in configs:  # every config's options and language, before the model loads
        try:
            task_for(config).options_for(settings.protocol, options)
            check_language(config, settings.language, custom_rows=False)
        except CultureProbeError as error:
            raise CultureProbeError(f"In the suite's config {config}: {error}") from None
    folder = Path(out) if out is not None else None
    if folder is not None:
        rundir.check_writable(folder)  # a suite folder is claimed like a run folder: new, empty, or ours
        folder.mkdir(parents=True, exist_ok=True)
        rundir.write_text(folder / rundir.MARKER, "A culture_probe suite folder (one run directory per config).\n")
    from culture_probe.report.summary import SuiteRun, summarize_suite, write_summary

    if isinstance(settings.limit, int):  # a limit too small for a config's headline numbers: said before the model
        for config in configs:
            ahead = plan(config, model, replace(settings, data_dir=data_dirs[config]), options)
            limit_for(config, ahead.task, ahead.probes, settings.limit)
    scorer = load_scorer(model, settings)
    runs: dict[str, RunResult] = {}
    summary: dict[str, Any] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SmallLimitWarning)  # each run's notice was given above
        for config in configs:
            runs[config] = run(
                config,
                model,
                out=folder / config if folder else None,
                resume=resume,
                progress=progress,
                scorer=scorer,
                data_dir=data_dirs[config],
                **keywords,
            )
            summary = summarize_suite(model, {c: SuiteRun(r.config, r.metrics) for c, r in runs.items()})
            if folder is not None:
                write_summary(folder, summary)
    return SuiteResult(runs, summary, folder)


def data_dirs_of(data_dir: str | os.PathLike | Mapping[str, Any] | None, configs: Sequence[str]) -> dict[str, Any]:
    """Each config's local data: one folder for all (a suite of one benchmark), or per benchmark
    (`"dlama=dlama-v1/,maps=maps/"` or a mapping, as `culture-probe export` takes it).
    """
    from culture_probe.data.export import parse_data_dirs

    if isinstance(data_dir, str) and "=" in data_dir:
        data_dir = parse_data_dirs(data_dir)
    if not isinstance(data_dir, Mapping):
        return {config: data_dir for config in configs}
    return {config: data_dir.get(resolve(config)[0].INFO.name) for config in configs}


# ---------------------------------------------------------------- command line

# what a run without --out says, so that nobody looks for files that were never written
NOT_SAVED = "nothing was written (no --out): pass --out DIR to keep metrics.json, items.jsonl and report.md"


def main(args: Any) -> int:
    """`culture-probe run CONFIG... --model M ...` (argparse namespace from culture_probe.cli): one config, or a
    suite when several configs or a group are named.
    """
    options = dict(_split_option(text) for text in args.option)
    keywords = dict(
        out=args.out,
        resume=args.resume,
        language=args.language,
        limit=args.limit,
        batch_tokens=args.batch_tokens,
        seed=args.seed,
        kind=args.kind,
        device=args.device,
        dtype=args.dtype,
        data_dir=args.data_dir,
        corrected=args.corrected,
        revision=args.revision,
        cache_dir=args.cache_dir,
        no_cache=args.no_cache,
        base_url=args.base_url,
        concurrency=args.concurrency,
        model_args=args.model_args,
        protocol=args.protocol,
        **options,
    )
    if len(args.configs) > 1 or args.configs[0] in groups():
        if args.rows:
            raise CultureProbeError("--rows belongs to one config: run a suite without it, or name one config.")
        suite = run_suite(args.configs, args.model, **keywords)
        if is_main_process():
            from culture_probe.report.summary import SUMMARY_MD, summary_lines

            print(summary_lines(suite.summary))
            print(f"wrote {suite.out / SUMMARY_MD}" if suite.out is not None else NOT_SAVED)
        return 0
    config = args.configs[0]
    keywords["data_dir"] = data_dirs_of(keywords["data_dir"], [config])[config]
    result = run(config, args.model, rows=rundir.read_rows(args.rows) if args.rows else None, **keywords)
    if is_main_process():
        from culture_probe.report import headline

        print(headline(result.config, result.metrics))
        print(f"wrote {result.run_dir}" if result.run_dir is not None else NOT_SAVED)
    return 0


def _split_option(text: str) -> tuple[str, str]:
    if "=" not in text:
        raise CultureProbeError(f"--option takes KEY=VALUE, got {text!r} (e.g. --option judge=string).")
    key, value = text.split("=", 1)
    return key.strip(), value.strip()
