"""The reliability cases: what a careless or unlucky user does, and what they get. `test_cli_cases.py` runs the
`CLI_CASES`; `OTHER_CASES` name the tests elsewhere that hold the fault cases (killed runs, damaged caches,
concurrent writers, a faulty SPARQL endpoint). docs/reliability.md lists them all, and a test checks that it does.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class CliCase:
    """One command with bad input: `argv` with {model} {data} {run} {file} {folder} {tmp} filled in after `setup`
    (a name in test_cli_cases.SETUPS) prepared {tmp}; it must exit with `code` and print `says` (a regex) on stderr.
    """

    id: str
    action: str
    outcome: str
    argv: tuple[str, ...]
    says: str
    code: int = 2
    setup: str = ""
    unchanged: tuple[str, ...] = field(default=())  # files (relative to {tmp}) that must not change


RUN = ("run", "dlama_arab_west", "--model", "{model}", "--data-dir", "{data}")

CLI_CASES: tuple[CliCase, ...] = (
    # --- names and values, refused before anything loads
    CliCase("unknown-config", "`run` a config that does not exist", "one line naming it and the closest configs",
            ("run", "dlama_arab_wst", "--model", "{model}"),
            "Unknown benchmark config 'dlama_arab_wst'. Did you mean 'dlama_arab_west'"),
    CliCase("unknown-group", "name a group that does not exist in a suite", "one line naming it",
            ("run", "dlam", "fmlama_en", "--model", "{model}"), "Unknown benchmark config or group 'dlam'"),
    CliCase("limit-zero", "`--limit 0`", "refused before data or model load", (*RUN, "--limit", "0"),
            "limit must be a whole number >= 1, got 0"),
    CliCase("limit-negative", "`--limit -3`", "refused before data or model load", (*RUN, "--limit", "-3"),
            "limit must be a whole number >= 1, got -3"),
    CliCase("batch-tokens-zero", "`--batch-tokens 0`", "refused, never coerced", (*RUN, "--batch-tokens", "0"),
            "batch_tokens must be a whole number >= 1, got 0"),
    CliCase("batch-tokens-negative", "`--batch-tokens -64`", "refused, never coerced",
            (*RUN, "--batch-tokens", "-64"), "batch_tokens must be a whole number >= 1"),
    CliCase("concurrency-zero", "`--concurrency 0`", "refused", (*RUN, "--concurrency", "0"),
            "concurrency must be a whole number >= 1"),
    CliCase("limit-not-a-number", "`--limit ten`", "argparse's one line, exit 2", (*RUN, "--limit", "ten"),
            "invalid int value: 'ten'"),
    CliCase("bad-kind", "`--kind banana`", "argparse's one line naming the kinds", (*RUN, "--kind", "banana"),
            "invalid choice: 'banana'"),
    CliCase("bad-dtype", "`--dtype float17`", "one line naming the dtypes to use", (*RUN, "--dtype", "float17"),
            "dtype 'float17' is not a torch dtype"),
    CliCase("bad-dtype-model-args", "`--model-args dtype=float17`", "the same, from --model-args",
            (*RUN, "--model-args", "dtype=float17"), "dtype 'float17' is not a torch dtype"),
    CliCase("model-args-no-equals", "`--model-args trust_remote_code`", "one line with an example",
            (*RUN, "--model-args", "trust_remote_code"), "--model-args takes key=value pairs"),
    CliCase("model-args-unknown", "`--model-args colour=red`", "one line listing the valid keys",
            (*RUN, "--model-args", "colour=red"), "Unknown model argument 'colour'"),
    CliCase("dtype-twice", "`--dtype float16 --model-args dtype=bfloat16`", "refused: give it once",
            (*RUN, "--dtype", "float16", "--model-args", "dtype=bfloat16"), "disagree: give it once"),
    CliCase("device-without-cuda", "`--device cuda:0` on a machine without CUDA", "one line, before loading",
            (*RUN, "--device", "cuda:0"), "sees no cuda device"),
    CliCase("device-nonsense", "`--device gpu7`", "one line with examples", (*RUN, "--device", "gpu7"),
            "'gpu7' is not a torch device"),
    CliCase("option-without-equals", "`--option with_country`", "one line with an example",
            (*RUN, "--option", "score"), "--option takes KEY=VALUE"),
    CliCase("option-unknown", "`--option colour=red`", "one line listing the protocol's options",
            (*RUN, "--option", "colour=red"), "Unknown option 'colour'"),
    CliCase("option-bad-value", "`--option score=median`", "one line naming the valid values",
            (*RUN, "--option", "score=median"), "median"),
    CliCase("language-unknown", "`--language xx` for a config in ar and en", "one line naming ar and en",
            (*RUN, "--language", "xx"), "Unknown language 'xx'"),
    CliCase("suite-option-one-config-lacks", "a suite with an option one config does not have",
            "refused before the model loads, naming that config",
            ("run", "camel_co_prompts", "dlama_arab_west", "--model", "{model}", "--option", "tie_value=0.5"),
            "In the suite's config dlama_arab_west: Unknown option 'tie_value'"),
    CliCase("suite-with-rows", "`--rows` with a suite", "refused: rows belong to one config",
            ("run", "dlama", "--model", "{model}", "--rows", "{file}"), "--rows belongs to one config"),
    # --- models
    CliCase("model-path-missing", "`--model ./no/such/folder`", "one line: the path does not exist",
            ("run", "dlama_arab_west", "--model", "{tmp}/no/such/folder", "--data-dir", "{data}"),
            "Model path .* does not exist"),
    CliCase("kind-the-model-cannot-be", "`--kind masked` on a GPT-2", "one line naming the model's own kind",
            (*RUN, "--kind", "masked"), "cannot load as masked .* its own kind is causal"),
    CliCase("served-without-url", "`--model openai:llama` without `--base-url`", "one line with an example URL",
            ("run", "dlama_arab_west", "--model", "openai:llama", "--data-dir", "{data}"),
            "pass the server's --base-url"),
    # --- custom rows
    CliCase("rows-missing-file", "`--rows rows.jsonl` that does not exist", "one line naming the file",
            (*RUN, "--rows", "{tmp}/rows.jsonl"), "no such file"),
    CliCase("rows-empty", "`--rows` of an empty file", "one line: it holds no rows",
            (*RUN, "--rows", "{tmp}/empty.jsonl"), "holds no rows", setup="empty_rows"),
    CliCase("rows-not-utf8", "`--rows` of a file that is not UTF-8", "one line naming file and line",
            (*RUN, "--rows", "{tmp}/latin1.jsonl"), r"latin1.jsonl:1: not UTF-8 text", setup="latin1_rows"),
    CliCase("rows-bad-json", "`--rows` with a line that is not JSON", "one line naming file and line",
            (*RUN, "--rows", "{tmp}/broken.jsonl"), r"broken.jsonl:2: invalid JSON", setup="broken_rows"),
    CliCase("rows-wrong-columns", "`--rows` of another benchmark's rows", "one line naming the missing column",
            (*RUN, "--rows", "{tmp}/wrong.jsonl"), "The custom rows lack the column", setup="wrong_rows"),
    # --- run folders
    CliCase("out-is-a-file", "`--out` a file", "refused, the file untouched", (*RUN, "--out", "{tmp}/notes.txt"),
            "is a file", setup="a_file", unchanged=("notes.txt",)),
    CliCase("out-under-a-file", "`--out notes.txt/run`", "refused before any data loads",
            (*RUN, "--out", "{tmp}/notes.txt/run"), "lies under .*notes.txt, which is a file", setup="a_file"),
    CliCase("out-someones-folder", "`--out` a model folder", "refused, nothing written into it",
            (*RUN, "--out", "{tmp}/model"), "is not empty and is not a culture_probe run", setup="model_folder",
            unchanged=("model/config.json",)),
    CliCase("out-existing-run", "the same `--out` again without `--resume`", "refused, with the fix",
            (*RUN, "--out", "{tmp}/run"), "already holds a run. Pass --resume", setup="finished_run",
            unchanged=("run/items.jsonl",)),
    CliCase("resume-other-settings", "`--resume` with another model or other options", "refused, naming the "
            "first difference", (*RUN, "--out", "{tmp}/run", "--resume", "--option", "score=sum"),
            "Cannot resume .* was .* and is now",
            setup="finished_run", unchanged=("run/items.jsonl",)),
    CliCase("records-without-config", "a run folder whose config.json was deleted", "refused, records kept",
            (*RUN, "--out", "{tmp}/run"), "but no config.json", setup="run_without_config",
            unchanged=("run/items.jsonl",)),
    CliCase("second-writer", "a second `run` into a folder another process is writing", "fails at once",
            (*RUN, "--out", "{tmp}/run", "--resume"), "Another process is writing the run", setup="locked_run"),
    # --- reading runs back
    CliCase("report-not-a-run", "`report` on a folder that is no run", "one line: pass a run's --out",
            ("report", "{tmp}"), "is not a run directory"),
    CliCase("report-truncated-metrics", "`report` on a run whose metrics.json was cut short",
            "one line naming the file", ("report", "{tmp}/run"), r"metrics.json is not valid JSON",
            setup="truncated_metrics"),
    CliCase("report-truncated-config", "`report` on a run whose config.json was cut short",
            "one line naming the file", ("report", "{tmp}/run"), r"config.json is not valid JSON",
            setup="truncated_config"),
    CliCase("report-damaged-items", "`report` on a run with a damaged line inside items.jsonl",
            "one line naming file and line", ("report", "{tmp}/run"), r"items.jsonl:1 is not valid JSON",
            setup="damaged_items"),
    CliCase("compare-one-run", "`compare` with one run", "one line: two are needed", ("compare", "{tmp}/run"),
            "at least two run directories", setup="finished_run"),
    CliCase("compare-different-items", "`compare` of runs on different items", "refused, `--unpaired` suggested",
            ("compare", "{tmp}/run", "{tmp}/subset"), "probed different units.*--unpaired", setup="two_runs"),
    # --- export and list
    CliCase("export-onto-a-file", "`export` onto a file", "refused, the file untouched",
            ("export", "{tmp}/notes.txt", "--configs", "camel_co_prompts"), "Cannot export into", setup="a_file",
            unchanged=("notes.txt",)),
    CliCase("export-unknown-config", "`export --configs` a config that does not exist", "one line naming it",
            ("export", "{tmp}/hub", "--configs", "camel_co_prompt"), "Unknown benchmark config 'camel_co_prompt'"),
    CliCase("version", "`--version`", "the version, exit 0", ("--version",), "", code=0),
    # --- curation
    CliCase("curate-without-endpoint", "`curate` without `--endpoint`", "one line with an example",
            ("curate", "dlama", "--region", "arab", "--languages", "en", "--out", "{tmp}/c"), "--endpoint is required"),
    CliCase("curate-fmlama-with-contrast", "`curate fmlama --contrast west`", "refused: fmlama has no contrast",
            ("curate", "fmlama", "--region", "arab", "--contrast", "west", "--languages", "en", "--endpoint",
             "{tmp}/d.ttl", "--out", "{tmp}/c"), "does not use --contrast", setup="turtle"),
    CliCase("curate-broken-turtle", "`curate` on a Turtle dump with a syntax error", "one line naming the file",
            ("curate", "dlama", "--region", "arab", "--languages", "en", "--endpoint", "{tmp}/broken.ttl", "--out",
             "{tmp}/c"), "broken.ttl", setup="broken_turtle"),
    CliCase("curate-missing-dump", "`curate --endpoint dump.ttl` that does not exist", "one line naming it",
            ("curate", "dlama", "--region", "arab", "--languages", "en", "--endpoint", "{tmp}/none.ttl", "--out",
             "{tmp}/c"), "none.ttl"),
    CliCase("curate-unknown-region", "`curate --region atlantis`", "one line listing the regions",
            ("curate", "dlama", "--region", "atlantis", "--languages", "en", "--endpoint", "{tmp}/d.ttl", "--out",
             "{tmp}/c"), "atlantis", setup="turtle"),
    CliCase("curate-finds-nothing", "`curate` on a dump with no facts of the regions", "exit 2 unless --allow-empty",
            ("curate", "dlama", "--region", "arab", "--languages", "en", "--predicates", "P36", "--endpoint",
             "{tmp}/d.ttl", "--out", "{tmp}/c"), "wrote no facts for P36_general_ARAB_REGION", setup="turtle"),
    CliCase("curate-bad-chunk-size", "`curate --chunk-size 0`", "refused, never coerced",
            ("curate", "dlama", "--region", "arab", "--languages", "en", "--endpoint", "{tmp}/d.ttl", "--out",
             "{tmp}/c", "--chunk-size", "0"), "chunk", setup="turtle"),
)

# Fault cases held by tests elsewhere: (id, what happens, what the user gets, test file::function).
OTHER_CASES: tuple[tuple[str, str, str, str], ...] = (
    ("killed-run-resumes", "a run killed with SIGKILL mid-way, then `--resume`",
     "only the missing requests are asked; metrics equal an uninterrupted run's",
     "tests/engine/test_cache.py::test_killed_run_resumes_with_only_missing_requests"),
    ("killed-in-judge-stage", "a two-stage run (X-FaKT with a judge) interrupted in its second stage",
     "resumed without loss or duplicates", "tests/tasks/test_runner_resume.py::"
     "test_two_stage_run_interrupted_in_the_judge_stage_resumes_without_loss_or_duplicates"),
    ("resume-finished-run", "`--resume` of a finished run", "nothing is asked again",
     "tests/test_cli.py::test_resume_of_a_finished_run_scores_nothing_new"),
    ("damaged-cache-row", "a row of the score cache damaged on disk", "reported, dropped, computed again",
     "tests/engine/test_cache.py::test_a_damaged_row_is_reported_dropped_and_computed_again"),
    ("damaged-cache-file", "a score cache file SQLite cannot read", "moved aside with a warning, rebuilt",
     "tests/engine/test_cache.py::test_an_unreadable_cache_file_is_moved_aside_and_started_anew"),
    ("two-cache-writers", "two processes writing one model's cache at once", "both complete; every row readable",
     "tests/engine/test_cache.py::test_two_processes_writing_one_cache_at_once"),
    ("second-writer-lock", "two runs into one folder at once", "the second fails at once",
     "tests/tasks/test_runner_resume.py::test_a_second_writer_of_the_same_run_fails_at_once"),
    ("records-kept", "a plain re-run into a folder of records without config.json", "refused, records untouched",
     "tests/tasks/test_runner_resume.py::test_records_without_their_config_are_never_truncated"),
    ("sparql-429-retry-after", "the SPARQL endpoint answers 429 with Retry-After", "waited, then resumed",
     "tests/curation/test_endpoints.py::test_429_with_retry_after_is_honoured"),
    ("sparql-long-retry-after", "a Retry-After of an hour", "the step ends at once with the fix; no silent sleep",
     "tests/curation/test_endpoints.py::test_a_retry_after_beyond_the_cap_ends_the_step_at_once_with_the_fix"),
    ("sparql-persistent-faults", "the endpoint keeps answering 500, garbage, or stalls",
     "an error naming the endpoint after bounded retries",
     "tests/curation/test_endpoints.py::test_persistent_faults_end_in_an_error_naming_the_endpoint"),
    ("sparql-transient-faults", "a 500, a dropped connection, a stall, garbage JSON once", "retried, then correct",
     "tests/curation/test_endpoints.py::test_transient_faults_are_retried"),
    ("sparql-bad-query", "the endpoint rejects a query (400)", "not retried; an error naming it",
     "tests/curation/test_endpoints.py::test_bad_query_is_not_retried"),
    ("sparql-server-stopped", "the server stops mid-curation", "checkpoints kept; a rerun resumes",
     "tests/curation/test_endpoints.py::test_server_stopped_mid_run_keeps_checkpoints_and_a_rerun_resumes"),
    ("curation-killed", "a curation killed with SIGKILL", "nothing fetched is lost; a rerun fetches the rest",
     "tests/curation/test_endpoints.py::test_killed_process_loses_nothing_it_fetched"),
    ("checkpoint-other-endpoint", "resuming a curation against another endpoint", "refused: two sources",
     "tests/curation/test_endpoints.py::test_checkpoints_refuse_to_resume_against_another_endpoint"),
    ("checkpoint-edited", "a checkpoint edited, moved or damaged", "an error naming it",
     "tests/reliability/test_faults.py::test_an_edited_moved_or_damaged_checkpoint_is_an_error_naming_it"),
    ("duplicate-fact", "a DLAMA file with a fact line repeated", "an error naming both rows",
     "tests/reliability/test_faults.py::test_a_repeated_fact_is_an_error_naming_both_rows"),
    ("generation-no-pad", "generation with a tokenizer without a pad token (GPT-2, Llama)", "EOS pads; it runs",
     "tests/engine/test_generate.py::test_a_tokenizer_without_a_pad_token_generates_in_batches"),
    ("generation-long-prompt", "a prompt longer than the model's positions", "cut on the left with one warning",
     "tests/engine/test_generate.py::test_a_prompt_longer_than_the_positions_is_cut_on_the_left_with_one_warning"),
    ("interrupted-report", "`report` of an interrupted run", "marked INCOMPLETE k/N",
     "tests/report/test_report.py::test_report_rebuilds_an_interrupted_run_from_its_items"),
    ("interrupted-compare", "`compare` with an interrupted run", "a note names it INCOMPLETE k/N",
     "tests/report/test_compare.py::test_incomplete_runs_and_other_configs_are_named"),
    ("broken-pipe", "`culture-probe list` piped into `head -1`", "no traceback, exit 0",
     "tests/reliability/test_faults.py::test_a_closed_pipe_ends_quietly"),
    ("unexpected-error", "a bug (an unexpected exception)", "its traceback and how to report it, exit 1; "
     "`--debug` shows the traceback of expected errors too",
     "tests/reliability/test_faults.py::test_an_unexpected_error_keeps_its_traceback_and_asks_for_a_report"),
)
