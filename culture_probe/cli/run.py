"""`culture-probe run`: the parser only; the run (culture_probe.runner.run_command, with torch)
loads on use. The settings' flags come from culture_probe.settings, which is light.
"""

from __future__ import annotations

import argparse

from culture_probe.cli.shared import EXAMPLES, Subparsers
from culture_probe.settings import TOKENS_PER_SEQUENCE, add_arguments, batch_size
from culture_probe.util.arguments import whole_number

HANDLERS = {"run": "culture_probe.runner.run_command:main"}

# lm-evaluation-harness 0.4's `lm_eval` flags that `run` has no spelling of, each with what this
# library does instead (its own spellings of --tasks, --model_args, --output_path and --batch_size
# are the run flags' aliases)
HARNESS_ONLY = {
    "--log_samples": "every run writes each probe's record (prompt, candidates, scores, answer) to items.jsonl in "
    "--out DIR: nothing to switch on",
    "--predict_only": "a run always writes its outputs (items.jsonl) and its metrics; `culture-probe report DIR` "
    "recomputes the metrics from the outputs",
    "--num_fewshot": "each benchmark's prompts are its paper's, zero- or few-shot as the paper asked; where a "
    "benchmark has a shot count it is a protocol option (e.g. --option n_shot=3 for MAPS; `culture-probe list` "
    "names each config's options)",
    "--apply_chat_template": "a probe that a chat model answers applies the tokenizer's chat template itself (DLAMA "
    "and FmLAMA --option mode=generate, X-FaKT); the cloze probes score raw text, as their papers did; --dry-run "
    "shows each prompt as the model gets it",
    "--system_instruction": "a chat probe's system turn is its protocol's (DLAMA's generate mode, X-FaKT's judge), as "
    "its paper wrote it; --dry-run shows it",
    "--fewshot_as_multiturn": "few-shot examples are part of the paper's prompt here, never chat turns",
    "--gen_kwargs": "generation settings are the protocol's options (e.g. --option mem_max_new_tokens=64 for MAPS); "
    "`culture-probe list` names them",
    "--use_cache": "the score cache is on by default, per model in --cache-dir DIR (--no-cache turns it off)",
    "--cache_requests": "requests are built afresh each run, and scores are cached (--cache-dir)",
    "--write_out": "--dry-run prints the first probes exactly as the model gets them (--show N of them)",
    "--show_config": "config.json in --out records every setting; --dry-run prints the plan before a run",
    "--include_path": "benchmarks of your own are Python packages (docs/adding-a-benchmark.md), not YAML folders",
    "--verbosity": "there are no log levels: an error is one line, and --debug (before run) shows its traceback",
    "--wandb_args": "no tracker integration: the run directory is the record; `culture-probe board` and "
    "`culture-probe push-board` publish results",
    "--wandb_config_args": "no tracker integration: config.json in --out records every setting",
    "--hf_hub_log_args": "`culture-probe push-board ORG/SPACE RUN_DIR` publishes results on the Hub",
    "--max_batch_size": "--batch-tokens T is the batch budget in tokens, halved on out-of-memory",
    "--trust_remote_code": "it is a model argument here: --model-args trust_remote_code=True (the data loaders run "
    "no remote code)",
    "--confirm_run_unsafe_code": "no benchmark here runs generated code",
    "--metadata": "protocol options are --option KEY=VALUE, data options --data-option KEY=VALUE",
    "--samples": "--rows FILE probes the rows of a JSONL file (e.g. some of a run's rows.jsonl)",
    "--check_integrity": "the library's tests (pytest tests/) check the protocols; a run has nothing to check",
}
# the harness's short flags: their long spelling, which is this library's too (or one HARNESS_ONLY
# explains)
HARNESS_SHORT = {
    "-m": "--model",
    "-t": "--tasks",
    "-a": "--model_args",
    "-b": "--batch_size",
    "-o": "--output_path",
}
HARNESS_SHORT |= {"-L": "--limit", "-f": "--num_fewshot", "-c": "--use_cache", "-w": "--write_out"}
HARNESS_SHORT |= {
    "-s": "--log_samples",
    "-v": "--verbosity",
    "-x": "--predict_only",
    "-E": "--samples",
}


def harness_pointer(word: str) -> str | None:
    """The line that answers an lm-evaluation-harness flag `run` does not take (`--log_samples`, `-f
    5`), naming what this library does instead; None for any other word.
    """
    flag = word.split("=", 1)[0]
    if flag in HARNESS_SHORT:
        long = HARNESS_SHORT[flag]
        if long not in HARNESS_ONLY:
            return f"{flag} is lm-evaluation-harness's short {long}: spell it {long}"
        flag = long
    if flag not in HARNESS_ONLY:
        return None
    return f"{flag} is lm-evaluation-harness's flag, which culture-probe run does not take: {HARNESS_ONLY[flag]}"


def add_parsers(subparsers: Subparsers) -> None:
    """`run CONFIG... --model M`, with lm-evaluation-harness 0.4's spellings beside the native
    ones.
    """
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
    """A dry run's preview, the run directory, and what it continues or reads instead of the
    benchmark.
    """
    run.add_argument(
        "--dry-run",
        action="store_true",
        help="load the data and the model's tokenizer only (no weights), print each stage's probe count and the "
        "first --show probes exactly as the model will get them, and write nothing",
    )
    run.add_argument(
        "--show",
        type=whole_number,
        metavar="N",
        help="with --dry-run: probes shown per config (default 3)",
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
    """The run's settings (generated from RunSettings' fields), the harness's batch size, and
    protocol options.
    """
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
    run.add_argument(
        "--data-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="option of the benchmark's data, as load_benchmark takes it (repeatable), e.g. --data-option "
        "verify_counts=false, --data-option pair=maghreb_west or --data-option languages=ar,en (DLAMA); a prefix "
        "gives it to one benchmark's or config's data only, as --option's does: dlama_asia_west.languages=en",
    )
