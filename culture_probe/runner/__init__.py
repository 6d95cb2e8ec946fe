"""`culture_probe.run(config, model, **options)` and `culture-probe run`: one benchmark config on
one model.

The run layer, one module per job: `api` (`run`, `run_with`: the order of a run), `planning` (what a
run decides before its model loads), `stage_models` (the run's model and each stage's own, read
without weights), `config_json` (what config.json records) and `execution` (asking the model, chunk
by chunk, stage by stage).

One pipeline, in one direction (`api` is the only module that knows the order): resolve the config
and options -> validate them -> load rows and the task's declared resources -> build the first
stage's probes -> load the model -> engine, stage by stage -> typed records -> metrics -> report. A
bad option, language or limit fails before any data or model is loaded; a bad template or resource
before the model is loaded, which is also when a `limit` too small for the benchmark's headline
numbers says what the run will lack (`limit="smoke"` picks the smallest that has them all:
`Task.smoke_limit`). A model a stage cannot use (no chat template where the protocol asks through
one, a kind it cannot ask, a judge that cannot be found) is refused then too, from configs and
tokenizers (`check_models`), before any folder is made; a stage's own model (an LLM judge) is
resolved there, with the memory its weights take. The run directory (`culture_probe.rundir`) makes
an interrupted run resumable: probes already in items.jsonl are skipped, a later stage whose options
changed (another judge) is asked again, and the engine cache makes a half-finished batch cheap.
Under `accelerate launch --num_processes N -m culture_probe run ...` every process runs this same
code; the engine shards each batch of requests and gathers the results in request order, and only
rank 0 writes files.
"""

from culture_probe.runner.api import RunResult, run, run_with
from culture_probe.runner.planning import SmallLimitWarning
from culture_probe.settings import RunSettings  # the run's settings, as `run` and the CLI take them

# the run layer's public API; its modules' own names are imported from them
# (`culture_probe.runner.stage_models`)
__all__ = ["RunResult", "run", "run_with", "RunSettings", "SmallLimitWarning"]
