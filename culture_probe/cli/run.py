"""`culture-probe run`: the parser only; the run (culture_probe.runner.run_command, with torch) loads on use. The
settings' flags come from culture_probe.settings, which is light.
"""

from __future__ import annotations

import argparse

from culture_probe.cli.shared import EXAMPLES, Subparsers
from culture_probe.settings import TOKENS_PER_SEQUENCE, add_arguments, batch_size

HANDLERS = {"run": "culture_probe.runner.run_command:main"}


def add_parsers(subparsers: Subparsers) -> None:
    """`run CONFIG... --model M`, with lm-evaluation-harness 0.4's spellings beside the native ones."""
    run = subparsers.add_parser(
        "run",
        help="run benchmark configs (or groups) on one model",
        description="Run benchmark configs (or groups) on one model. lm-evaluation-harness 0.4's spellings work too: "
        "--tasks (CONFIG), --model hf --model_args pretrained=NAME (--model-args), --output_path (--out) and "
        "--batch_size N|auto (a --batch-tokens budget).",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_what_to_run(run)
    _add_where_it_goes(run)
    _add_how_to_run(run)


def _add_what_to_run(run: argparse.ArgumentParser) -> None:
    """The configs and the model, each in the native and the harness's spelling."""
    run.add_argument(
        "configs",
        nargs="*",
        metavar="CONFIG",
        help="benchmark configs, e.g. dlama_arab_west, or groups, e.g. dlama (see `culture-probe list`), separated "
        "by spaces or commas; several make a suite: one model load, one run directory per config under --out, and "
        "a summary; a config whose data cannot be had is skipped, saying why (exit code 3)",
    )
    run.add_argument(
        "--tasks",
        action="append",
        default=[],
        metavar="CONFIG,...",
        help="lm-evaluation-harness's spelling of CONFIG (give the configs one way)",
    )
    run.add_argument(
        "--model",
        help="HF id, local dir, or planted:<config> (offline); or name it with --model-args pretrained= (then "
        "lm-evaluation-harness's --model hf is taken as the harness's backend name)",
    )
    run.add_argument(
        "--strict",
        action="store_true",
        help="a suite stops (exit code 2) at the first config whose data cannot be had, instead of skipping it",
    )


def _add_where_it_goes(run: argparse.ArgumentParser) -> None:
    """A dry run's preview, the run directory, and what it continues or reads instead of the benchmark."""
    run.add_argument(
        "--dry-run",
        action="store_true",
        help="load the data and the model's tokenizer only (no weights), print each stage's probe count and the "
        "first --show probes exactly as the model will get them, and write nothing",
    )
    run.add_argument(
        "--show", type=int, metavar="N", help="with --dry-run: probes shown per config (default 3)"
    )
    run.add_argument(
        "--out",
        "--output_path",
        help="run directory (config.json, items.jsonl, metrics.json, report.md, plots); a "
        "suite's folder (a run directory per config, suite.md, suite.json)",
    )
    run.add_argument("--resume", action="store_true", help="continue an interrupted run in --out")
    run.add_argument(
        "--rows",
        help="probe these rows (JSONL, e.g. a run's rows.jsonl) instead of the benchmark's",
    )


def _add_how_to_run(run: argparse.ArgumentParser) -> None:
    """The run's settings (generated from RunSettings' fields), the harness's batch size, and protocol options."""
    add_arguments(run)
    run.add_argument(
        "--batch_size",
        type=batch_size,
        metavar="N|auto",
        help="lm-evaluation-harness's batch size, as a token budget: auto is the engine's own (halved on "
        f"out-of-memory), N is --batch-tokens N x {TOKENS_PER_SEQUENCE} (the engine packs batches by tokens)",
    )
    run.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="protocol option, e.g. --option judge=string (X-FaKT) or --option n_runs=2 (CAMeL) (repeatable); in a "
        "suite it goes to every config that has it, and a prefix gives it to one benchmark's or config's runs only: "
        "xfakt.judge=string, xfakt_in_context.judge=string",
    )
