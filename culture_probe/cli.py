"""The `culture-probe` command line.

Each subcommand's work lives in its own module, imported on use, so `culture-probe list` starts without torch.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import sys
import warnings
from collections.abc import Iterator
from typing import Any

from culture_probe.board.command import add_board_parsers  # light: the site's modules load on use
from culture_probe.settings import TOKENS_PER_SEQUENCE, add_arguments, batch_size

EXAMPLES = """examples:
  culture-probe list
  culture-probe run dlama_arab_west --model bert-base-multilingual-cased --out runs/mbert
  culture-probe run dlama fmlama_en camel_co_prompts --model bert-base-multilingual-cased --out runs/suite
  culture-probe run xfakt_factual_recall --model planted:xfakt_factual_recall --option judge=string --out runs/planted
  culture-probe run camel_co_prompts --model planted:camel_co_prompts --limit smoke --out runs/smoke
  culture-probe run camel_co_prompts,camel_ag_prompts --model-args pretrained=UBC-NLP/ARBERT --limit 0.1 --out runs/a
  culture-probe run fmlama_en --model gpt2 --shard 2/4 --out shards/2   (then: culture-probe merge shards/* --out run)
  culture-probe report runs/mbert
  culture-probe compare runs/mbert runs/xlmr
  culture-probe consistency runs/mbert_en runs/mbert_ar --out runs/consistency
  culture-probe board runs/mbert runs/xlmr runs/suite --out board
  culture-probe push-board my-org/culture-results runs/suite --dry-run --out space
  culture-probe export hub_folder --configs dlama_arab_west camel_entities
  culture-probe push my-org/culture_probe --configs camel_co_prompts camel_entities
  culture-probe push-metrics my-org --dry-run --out metric_spaces
  culture-probe curate dlama --region arab --contrast west --languages ar,en --out my_dlama
"""

# subcommand -> "module:function" that takes the parsed arguments and returns an exit code.
HANDLERS = {
    "list": "culture_probe.data.listing:main",
    "run": "culture_probe.runner.run_command:main",
    "report": "culture_probe.report:main",
    "compare": "culture_probe.report:compare_main",
    "consistency": "culture_probe.report:consistency_main",
    "export": "culture_probe.data.export:main",
    "push": "culture_probe.publish:main",
    "push-metrics": "culture_probe.publish:main",
    "curate": "culture_probe.curation.cli:main",
    "board": "culture_probe.board.command:board_main",
    "push-board": "culture_probe.board.command:push_board_main",
    "merge": "culture_probe.merge:main",
}


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser (all subcommands)."""
    parser = argparse.ArgumentParser(
        prog="culture-probe",
        description="Probe what language models know about cultures.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    parser.add_argument("--debug", action="store_true", help="show the full traceback of any error")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    sub.add_parser("list", help="list every benchmark config")

    run = sub.add_parser(
        "run",
        help="run benchmark configs (or groups) on one model",
        description="Run benchmark configs (or groups) on one model. lm-evaluation-harness 0.4's spellings work too: "
        "--tasks (CONFIG), --model hf --model_args pretrained=NAME (--model-args), --output_path (--out) and "
        "--batch_size N|auto (a --batch-tokens budget).",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
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
    add_arguments(run)  # the settings' flags, generated from RunSettings' fields
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

    report = sub.add_parser("report", help="(re)write report.md and plots of a run directory")
    report.add_argument("run_dir")

    consistency = sub.add_parser(
        "consistency",
        help="two runs of one model in two languages, paired fact by fact: agreement and RankC (docs/consistency.md)",
    )
    consistency.add_argument("run_dirs", nargs=2, metavar="RUN_DIR")
    consistency.add_argument(
        "--out", help="folder for consistency.md (with its heatmap) and consistency.json"
    )
    compare = sub.add_parser(
        "compare",
        help="several runs side by side; runs of one config on the same items "
        "are paired with the first (an interval and a p-value from one test)",
    )
    compare.add_argument("run_dirs", nargs="+")
    compare.add_argument(
        "--out", help="folder for compare.md, compare.json and the plot (PNG and PDF)"
    )
    compare.add_argument(
        "--unpaired",
        action="store_true",
        help="line the runs up without pairing (e.g. runs of one config on different items)",
    )

    export = sub.add_parser("export", help="write Parquet + README `configs:` (Hub layout)")
    export.add_argument("out_dir")
    export.add_argument("--configs", nargs="+", help="configs to export (default: all that load)")
    export.add_argument(
        "--data-dir", help="local data per benchmark, e.g. maps=DIR,dlama=dlama-v1.tar.gz"
    )

    push = sub.add_parser(
        "push",
        help="export and upload the benchmarks as one Hub dataset repository (private "
        "unless --public); load_dataset(REPO_ID, CONFIG) then reads each config",
    )
    push.add_argument("repo_id", metavar="REPO_ID", help="OWNER/NAME of the dataset repository")
    push.add_argument(
        "--configs",
        nargs="+",
        help="configs to push (default: every config that loads and may be redistributed)",
    )
    push.add_argument("--data-dir", help="local data per benchmark, e.g. dlama=my_pair,maps=DIR")
    push.add_argument(
        "--i-have-permission",
        action="store_true",
        help="the data released only on request (MAPS) "
        "may be published: you hold the authors' permission (needs --data-dir with your copy)",
    )
    metrics = sub.add_parser(
        "push-metrics",
        help="publish the metric modules as Hub Spaces OWNER/<metric>, which evaluate.load('OWNER/<metric>') reads",
    )
    metrics.add_argument("owner", metavar="OWNER", help="user or organisation on the Hub")
    metrics.add_argument("--metrics", nargs="+", help="metrics to publish (default: all)")
    for command in (push, metrics):
        command.add_argument(
            "--public", action="store_true", help="make new repositories public (default private)"
        )
        command.add_argument(
            "--dry-run",
            action="store_true",
            help="write the folder and print what would be uploaded; nothing is sent (needs --out)",
        )
        command.add_argument("--out", help="the dry run's folder")
    add_board_parsers(sub)
    add_merge_parser(sub)

    curate = sub.add_parser(
        "curate", help="build a DLAMA/FmLAMA-style fact set from a SPARQL endpoint"
    )
    curate.add_argument("framework", choices=["dlama", "fmlama"])
    curate.add_argument(
        "--region", required=True, help="region name or comma-separated country QIDs"
    )
    curate.add_argument("--contrast", help="dlama: the contrasting region (default west)")
    curate.add_argument("--languages", required=True, help="label languages, e.g. ar,en")
    curate.add_argument(
        "--predicates", help="dlama: comma-separated predicate ids (default: all 20)"
    )
    curate.add_argument("--endpoint", help="SPARQL URL, or a .nt/.ttl dump for the embedded store")
    curate.add_argument(
        "--top", type=int, help="dlama: subjects kept per predicate and region (default 1000)"
    )
    curate.add_argument("--out", required=True)
    curate.add_argument(
        "--sites", help="Wikipedia sites of a NAME=QID,... region's countries (default en)"
    )
    curate.add_argument(
        "--sizes",
        choices=["auto", "store", "mediawiki"],
        help="dlama: article sizes from the SPARQL store (offline) or the MediaWiki API (default auto)",
    )
    curate.add_argument("--chunk-size", type=int, default=50, help="entities per VALUES list")
    curate.add_argument(
        "--object-filters",
        action="store_true",
        help="dlama: drop non-sovereign/historical countries, lost cities, 'voice' and sign languages "
        "from the objects (culture_probe's option; upstream and the release have no such filter)",
    )
    curate.add_argument(
        "--checkpoints", help="checkpoint folder (default OUT/.checkpoints); rerun to resume"
    )
    curate.add_argument(
        "--min-interval", type=float, help="seconds between HTTP requests (default 1)"
    )
    curate.add_argument(
        "--timeout", type=float, help="seconds before an HTTP request times out (default 60)"
    )
    curate.add_argument("--retries", type=int, help="retries on 429/5xx/timeouts (default 5)")
    curate.add_argument(
        "--max-retry-after",
        type=float,
        help="longest Retry-After to wait, in seconds (default 120): "
        "a server asking for longer ends the step with an error; rerun later to resume",
    )
    curate.add_argument(
        "--allow-empty",
        action="store_true",
        help="accept a predicate (dlama) or language (fmlama) with no facts instead of an error",
    )
    curate.add_argument(
        "--user-agent", help="HTTP User-Agent (default names culture_probe and its purpose)"
    )
    return parser


def add_merge_parser(subparsers: Any) -> None:
    """`merge`: the N shards of a run or suite (`run ... --shard K/N`) joined into the one-process run."""
    merge = subparsers.add_parser(
        "merge",
        help="join the folders of a run's (or suite's) N shards, made with run --shard K/N, into one run (or suite) "
        "equal to the one-process run",
    )
    merge.add_argument(
        "shards", nargs="+", metavar="SHARD_DIR", help="the N shard folders, each once"
    )
    merge.add_argument(
        "--out", required=True, help="the merged run's (or suite's) folder: new or empty"
    )


def _version() -> str:
    from culture_probe.version import __version__

    return __version__


@contextlib.contextmanager
def _library_warnings_as_lines() -> Iterator[None]:
    """The library's own warnings (a smoke-limit notice, a cut context) as one line each on the terminal, as its
    errors are; other packages' warnings keep Python's format, with the place that raised them.
    """
    plain = warnings.formatwarning

    def formatted(
        message: Warning | str, category: type[Warning], *args: Any, **kwargs: Any
    ) -> str:
        if category.__module__.startswith("culture_probe"):
            return f"culture-probe: warning: {message}\n"
        return plain(message, category, *args, **kwargs)

    warnings.formatwarning = formatted
    try:
        yield
    finally:
        warnings.formatwarning = plain


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `culture-probe` console script: an expected failure (bad input, a missing or damaged file,
    a closed pipe) is one line naming what and how to fix it, exit code 2; anything else keeps its traceback and
    says where to report it. `--debug` shows the traceback of every error.
    """
    args = build_parser().parse_args(argv)
    module_name, function = HANDLERS[args.command].split(":")
    try:
        handler = getattr(importlib.import_module(module_name), function)
        with _library_warnings_as_lines():
            return int(handler(args) or 0)
    except BrokenPipeError:  # `culture-probe list | head -1`: the reader left; nothing to say
        _silence_stdout()
        return 0
    except KeyboardInterrupt:
        print(
            "culture-probe: interrupted; a run continues with the same command and --resume",
            file=sys.stderr,
        )
        return 130
    except Exception as error:  # noqa: BLE001 - every error ends here, as one line or with its traceback
        message = expected_failure(error)
        if args.debug or message is None:
            import traceback

            traceback.print_exc()
            if message is None:
                print(
                    f"culture-probe {_version()}: unexpected error, a bug. Please report it to the maintainers with "
                    "the command and this traceback.",
                    file=sys.stderr,
                )
                return 1
        print(f"culture-probe: error: {message}", file=sys.stderr)
        return 2


def expected_failure(error: BaseException) -> str | None:
    """The one line that explains an expected failure, or None for an unexpected one (a bug)."""
    import errno
    import json
    import pickle
    import sqlite3

    from culture_probe.errors import CultureProbeError

    if isinstance(error, CultureProbeError):
        return str(error)
    if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT):
        where = error.filename or "the files it was writing (--debug shows which)"
        needed = getattr(error, "needed", None)
        more = (
            f"; the rest of the run's records need about {needed / 1e6:,.1f} MB more"
            if needed
            else ""
        )
        after = getattr(error, "then", None) or "a run continues with --resume"
        return (
            f"no space left on the device holding {where} ({_free_space(error.filename)}{more}): free some space "
            f"there, or write elsewhere (another --out or --cache-dir); {after}"
        )
    if isinstance(error, OSError) and error.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        where = error.filename or "a file it was writing (--debug shows which)"
        unreadable = "" if error.errno == errno.EROFS else " or not readable for this user"
        return (
            f"{where} is read-only{unreadable} ({error.strerror}): change its permissions, or pass another folder "
            "(--out, --cache-dir)"
        )
    if isinstance(
        error,
        (
            FileNotFoundError,
            IsADirectoryError,
            NotADirectoryError,
            PermissionError,
            FileExistsError,
        ),
    ):
        return f"{error.strerror}: {error.filename} (check the path)"
    if isinstance(error, UnicodeDecodeError):
        return f"a file is not UTF-8 text ({error.reason}); save it as UTF-8"
    if isinstance(error, json.JSONDecodeError):
        return f"invalid JSON ({error.msg}, line {error.lineno}); the file is damaged"
    if isinstance(error, sqlite3.DatabaseError):
        return f"a database file is damaged or locked ({error}); delete the score cache (--cache-dir) or retry"
    # torch's is a RuntimeError
    if isinstance(error, MemoryError) or type(error).__name__ == "OutOfMemoryError":
        return "out of memory: lower --batch-tokens, or use a smaller dtype (--dtype bfloat16)"
    # torch's weights_only load refused code in a weights file
    if isinstance(error, pickle.UnpicklingError):
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        return (
            f"a weights file is a pickle that torch will not load safely ({first}); nothing in it was run: use a "
            "safetensors checkpoint of the model"
        )
    return None


def _free_space(path: str | None) -> str:
    """What is left on the device holding `path` (its nearest existing folder), for a full-disk error."""
    import shutil
    from pathlib import Path

    place = Path(path or "").absolute()
    folder = next((p for p in (place, *place.parents) if p.is_dir()), None) if path else None
    if folder is None:
        return "its free space unknown"
    return f"{shutil.disk_usage(folder).free / 1e6:,.1f} MB free"


def _silence_stdout() -> None:
    """After a closed pipe, point stdout at /dev/null so that the interpreter's final flush does not fail too."""
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


if __name__ == "__main__":
    sys.exit(main())
