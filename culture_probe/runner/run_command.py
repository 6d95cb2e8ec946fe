"""`culture-probe run CONFIG... --model M ...`: the command line of `culture_probe.run` (one
config), `run_suite` (several, or a group) and `dry_run` (`--dry-run`), with lm-evaluation-harness's
spellings (configs separated by commas, `--model-args pretrained=NAME`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from culture_probe import rundir
from culture_probe.data.registry import expand, groups
from culture_probe.errors import CultureProbeError, InvalidValueError
from culture_probe.runner.api import run
from culture_probe.runner.execution import is_main_process
from culture_probe.runner.suite import SKIPPED_EXIT, data_dirs_of, run_suite
from culture_probe.settings import TOKENS_PER_SEQUENCE, from_arguments
from culture_probe.util.keyvalue import parse_pairs

# lm-evaluation-harness's `--model` names a backend: its in-process ones are this library's own way,
# its served ones are `openai:NAME` here.
HARNESS_BACKENDS = ("hf", "hf-auto", "huggingface")
SERVED_BACKENDS = (
    "vllm",
    "local-completions",
    "local-chat-completions",
    "openai-completions",
    "openai-chat-completions",
)

# what a run without --out says, so that nobody looks for files that were never written
NOT_SAVED = (
    "nothing was written (no --out): pass --out DIR to keep metrics.json, items.jsonl and report.md"
)


def main(args: Any) -> int:
    """`culture-probe run CONFIG... --model M ...` (argparse namespace from culture_probe.cli): one
    config, or a suite when several configs or a group are named; exit code 3 (`SKIPPED_EXIT`) when
    a suite skipped configs.
    """
    names, configs, model, keywords = planned(args)
    if args.show is not None and not args.dry_run:
        raise InvalidValueError(
            "--show N sets how many probes --dry-run shows: add --dry-run, or drop --show."
        )
    if args.dry_run:
        return _dry_run(args, configs, model, keywords)
    if len(configs) > 1 or set(names) & set(groups()):
        if args.rows:
            raise CultureProbeError(
                "--rows belongs to one config: run a suite without it, or name one config."
            )
        suite = run_suite(configs, model, strict=args.strict, **keywords)
        if is_main_process():
            from culture_probe.report.summary import SUMMARY_MD, summary_lines

            print(summary_lines(suite.summary))
            print(f"wrote {suite.out / SUMMARY_MD}" if suite.out is not None else NOT_SAVED)
        return SKIPPED_EXIT if suite.skipped else 0
    config = configs[0]
    keywords["data_dir"] = data_dirs_of(keywords["data_dir"], [config])[config]
    result = run(config, model, rows=rundir.read_rows(args.rows) if args.rows else None, **keywords)
    if is_main_process():
        from culture_probe.report import headline

        print(headline(result.config, result.metrics))
        print(f"wrote {result.run_dir}" if result.run_dir is not None else NOT_SAVED)
    return 0


def planned(args: Any) -> tuple[list[str], list[str], str, dict[str, Any]]:
    """What the command line asks for, whichever spellings it used: the names given, the configs
    they expand to, the model, and the keywords of `run`/`run_suite`.
    """
    options = option_values(args.option)
    model, model_args = model_of(args.model, args.model_args)
    names = config_names(configs_given(args.configs, args.tasks))
    configs = expand(names)  # an unknown name fails here, with the close ones
    keywords = {
        **from_arguments(args),
        "model_args": model_args,
        "out": args.out,
        "resume": args.resume,
    }
    keywords["options"] = options  # each config takes those it has, or those its prefix names
    keywords["data_options"] = parse_pairs(
        args.data_option, what="--data-option", example="verify_counts=false"
    )
    keywords["batch_tokens"] = batch_tokens_of(args.batch_tokens, args.batch_size)
    return names, configs, model, keywords


def _dry_run(args: Any, configs: list[str], model: str, keywords: dict[str, Any]) -> int:
    """`run ... --dry-run`: what the run would ask (with --resume: what is left), printed; nothing
    written.
    """
    from culture_probe.runner.dryrun import SHOWN, dry_run

    rows = rundir.read_rows(args.rows) if args.rows else None
    shown = dry_run(
        configs,
        model,
        n=SHOWN if args.show is None else args.show,
        rows=rows,
        strict=args.strict,
        **keywords,
    )
    print(shown.text())
    return SKIPPED_EXIT if shown.skipped else 0


def configs_given(configs: Sequence[str], tasks: Sequence[str]) -> list[str]:
    """The CONFIG arguments, or lm-evaluation-harness's `--tasks`: one of the two."""
    if configs and tasks:
        raise InvalidValueError(
            "The configs are named twice (CONFIG and --tasks): give them one way."
        )
    return [*configs, *tasks]


def batch_tokens_of(batch_tokens: int | None, batch_size: int | str | None) -> int | None:
    """`--batch-tokens`, or lm-evaluation-harness's `--batch_size` N as a budget of N x
    TOKENS_PER_SEQUENCE tokens ("auto": the engine's own).
    """
    if batch_size is None:
        return batch_tokens
    if batch_tokens is not None:
        raise InvalidValueError("--batch-tokens and --batch_size both set the batch: give one.")
    return None if batch_size == "auto" else int(batch_size) * TOKENS_PER_SEQUENCE


def config_names(words: Sequence[str]) -> list[str]:
    """The CONFIG arguments as lm-evaluation-harness takes its tasks: separated by spaces, commas,
    or both.
    """
    names = [name.strip() for word in words for name in word.split(",") if name.strip()]
    if not names:
        raise InvalidValueError(
            "Name a benchmark config or group, e.g. camel_co_prompts or dlama (`culture-probe list`)."
        )
    return names


def model_of(model: str | None, model_args: str | None) -> tuple[str, str | None]:
    """The model named by `--model` or by `--model-args pretrained=NAME` (lm-evaluation-harness's
    spelling), and the `--model-args` left without `pretrained`, which names the model and is no
    load option.
    """
    pairs = parse_pairs(model_args, what="--model-args", example="pretrained=NAME,dtype=bfloat16")
    pretrained = pairs.pop("pretrained", None)
    if model in SERVED_BACKENDS:
        raise InvalidValueError(
            f"--model {model} is lm-evaluation-harness's backend for a served model; here it is "
            "--model openai:NAME --base-url http://HOST:PORT/v1."
        )
    if model in HARNESS_BACKENDS and pretrained is not None:
        # `--model hf --model_args pretrained=NAME`: the harness's backend name, the model in
        # pretrained
        model = None
    if model is None and pretrained is None:
        raise InvalidValueError("Name the model: --model NAME, or --model-args pretrained=NAME,...")
    if model is not None and pretrained is not None and model != pretrained:
        raise InvalidValueError(
            f"Two models are named ({model}, {pretrained}): give one, with --model or --model-args pretrained=NAME "
            "(--model is the model itself here, not a harness backend such as hf)."
        )
    rest = ",".join(f"{key}={value}" for key, value in pairs.items())
    return str(model or pretrained), rest or None


def option_values(texts: Sequence[str]) -> dict[str, str]:
    """The `--option KEY=VALUE` arguments as a dict (KEY may be prefixed, `xfakt.judge`: see
    `tasks.routing.options_per_config`); a key given twice is an error naming both values.
    """
    return parse_pairs(texts, what="--option", example="judge=string")
