"""`culture_probe.run(config, model, **options)` and `culture-probe run`: one benchmark config on one model.

The run layer, one module per job: `api` (`run`, `run_with`: the order of a run), `planning` (what a run decides
before its model loads), `stage_models` (the run's model and each stage's own, read without weights),
`config_json` (what config.json records) and `execution` (asking the model, chunk by chunk, stage by stage).

One pipeline, in one direction (`api` is the only module that knows the order):
resolve the config and options -> validate them -> load rows and the task's declared resources -> build the first
stage's probes -> load the model -> engine, stage by stage -> typed records -> metrics -> report.
A bad option, language or limit fails before any data or model is loaded; a bad template or resource before the
model is loaded, which is also when a `limit` too small for the benchmark's headline numbers says what the run will
lack (`limit="smoke"` picks the smallest that has them all: `Task.smoke_limit`). A model a stage cannot use (no chat
template where the protocol asks through one, a kind it cannot ask, a judge that cannot be found) is refused then
too, from configs and tokenizers (`check_models`), before any folder is made; a stage's own model (an LLM judge) is
resolved there, with the memory its weights take. The run directory (`culture_probe.rundir`) makes an interrupted
run resumable: probes already in items.jsonl are skipped, a later stage whose options changed (another judge) is
asked again, and the engine cache makes a half-finished batch cheap. Under
`accelerate launch --num_processes N -m culture_probe run ...` every process runs this same code; the engine shards
each batch of requests and gathers the results in request order, and only rank 0 writes files.
"""

from culture_probe.runner.api import (
    RunResult,
    finish,
    open_folder,
    planted_split,
    run,
    run_metrics,
    run_with,
    space_needed,
)
from culture_probe.runner.config_json import (
    describe_plan,
    describe_run,
    git_revision,
    hardware,
    planted_of,
    rows_digest,
    subset_of,
    versions,
)
from culture_probe.runner.execution import (
    ASK,
    CHUNK,
    counts_cuts,
    cut_so_far,
    execute,
    is_main_process,
)
from culture_probe.runner.planning import (
    Plan,
    SmallLimitWarning,
    check_custom_rows,
    check_language,
    custom_rows_read,
    first_asked,
    first_probes,
    known_of,
    limit_for,
    plan,
)
from culture_probe.runner.stage_models import (
    StageModel,
    StageModelNotice,
    check_models,
    load_options,
    load_scorer,
    model_kind,
    model_label,
    model_parts,
    resolve_stage_model,
    stage_settings,
    tokenizer_of,
)
from culture_probe.settings import RunSettings  # the run's settings, as `run` and the CLI take them

__all__ = [
    "RunResult",
    "run",
    "run_with",
    "planted_split",
    "run_metrics",
    "space_needed",
    "open_folder",
    "finish",
    "SmallLimitWarning",
    "Plan",
    "plan",
    "limit_for",
    "first_probes",
    "first_asked",
    "known_of",
    "custom_rows_read",
    "check_custom_rows",
    "check_language",
    "load_options",
    "model_kind",
    "load_scorer",
    "StageModelNotice",
    "StageModel",
    "check_models",
    "resolve_stage_model",
    "tokenizer_of",
    "model_parts",
    "model_label",
    "stage_settings",
    "describe_plan",
    "describe_run",
    "planted_of",
    "subset_of",
    "rows_digest",
    "versions",
    "git_revision",
    "hardware",
    "CHUNK",
    "is_main_process",
    "execute",
    "counts_cuts",
    "cut_so_far",
    "ASK",
    "RunSettings",
]
