"""The reliability cases: what a careless or unlucky user does, and what they get.
`test_cli_cases.py` runs the `CLI_CASES`; `OTHER_CASES` name the tests elsewhere that hold the fault
cases (killed runs, damaged caches, concurrent writers, a faulty SPARQL endpoint).
docs/reliability.md lists them all, and a test checks that it does.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class CliCase:
    """One command with bad input: `argv` with {model} {data} {run} {file} {folder} {tmp} filled in
    after `setup` (a name in test_cli_cases.SETUPS) prepared {tmp}; it must exit with `code` and
    print `says` (a regex) on stderr.
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
    CliCase(
        "unknown-config",
        "`run` a config that does not exist",
        "one line naming it and the closest configs",
        ("run", "dlama_arab_wst", "--model", "{model}"),
        "Unknown benchmark config or group 'dlama_arab_wst'. Did you mean 'dlama_arab_west'",
    ),
    CliCase(
        "unknown-group",
        "name a group that does not exist in a suite",
        "one line naming it",
        ("run", "dlam", "fmlama_en", "--model", "{model}"),
        "Unknown benchmark config or group 'dlam'",
    ),
    CliCase(
        "limit-zero",
        "`--limit 0`",
        "refused before data or model load",
        (*RUN, "--limit", "0"),
        "limit must be a whole number >= 1, got 0",
    ),
    CliCase(
        "limit-negative",
        "`--limit -3`",
        "refused before data or model load",
        (*RUN, "--limit", "-3"),
        "limit must be a whole number >= 1, got -3",
    ),
    CliCase(
        "batch-tokens-zero",
        "`--batch-tokens 0`",
        "refused, never coerced",
        (*RUN, "--batch-tokens", "0"),
        "batch_tokens must be a whole number >= 1, got 0",
    ),
    CliCase(
        "batch-tokens-negative",
        "`--batch-tokens -64`",
        "refused, never coerced",
        (*RUN, "--batch-tokens", "-64"),
        "batch_tokens must be a whole number >= 1",
    ),
    CliCase(
        "concurrency-zero",
        "`--concurrency 0`",
        "refused",
        (*RUN, "--concurrency", "0"),
        "concurrency must be a whole number >= 1",
    ),
    CliCase(
        "limit-not-a-number",
        "`--limit ten`",
        "argparse's one line, exit 2",
        (*RUN, "--limit", "ten"),
        "invalid value: 'ten'",
    ),
    CliCase(
        "bad-kind",
        "`--kind banana`",
        "argparse's one line naming the kinds",
        (*RUN, "--kind", "banana"),
        "invalid choice: 'banana'",
    ),
    CliCase(
        "bad-dtype",
        "`--dtype float17`",
        "one line naming the dtypes to use",
        (*RUN, "--dtype", "float17"),
        "dtype 'float17' is not a torch dtype",
    ),
    CliCase(
        "bad-dtype-model-args",
        "`--model-args dtype=float17`",
        "the same, from --model-args",
        (*RUN, "--model-args", "dtype=float17"),
        "dtype 'float17' is not a torch dtype",
    ),
    CliCase(
        "model-args-no-equals",
        "`--model-args trust_remote_code`",
        "one line with an example",
        (*RUN, "--model-args", "trust_remote_code"),
        "--model-args takes KEY=VALUE, got 'trust_remote_code'",
    ),
    CliCase(
        "model-args-unknown",
        "`--model-args colour=red`",
        "one line listing the valid keys",
        (*RUN, "--model-args", "colour=red"),
        "Unknown model argument 'colour'",
    ),
    CliCase(
        "dtype-twice",
        "`--dtype float16 --model-args dtype=bfloat16`",
        "refused: give it once",
        (*RUN, "--dtype", "float16", "--model-args", "dtype=bfloat16"),
        "disagree: give it once",
    ),
    CliCase(
        "device-without-cuda",
        "`--device cuda:0` on a machine without CUDA",
        "one line, before loading",
        (*RUN, "--device", "cuda:0"),
        "sees no cuda device",
    ),
    CliCase(
        "device-nonsense",
        "`--device gpu7`",
        "one line with examples",
        (*RUN, "--device", "gpu7"),
        "'gpu7' is not a torch device",
    ),
    CliCase(
        "option-without-equals",
        "`--option score`",
        "one line with an example",
        (*RUN, "--option", "score"),
        "--option takes KEY=VALUE",
    ),
    CliCase(
        "option-unknown",
        "`--option colour=red`",
        "one line listing the protocol's options",
        (*RUN, "--option", "colour=red"),
        "Unknown option 'colour'",
    ),
    CliCase(
        "option-bad-value",
        "`--option score=median`",
        "one line naming the valid values",
        (*RUN, "--option", "score=median"),
        "median",
    ),
    CliCase(
        "language-unknown",
        "`--language xx` for a config in ar and en",
        "one line naming ar and en",
        (*RUN, "--language", "xx"),
        "Unknown language 'xx'",
    ),
    CliCase(
        "suite-option-one-config-lacks",
        "a suite with an option prefixed for a config that does not have it",
        "refused before the model loads, naming that config",
        (
            "run",
            "camel_co_prompts",
            "dlama_arab_west",
            "--model",
            "{model}",
            "--option",
            "dlama.tie_value=0.5",
        ),
        "In the suite's config dlama_arab_west: Unknown option 'tie_value'",
    ),
    CliCase(
        "option-no-config-has",
        "`--option rank_prompt=plain` where no config of the run has it",
        "one line naming the configs that have it",
        (
            "run",
            "camel_co_prompts",
            "dlama_arab_west",
            "--model",
            "{model}",
            "--option",
            "rank_prompt=plain",
        ),
        r"No config of this run \(camel_co_prompts, dlama_arab_west\) has option rank_prompt; xfakt's configs",
    ),
    CliCase(
        "option-prefix-unknown",
        "`--option xfak.judge=string`: a prefix naming no config or benchmark of the run",
        "one line naming the run's benchmarks and configs",
        (
            "run",
            "camel_co_prompts",
            "dlama_arab_west",
            "--model",
            "{model}",
            "--option",
            "xfak.judge=string",
        ),
        r"Unknown option prefix 'xfak'.* name a benchmark or config of this run: camel, dlama, camel_co_prompts",
    ),
    CliCase(
        "option-two-values-for-one-config",
        "`--option score=mean --option dlama.score=sum`",
        "refused, naming both values (neither overrides the other)",
        (*RUN, "--option", "score=mean", "--option", "dlama.score=sum"),
        "Option score of dlama_arab_west is given twice: score=mean and dlama.score=sum",
    ),
    CliCase(
        "suite-with-rows",
        "`--rows` with a suite",
        "refused: rows belong to one config",
        ("run", "dlama", "--model", "{model}", "--rows", "{file}"),
        "--rows belongs to one config",
    ),
    # --- models
    CliCase(
        "model-path-missing",
        "`--model ./no/such/folder`",
        "one line: the path does not exist",
        ("run", "dlama_arab_west", "--model", "{tmp}/no/such/folder", "--data-dir", "{data}"),
        "Model path .* does not exist",
    ),
    CliCase(
        "kind-the-model-cannot-be",
        "`--kind masked` on a GPT-2",
        "one line naming the model's own kind",
        (*RUN, "--kind", "masked"),
        "cannot load as masked .* its own kind is causal",
    ),
    CliCase(
        "served-without-url",
        "`--model openai:llama` without `--base-url`",
        "one line with an example URL",
        ("run", "dlama_arab_west", "--model", "openai:llama", "--data-dir", "{data}"),
        "pass the server's --base-url",
    ),
    # --- custom rows
    CliCase(
        "rows-missing-file",
        "`--rows rows.jsonl` that does not exist",
        "one line naming the file",
        (*RUN, "--rows", "{tmp}/rows.jsonl"),
        "no such file",
    ),
    CliCase(
        "rows-empty",
        "`--rows` of an empty file",
        "one line: it holds no rows",
        (*RUN, "--rows", "{tmp}/empty.jsonl"),
        "holds no rows",
        setup="empty_rows",
    ),
    CliCase(
        "rows-not-utf8",
        "`--rows` of a file that is not UTF-8",
        "one line naming file and line",
        (*RUN, "--rows", "{tmp}/latin1.jsonl"),
        r"latin1.jsonl:1: not UTF-8 text",
        setup="latin1_rows",
    ),
    CliCase(
        "rows-bad-json",
        "`--rows` with a line that is not JSON",
        "one line naming file and line",
        (*RUN, "--rows", "{tmp}/broken.jsonl"),
        r"broken.jsonl:2: invalid JSON",
        setup="broken_rows",
    ),
    CliCase(
        "rows-wrong-columns",
        "`--rows` of another benchmark's rows",
        "one line naming the missing column",
        (*RUN, "--rows", "{tmp}/wrong.jsonl"),
        "The custom rows lack the column",
        setup="wrong_rows",
    ),
    # --- run folders
    CliCase(
        "out-is-a-file",
        "`--out` a file",
        "refused, the file untouched",
        (*RUN, "--out", "{tmp}/notes.txt"),
        "is a file",
        setup="a_file",
        unchanged=("notes.txt",),
    ),
    CliCase(
        "out-under-a-file",
        "`--out notes.txt/run`",
        "refused before any data loads",
        (*RUN, "--out", "{tmp}/notes.txt/run"),
        "lies under .*notes.txt, which is a file",
        setup="a_file",
    ),
    CliCase(
        "out-someones-folder",
        "`--out` a model folder",
        "refused, nothing written into it",
        (*RUN, "--out", "{tmp}/model"),
        "is not empty and is not a culture_probe run",
        setup="model_folder",
        unchanged=("model/config.json",),
    ),
    CliCase(
        "out-existing-run",
        "the same `--out` again without `--resume`",
        "refused, with the fix",
        (*RUN, "--out", "{tmp}/run"),
        "already holds a run. Pass --resume",
        setup="finished_run",
        unchanged=("run/items.jsonl",),
    ),
    CliCase(
        "resume-other-settings",
        "`--resume` with another model or other options",
        "refused, naming the first difference",
        (*RUN, "--out", "{tmp}/run", "--resume", "--option", "score=sum"),
        "Cannot resume .* was .* and is now",
        setup="finished_run",
        unchanged=("run/items.jsonl",),
    ),
    CliCase(
        "records-without-config",
        "a run folder whose config.json was deleted",
        "refused, records kept",
        (*RUN, "--out", "{tmp}/run"),
        "but no config.json",
        setup="run_without_config",
        unchanged=("run/items.jsonl",),
    ),
    CliCase(
        "second-writer",
        "a second `run` into a folder another process is writing",
        "fails at once",
        (*RUN, "--out", "{tmp}/run", "--resume"),
        "Another process is writing the run",
        setup="locked_run",
    ),
    # --- reading runs back
    CliCase(
        "report-not-a-run",
        "`report` on a folder that is no run",
        "one line: pass a run's --out",
        ("report", "{tmp}"),
        "is not a run directory",
    ),
    CliCase(
        "report-truncated-metrics",
        "`report` on a run whose metrics.json was cut short",
        "one line naming the file",
        ("report", "{tmp}/run"),
        r"metrics.json is not valid JSON",
        setup="truncated_metrics",
    ),
    CliCase(
        "report-truncated-config",
        "`report` on a run whose config.json was cut short",
        "one line naming the file",
        ("report", "{tmp}/run"),
        r"config.json is not valid JSON",
        setup="truncated_config",
    ),
    CliCase(
        "report-damaged-items",
        "`report` on a run with a damaged line inside items.jsonl",
        "one line naming file and line",
        ("report", "{tmp}/run"),
        r"items.jsonl:1 is not valid JSON",
        setup="damaged_items",
    ),
    CliCase(
        "compare-one-run",
        "`compare` with one run",
        "one line: two are needed",
        ("compare", "{tmp}/run"),
        "at least two run directories",
        setup="finished_run",
    ),
    CliCase(
        "compare-different-items",
        "`compare` of runs on different items",
        "refused, `--unpaired` suggested",
        ("compare", "{tmp}/run", "{tmp}/subset"),
        "probed different units.*--unpaired",
        setup="two_runs",
    ),
    # --- export, push and list
    CliCase(
        "export-onto-a-file",
        "`export` onto a file",
        "refused, the file untouched",
        ("export", "{tmp}/notes.txt", "--configs", "camel_co_prompts"),
        "Cannot write the export into",
        setup="a_file",
        unchanged=("notes.txt",),
    ),
    CliCase(
        "export-unknown-config",
        "`export --configs` a config that does not exist",
        "one line naming it",
        ("export", "{tmp}/hub", "--configs", "camel_co_prompt"),
        "Unknown benchmark config 'camel_co_prompt'",
    ),
    CliCase(
        "push-not-a-repo-id",
        "`push` to a name without an owner",
        "one line: write it as OWNER/NAME",
        (
            "push",
            "culture_probe",
            "--configs",
            "camel_co_prompts",
            "--dry-run",
            "--out",
            "{tmp}/plan",
        ),
        "is not a Hub repository id",
    ),
    CliCase(
        "push-on-request-data",
        "`push --configs maps_en` without the permission flags",
        "refused, naming the licence and where to ask",
        ("push", "org/x", "--configs", "maps_en", "--dry-run", "--out", "{tmp}/plan"),
        "released only on request.*github.com/UKPLab/maps",
    ),
    CliCase(
        "push-offline",
        "`push` with `HF_HUB_OFFLINE` set",
        "one line before any export: unset it, or `--dry-run`",
        ("push", "org/x", "--configs", "camel_co_prompts"),
        "HF_HUB_OFFLINE is set",
    ),
    CliCase(
        "push-dry-run-without-out",
        "`push --dry-run` without `--out`",
        "one line: pass --out DIR",
        ("push", "org/x", "--dry-run"),
        "--dry-run writes the folder it would upload: pass --out DIR",
    ),
    CliCase(
        "push-metrics-unknown",
        "`push-metrics --metrics` a metric that does not exist",
        "one line naming the metrics",
        ("push-metrics", "org", "--metrics", "cbz", "--dry-run", "--out", "{tmp}/spaces"),
        "Unknown metric 'cbz'",
    ),
    CliCase("version", "`--version`", "the version, exit 0", ("--version",), "", code=0),
    # --- curation
    CliCase(
        "curate-without-endpoint",
        "`curate` without `--endpoint`",
        "one line with an example",
        ("curate", "dlama", "--region", "arab", "--languages", "en", "--out", "{tmp}/c"),
        "--endpoint is required",
    ),
    CliCase(
        "curate-fmlama-with-contrast",
        "`curate fmlama --contrast west`",
        "refused: fmlama has no contrast",
        (
            "curate",
            "fmlama",
            "--region",
            "arab",
            "--contrast",
            "west",
            "--languages",
            "en",
            "--endpoint",
            "{tmp}/d.ttl",
            "--out",
            "{tmp}/c",
        ),
        "does not use --contrast",
        setup="turtle",
    ),
    CliCase(
        "curate-broken-turtle",
        "`curate` on a Turtle dump with a syntax error",
        "one line naming the file",
        (
            "curate",
            "dlama",
            "--region",
            "arab",
            "--languages",
            "en",
            "--endpoint",
            "{tmp}/broken.ttl",
            "--out",
            "{tmp}/c",
        ),
        "broken.ttl",
        setup="broken_turtle",
    ),
    CliCase(
        "curate-missing-dump",
        "`curate --endpoint dump.ttl` that does not exist",
        "one line naming it",
        (
            "curate",
            "dlama",
            "--region",
            "arab",
            "--languages",
            "en",
            "--endpoint",
            "{tmp}/none.ttl",
            "--out",
            "{tmp}/c",
        ),
        "none.ttl",
    ),
    CliCase(
        "curate-unknown-region",
        "`curate --region atlantis`",
        "one line listing the regions",
        (
            "curate",
            "dlama",
            "--region",
            "atlantis",
            "--languages",
            "en",
            "--endpoint",
            "{tmp}/d.ttl",
            "--out",
            "{tmp}/c",
        ),
        "atlantis",
        setup="turtle",
    ),
    CliCase(
        "curate-finds-nothing",
        "`curate` on a dump with no facts of the regions",
        "exit 2 unless --allow-empty",
        (
            "curate",
            "dlama",
            "--region",
            "arab",
            "--languages",
            "en",
            "--predicates",
            "P36",
            "--endpoint",
            "{tmp}/d.ttl",
            "--out",
            "{tmp}/c",
        ),
        "wrote no facts for P36_general_ARAB_REGION",
        setup="turtle",
    ),
    CliCase(
        "curate-bad-chunk-size",
        "`curate --chunk-size 0`",
        "refused, never coerced",
        (
            "curate",
            "dlama",
            "--region",
            "arab",
            "--languages",
            "en",
            "--endpoint",
            "{tmp}/d.ttl",
            "--out",
            "{tmp}/c",
            "--chunk-size",
            "0",
        ),
        "chunk",
        setup="turtle",
    ),
)

# Fault cases held by tests elsewhere: (id, what happens, what the user gets, test file::function).
OTHER_CASES: tuple[tuple[str, str, str, str], ...] = (
    (
        "killed-run-resumes",
        "a run killed with SIGKILL mid-way, then `--resume`",
        "only the missing requests are asked; metrics equal an uninterrupted run's",
        "tests/engine/test_cache.py::test_killed_run_resumes_with_only_missing_requests",
    ),
    (
        "killed-in-judge-stage",
        "a two-stage run (X-FaKT with a judge) interrupted in its second stage",
        "resumed without loss or duplicates",
        "tests/tasks/test_runner_resume.py::"
        "test_two_stage_run_interrupted_in_the_judge_stage_resumes_without_loss_or_duplicates",
    ),
    (
        "resume-finished-run",
        "`--resume` of a finished run",
        "nothing is asked again",
        "tests/cli/test_cli.py::test_resume_of_a_finished_run_scores_nothing_new",
    ),
    (
        "damaged-cache-row",
        "a row of the score cache damaged on disk",
        "reported, dropped, computed again",
        "tests/engine/test_cache.py::test_a_damaged_row_is_reported_dropped_and_computed_again",
    ),
    (
        "damaged-cache-file",
        "a score cache file SQLite cannot read",
        "moved aside with a warning, rebuilt",
        "tests/engine/test_cache.py::test_an_unreadable_cache_file_is_moved_aside_and_started_anew",
    ),
    (
        "two-cache-writers",
        "two processes writing one model's cache at once",
        "both complete; every row readable",
        "tests/engine/test_cache.py::test_two_processes_writing_one_cache_at_once",
    ),
    (
        "second-writer-lock",
        "two runs into one folder at once",
        "the second fails at once, before it reads data or loads its model",
        "tests/reliability/test_folders.py::test_a_second_writer_of_a_run_fails_before_planning_or_loading",
    ),
    (
        "records-kept",
        "a plain re-run into a folder of records without config.json",
        "refused, records untouched",
        "tests/tasks/test_runner_resume.py::test_records_without_their_config_are_never_truncated",
    ),
    (
        "sparql-429-retry-after",
        "the SPARQL endpoint answers 429 with Retry-After",
        "waited, then resumed",
        "tests/curation/test_endpoints.py::test_429_with_retry_after_is_honoured",
    ),
    (
        "sparql-long-retry-after",
        "a Retry-After of an hour",
        "the step ends at once with the fix; no silent sleep",
        "tests/curation/test_endpoints.py::test_a_retry_after_beyond_the_cap_ends_the_step_at_once_with_the_fix",
    ),
    (
        "sparql-persistent-faults",
        "the endpoint keeps answering 500, garbage, or stalls",
        "an error naming the endpoint after bounded retries",
        "tests/curation/test_endpoints.py::test_persistent_faults_end_in_an_error_naming_the_endpoint",
    ),
    (
        "sparql-transient-faults",
        "a 500, a dropped connection, a stall, garbage JSON once",
        "retried, then correct",
        "tests/curation/test_endpoints.py::test_transient_faults_are_retried",
    ),
    (
        "sparql-bad-query",
        "the endpoint rejects a query (400)",
        "not retried; an error naming it",
        "tests/curation/test_endpoints.py::test_bad_query_is_not_retried",
    ),
    (
        "sparql-server-stopped",
        "the server stops mid-curation",
        "checkpoints kept; a rerun resumes",
        "tests/curation/test_endpoints.py::test_server_stopped_mid_run_keeps_checkpoints_and_a_rerun_resumes",
    ),
    (
        "curation-killed",
        "a curation killed with SIGKILL",
        "nothing fetched is lost; a rerun fetches the rest",
        "tests/curation/test_endpoints.py::test_killed_process_loses_nothing_it_fetched",
    ),
    (
        "checkpoint-other-endpoint",
        "resuming a curation against another endpoint",
        "refused: two sources",
        "tests/curation/test_endpoints.py::test_checkpoints_refuse_to_resume_against_another_endpoint",
    ),
    (
        "checkpoint-edited",
        "a checkpoint edited, moved or damaged",
        "an error naming it",
        "tests/reliability/test_faults.py::test_an_edited_moved_or_damaged_checkpoint_is_an_error_naming_it",
    ),
    (
        "nan-article-size",
        "a curation dump whose article size is NaN, negative or not a number",
        "an error naming the article, never a silent rank",
        "tests/reliability/test_faults.py::test_an_article_size_that_is_no_byte_count_is_an_error_naming_the_article",
    ),
    (
        "duplicate-fact",
        "a DLAMA file with a fact line repeated",
        "an error naming both rows",
        "tests/reliability/test_faults.py::test_a_repeated_fact_is_an_error_naming_both_rows",
    ),
    (
        "generation-no-pad",
        "generation with a tokenizer without a pad token (GPT-2, Llama)",
        "EOS pads; it runs",
        "tests/engine/test_generate.py::test_a_tokenizer_without_a_pad_token_generates_in_batches",
    ),
    (
        "generation-long-prompt",
        "a prompt longer than the model's positions",
        "cut on the left with one warning",
        "tests/engine/test_generate.py::test_a_prompt_longer_than_the_positions_is_cut_on_the_left_with_one_warning",
    ),
    (
        "interrupted-report",
        "`report` of an interrupted run",
        "marked INCOMPLETE k/N",
        "tests/report/test_report.py::test_report_rebuilds_an_interrupted_run_from_its_items",
    ),
    (
        "interrupted-compare",
        "`compare` with an interrupted run",
        "a note names it INCOMPLETE k/N",
        "tests/report/test_compare.py::test_incomplete_runs_and_other_configs_are_named",
    ),
    (
        "broken-pipe",
        "`culture-probe list` piped into `head -1`",
        "no traceback, exit 0",
        "tests/reliability/test_faults.py::test_a_closed_pipe_ends_quietly",
    ),
    (
        "unexpected-error",
        "a bug (an unexpected exception)",
        "its traceback and how to report it, exit 1; `--debug` shows the traceback of expected errors too",
        "tests/reliability/test_faults.py::test_an_unexpected_error_keeps_its_traceback_and_asks_for_a_report",
    ),
    (
        "served-stalls",
        "a served model whose server accepts and never answers",
        "one line naming the URL, `--request-timeout` and `--max-retries`, within timeout x (retries + 1) plus backoff",
        "tests/engine/test_served_failures.py::test_a_stalled_server_fails_within_timeout_times_tries_naming_the_url_and_both_flags",
    ),
    (
        "served-dies",
        "the server answers 500 mid-run",
        "stops after one request's retries; queued requests cancelled",
        "tests/engine/test_served_failures.py::test_a_failing_server_stops_the_queue_after_one_requests_retries",
    ),
    (
        "served-malformed-reply",
        "the server sends no choices, a null text, HTML, broken JSON, mismatched log-prob/offset lists, or "
        "NaN/inf/positive log-probs",
        "one error naming the server and the fault, never a score",
        "tests/engine/test_served_failures.py::test_a_malformed_reply_is_one_error_naming_the_server_and_the_fault_never_a_score",
    ),
    (
        "served-stall-cli",
        "`run --model openai:NAME --request-timeout 0.2 --max-retries 0` on a stalled server",
        "exit 2 in seconds, one line; config.json records both settings",
        "tests/engine/test_served_failures.py::test_the_cli_ends_a_run_on_a_stalled_server_in_one_line_and_records_the_settings",
    ),
    (
        "bad-timeout-or-retries",
        "`--request-timeout 0` or `--max-retries -1`",
        "refused before data or model load",
        "tests/engine/test_served_failures.py::test_the_cli_refuses_a_bad_timeout_or_retry_count_before_anything_loads",
    ),
    (
        "run-suite-folders-mixed",
        "`run CONFIG --out SUITE_DIR`, or a suite with `--out RUN_DIR`",
        "refused, naming what the folder is and what to pass; nothing written or loaded",
        "tests/reliability/test_folders.py::test_a_run_refuses_a_suite_folder_and_a_suite_a_run_folder_saying_which_it_is",
    ),
    (
        "folders-of-earlier-versions",
        "a suite or run folder made before the suite marker",
        "keeps its kind: refused and resumed as before",
        "tests/reliability/test_folders.py::test_folders_made_before_the_suite_marker_keep_their_kind",
    ),
    (
        "second-suite-writer",
        "two suites into one folder at once",
        "the second fails at once",
        "tests/reliability/test_folders.py::test_a_second_writer_of_a_suite_fails_at_once",
    ),
    (
        "suite-json-keeps-configs",
        "`--resume` a suite with fewer configs, or other configs into its folder",
        "without --resume refused before the model loads; with it suite.json lists every config the folder "
        "holds; another model refused",
        "tests/reliability/test_folders.py::test_suite_json_lists_every_config_the_folder_holds_resumed_or_not",
    ),
    (
        "compare-suite-folder",
        "`compare` on a suite folder; `report` on a folder that is neither",
        "one line saying what the folder is (a suite: its runs to pass)",
        "tests/reliability/test_folders.py::test_report_and_compare_say_what_a_folder_is",
    ),
    (
        "cache-disk-full",
        "the disk under `--cache-dir` fills up",
        "an error naming the folder; the cache kept, never moved aside",
        "tests/reliability/test_files.py::test_a_full_disk_under_the_cache_dir_is_an_error_naming_the_folder_not_damage",
    ),
    (
        "cache-read-only",
        "a read-only score cache file or folder",
        "an error naming the folder; the file left as it was",
        "tests/reliability/test_files.py::test_a_read_only_cache_is_an_error_naming_it_and_left_as_it_was",
    ),
    (
        "cache-dir-read-only",
        "`run --cache-dir` a read-only folder",
        "one line: the folder is read-only",
        "tests/reliability/test_files.py::test_a_read_only_cache_dir_ends_a_run_in_one_line",
    ),
    (
        "out-disk-full",
        "the disk under `--out` fills up during a run",
        "one line naming the folder: no space left; `--resume` continues",
        "tests/reliability/test_files.py::test_a_full_disk_under_out_is_one_line_and_exit_2",
    ),
    (
        "out-fills-mid-run",
        "the disk under `--out` fills after some records are written",
        "one line naming the folder, its free space and about how much more the rest of the records need",
        "tests/reliability/test_files.py::test_a_disk_that_fills_mid_run_says_how_much_more_the_records_need",
    ),
    (
        "out-read-only",
        "`run --out` a read-only folder",
        "one line naming it",
        "tests/reliability/test_files.py::test_a_read_only_out_is_one_line_naming_it",
    ),
    (
        "run-read-only",
        "`report RUN` or `run --resume --out RUN` on a run folder mounted read-only",
        "one line naming the folder; every file as it was",
        "tests/reliability/test_files.py::test_report_and_resume_on_a_read_only_run_are_one_line_and_leave_it_as_it_was",
    ),
    (
        "re-export-fails",
        "a re-export whose data is missing, or that fills the disk",
        "the earlier export unchanged byte for byte; no temporary folder left",
        "tests/reliability/test_files.py::test_a_failed_re_export_leaves_the_earlier_export_as_it_was",
    ),
    (
        "re-export-user-files",
        "a re-export into a folder holding the user's own files",
        "kept and listed; the dropped config's rows removed",
        "tests/reliability/test_files.py::test_a_re_export_keeps_the_files_no_export_wrote_and_says_so",
    ),
    (
        "re-export-overwrite",
        "a re-export that would write over a user's file",
        "refused, naming it; nothing changed",
        "tests/reliability/test_files.py::test_a_re_export_that_would_overwrite_a_users_file_is_refused_naming_it",
    ),
    (
        "dry-run-user-files",
        "`push --dry-run --out` into an earlier dry run holding the user's files",
        "kept, listed as not uploaded",
        "tests/reliability/test_files.py::test_a_dry_run_push_keeps_the_users_files_and_lists_only_what_it_would_upload",
    ),
    (
        "model-args-twice",
        "`--model-args dtype=float32,dtype=bfloat16`",
        "refused, naming both values",
        "tests/reliability/test_inputs.py::test_a_model_argument_given_twice_names_both_values",
    ),
    (
        "option-twice",
        "`--option question=pos --option question=neg`",
        "one line naming both values",
        "tests/reliability/test_inputs.py::test_an_option_given_twice_names_both_values",
    ),
    (
        "model-args-unknown-value",
        "`--model-args attn_implementation=banana` or `device_map=banana`",
        "refused before loading, naming the valid values",
        "tests/reliability/test_inputs.py::test_a_model_argument_transformers_would_refuse_is_named_before_loading",
    ),
    (
        "option-wrong-type-or-range",
        "`tie_value=nan`, `culture_token=1` from Python, `country_names=[1,2]`, `chat_temperature=-1`",
        "refused, naming the type or range, before data or model load",
        "tests/reliability/test_inputs.py::test_an_option_of_the_wrong_type_or_range_is_named",
    ),
    (
        "option-before-data",
        "a bad option with no data present",
        "the option error, not a missing-data one",
        "tests/reliability/test_inputs.py::test_a_bad_option_is_refused_before_the_data_is_read",
    ),
    (
        "sample-above-pool",
        "CAMeL `sample_size=100000`",
        "refused with the largest pool's size, before the model",
        "tests/reliability/test_inputs.py::test_a_sample_above_every_pool_is_refused_with_the_pool_size",
    ),
    (
        "rows-bad-field",
        "custom rows with a wrong label, a null text field or a wrong type",
        "refused when read, naming the row and field",
        "tests/reliability/test_inputs.py::test_a_custom_row_that_does_not_fit_is_named_before_scoring",
    ),
    (
        "rows-file-bad-label",
        "a `--rows` file with label `c`",
        "one line naming the row and label",
        "tests/reliability/test_inputs.py::test_a_rows_file_with_a_wrong_label_is_one_line",
    ),
    (
        "api-wrong-argument",
        "`run(None)`, `run([...])`, `run(cfg, None)`, `load_metric(None)`, `ScoreRequest(candidates=None)` or "
        "integer candidates, a lone surrogate, `ModelArgs(dtype=16)` or `model_args={'trust_remote_code': 'yes'}`",
        "a `CultureProbeError` naming the argument and what it takes",
        "tests/reliability/test_inputs.py::test_a_wrong_argument_names_the_argument_and_what_it_takes",
    ),
    (
        "map-none-prediction",
        "mAP with a `None` prediction",
        "`MetricInputError` naming the index",
        "tests/reliability/test_inputs.py::test_map_with_a_none_prediction_is_a_metric_error",
    ),
    (
        "generate-no-text",
        '`generate([""])` or a prompt with a lone surrogate',
        "refused, naming the prompt",
        "tests/reliability/test_inputs.py::test_a_prompt_that_is_no_text_is_named",
    ),
    (
        "literal-mask",
        "`[MASK]` in `ScoreRequest.left`/`right`/candidates for a masked model",
        "refused, naming the text, never a second slot",
        "tests/reliability/test_inputs.py::test_a_literal_mask_token_is_refused_not_made_a_second_slot",
    ),
    (
        "config-json-not-a-run",
        "`report`/`compare` on a folder whose config.json is a list, a string, or lacks `config`",
        "one line naming the file as damaged, exit 2",
        "tests/reliability/test_damaged_runs.py::test_a_config_json_that_is_no_run_configuration_is_one_line_naming_the_file",
    ),
    (
        "cache-dir-is-a-file",
        "`--cache-dir` naming a file",
        "refused when the settings are made, before data or model",
        "tests/reliability/test_damaged_runs.py::test_a_cache_dir_that_is_a_file_is_refused_when_the_settings_are_made",
    ),
    (
        "pickled-weights",
        "a model whose weights file holds a pickle torch refuses",
        "one line: nothing in it was run; use safetensors",
        "tests/reliability/test_damaged_runs.py::test_a_weights_file_torch_refuses_to_unpickle_is_one_line_saying_nothing_ran",
    ),
    (
        "curate-bad-sites",
        "`curate --sites english`, or `--sites` with a built-in region",
        "refused before any query, naming the codes or saying the sites belong to a NAME=QID region",
        "tests/curation/test_cli_and_loading.py::test_cli_refuses_bad_sites_before_any_query",
    ),
    # --- issue 35: secrets (entries of this part go right below this line) ---
    (
        "base-url-password",
        "a password and a key in `--base-url` (`http://user:pass@host/v1?api_key=...`)",
        "used for the requests; config.json, report.md (identity, Reproduce) and the board show `http://***@host/v1?api_key=***`",
        "tests/reliability/test_secrets.py::test_a_password_and_a_key_in_the_base_url_are_recorded_and_shown_nowhere",
    ),
    (
        "base-url-password-older-run",
        "`report` or `push-board` of a run whose config.json holds a password in a URL",
        "blanked in report.md and on the board",
        "tests/reliability/test_secrets.py::test_a_run_recorded_with_a_password_in_its_url_shows_it_nowhere",
    ),
    (
        "served-credentials",
        "a served model with a password in `--base-url` and `OPENAI_API_KEY` set",
        "both sent to the server; its identity and errors name it without them; the key is written nowhere",
        "tests/reliability/test_secrets.py::test_a_served_model_sends_its_credentials_but_names_its_server_without_them",
    ),
    (
        "url-credentials",
        "a URL with `user@`, or a query or fragment key named like a token, key, secret, password or signature",
        "that value shown as `***`, the rest as given; a URL without any unchanged",
        "tests/reliability/test_secrets.py::test_credentials_in_a_url_are_blanked_and_nothing_else",
    ),
    (
        "push-board-secret",
        "`push-board` of runs holding the Hub token, an environment secret, text shaped like a key (`hf_`, `sk-`, "
        "`AKIA`, a private key) or the home folder's path",
        "one line naming the file and what it holds, never the value; nothing uploaded; `--dry-run` says the same",
        "tests/reliability/test_secrets.py::test_push_board_refuses_a_board_holding_a_secret_and_uploads_nothing",
    ),
    (
        "secret-refusal-cli",
        "`push-board --dry-run` of a run holding the value of `$MY_SERVICE_PASSWORD`",
        "one line naming the file and the variable, exit 2",
        "tests/reliability/test_secrets.py::test_the_refusal_is_one_line_and_never_shows_the_secret",
    ),
    (
        "push-secret",
        "`push` of an export holding the Hub token",
        "one line naming the file; nothing uploaded",
        "tests/reliability/test_secrets.py::test_push_refuses_an_export_holding_a_secret_and_uploads_nothing",
    ),
    (
        "push-metrics-secret",
        "`push-metrics` of a Space holding an environment secret",
        "one line naming the file; nothing uploaded",
        "tests/reliability/test_secrets.py::test_push_metrics_refuses_a_space_holding_a_secret_and_uploads_nothing",
    ),
    (
        "binary-upload-secret",
        "a PNG to be uploaded holding the home folder's path",
        "refused by name; another user's folder is no home path",
        "tests/reliability/test_secrets.py::test_binary_files_are_read_too",
    ),
    (
        "board-home-paths",
        "`push-board` of runs under the home folder",
        "the runs shown by their names, no path of the home folder; pushed",
        "tests/reliability/test_secrets.py::test_a_board_under_the_home_folder_names_no_path_of_it_and_can_be_pushed",
    ),
    (
        "plots-link-outside",
        "a received run whose `plots/x.png` links to `~/.cache/huggingface/token`",
        "`board` and `push-board` refuse the link by name, nothing copied or uploaded; a link inside the run is "
        "copied as the file",
        "tests/reliability/test_secrets.py::test_a_link_out_of_a_run_folder_is_refused_by_name_and_nothing_leaves",
    ),
    (
        "records-link-outside",
        "a run whose items.jsonl links to a file outside it",
        "`board` refuses the link by name",
        "tests/reliability/test_secrets.py::test_records_linked_from_outside_the_run_are_refused_by_name",
    ),
    (
        "push-board-title-yaml",
        '`push-board --title "Results: v2"`, or a title with a newline and `sdk: docker`',
        "the Space's title in valid front matter with exactly its keys (written by YAML)",
        "tests/reliability/test_secrets.py::test_a_hostile_title_is_the_spaces_title_and_adds_no_key",
    ),
    # --- issue 35: read-back (entries of this part go right below this line) ---
    (
        "jsonl-any-text",
        "any text written to a JSON Lines file: U+0085, U+2028, U+2029 and the other characters `str.splitlines` "
        "splits on, in keys and values, nested",
        "one line per record, read back as written, also with CRLF line ends",
        "tests/reliability/test_roundtrip.py::test_any_text_round_trips_through_the_jsonl_writer_and_reader",
    ),
    (
        "records-any-text",
        "records holding those characters, written to items.jsonl now or raw by an earlier version",
        "read back equal; a resume cuts nothing",
        "tests/reliability/test_roundtrip.py::test_records_round_trip_through_items_jsonl_written_now_or_before_the_escapes",
    ),
    (
        "separator-damaged-line",
        "a damaged line in items.jsonl after lines holding raw U+2028; a last line cut inside a character",
        "one line naming the file and the damaged line's own number; the cut line dropped and redone",
        "tests/reliability/test_roundtrip.py::test_a_damaged_line_after_raw_separators_is_named_by_its_own_line_number",
    ),
    (
        "separator-labels-run",
        "`run` DLAMA data whose labels hold U+2028, U+2029 or U+0085, then `report`, `--resume`, `compare`, `board` "
        "and `consistency`",
        "exit 0 each; every record read back; the resume redoes nothing",
        "tests/reliability/test_roundtrip.py::test_a_run_whose_labels_hold_separators_reads_back_in_every_command",
    ),
    (
        "separator-rows-run",
        "`run --rows` rows holding the separators, by a model whose generated text holds them too; then `report`, "
        "`--resume`, `compare`, `board`, and `--rows` the run's rows.jsonl",
        "exit 0 each; the rows and the generated text read back as written",
        "tests/reliability/test_roundtrip.py::test_rows_and_generated_text_with_separators_read_back_in_every_command",
    ),
    (
        "separator-old-run",
        "an earlier run whose items.jsonl holds the separators raw",
        "read back whole by `report`, `--resume`, `compare`, `board` and `consistency`; no record redone",
        "tests/reliability/test_roundtrip.py::test_a_run_written_before_the_escapes_reads_back_whole",
    ),
    # --- issue 35: output folders (entries of this part go right below this line) ---
    (
        "out-inside-a-run",
        "`compare A B --out A/plots` (a folder inside a run)",
        "refused, naming the run it lies in; the run unchanged",
        "tests/reliability/test_output_folders.py::test_a_folder_inside_a_run_as_out_is_refused",
    ),
    (
        "out-is-a-mount-point",
        "`board ... --out /mnt/disk` (its own file system)",
        "built inside it under a hidden name and moved in; a failure leaves the old output and nothing beside or "
        "inside it",
        "tests/reliability/test_output_folders.py::test_a_mount_point_as_out_is_rebuilt_inside_it",
    ),
    (
        "marker-cut-short",
        "the disk fills while a board's marker is written",
        "the marker is written whole or not at all; the next rebuild keeps the user's files",
        "tests/reliability/test_output_folders.py::test_a_marker_is_written_whole_or_not_at_all",
    ),
    (
        "hidden-run-figure",
        "a received run with `plots/.x.png`",
        "not copied; later rebuilds still read their marker",
        "tests/reliability/test_output_folders.py::test_a_hidden_figure_of_a_run_is_not_copied",
    ),
    (
        "rebuild-full-disk",
        "`board`, `consistency --out` or `compare --out` rebuilt in its folder on a full disk",
        "one line naming the folder and its free space; the earlier output byte for byte, no half-built folder",
        "tests/reliability/test_output_folders.py::test_a_rebuild_on_a_full_disk_is_one_line_and_leaves_the_old_output",
    ),
    (
        "board-rebuild-user-files",
        "`board` rebuilt in a folder holding the user's files, also under `data/` and `figures/`",
        "kept and listed; the earlier board's files replaced",
        "tests/reliability/test_output_folders.py::test_a_board_rebuilt_in_place_keeps_the_users_files",
    ),
    (
        "push-board-dry-run-readme",
        "`push-board --dry-run --out` into a board or a folder holding the user's README.md",
        "refused, naming README.md, nothing changed; in an earlier dry run, the user's files kept and not listed",
        "tests/reliability/test_output_folders.py::test_a_dry_run_push_board_never_overwrites_the_users_readme",
    ),
    (
        "consistency-user-file",
        "`consistency --out` into a folder holding the user's consistency.md",
        "refused, naming it; nothing changed; the user's other files kept",
        "tests/reliability/test_output_folders.py::test_consistency_refuses_to_overwrite_the_users_file_and_keeps_the_others",
    ),
    (
        "out-is-run-or-suite",
        "a run or suite folder as `--out` of `board`, `consistency` or `compare`",
        "refused in one line; the folder unchanged",
        "tests/reliability/test_output_folders.py::test_a_run_or_suite_folder_as_out_is_refused",
    ),
    (
        "two-writers-one-folder",
        "two `board` (`consistency`, `compare`) commands into one folder at once",
        "the second refused in one line (the folder's lock)",
        "tests/reliability/test_output_folders.py::test_a_second_writer_of_the_folder_is_refused_in_one_line",
    ),
    (
        "out-empty-text",
        '`board --out ""` (or `consistency`, `compare`)',
        "refused in one line; the current folder untouched",
        "tests/reliability/test_output_folders.py::test_an_empty_out_is_refused_not_the_current_folder",
    ),
    # --- issue 35: timeouts and the Python API (entries of this part go right below this line) ---
    (
        "served-trickles",
        "a served model whose server stalls, trickles its reply a byte every 0.25 s (from the status line, or once "
        "the headers are out) or sends its headers and half a body and hangs, with `--request-timeout 1 "
        "--max-retries 1`",
        "one line naming the URL and both flags, within 1 s x 2 plus the backoff",
        "tests/engine/test_served_timeouts.py::test_a_server_that_stalls_trickles_or_half_answers_fails_within_timeout_times_tries",
    ),
    (
        "served-trickle-cli",
        "`run --model openai:NAME --request-timeout 1 --max-retries 0` on a server that trickles its reply",
        "exit 2 in seconds, one line naming the URL and both flags",
        "tests/engine/test_served_timeouts.py::test_the_cli_ends_a_run_on_a_trickling_server_in_one_line",
    ),
    (
        "api-modelargs-dtype",
        '`ModelArgs(dtype="float17")` from Python',
        "refused as `--dtype float17` is: one check in `ModelArgs`, for the command line and Python alike",
        "tests/reliability/test_api_types.py::test_the_python_api_refuses_what_the_command_line_refuses_naming_the_argument",
    ),
    (
        "api-run-suite-one-name",
        '`run_suite("maps_en", ...)`',
        "one config, never read letter by letter",
        "tests/reliability/test_api_types.py::test_run_suite_takes_one_name_as_one_name",
    ),
    (
        "api-wrong-kind",
        '`run(data_dir=123)`, `run_suite(["maps_en", None])`, `compare_runs(None)`, `precision_at_k` with a None '
        "reference or empty inputs",
        "the library's own error naming the argument (and the item)",
        "tests/reliability/test_api_types.py::test_the_python_api_refuses_what_the_command_line_refuses_naming_the_argument",
    ),
    (
        "api-metrics-any-wrong-kind",
        "any public metric function given None, a number, a string, a mapping, a list of None or an empty list in "
        "any argument",
        "returns, or a `MetricInputError` naming that argument; never a raw Python error",
        "tests/reliability/test_api_types.py::test_a_metric_given_a_wrong_kind_of_value_names_the_argument",
    ),
    (
        "api-top-level-no-name",
        "`run`, `run_suite`, `dry_run`, `load_benchmark`, `load_metric`, `push_to_hub` or `compare_runs` given no "
        "name (None, a number, a mapping, a list of None)",
        "a `CultureProbeError` naming the argument",
        "tests/reliability/test_api_types.py::test_a_top_level_function_given_no_name_names_the_argument",
    ),
    # --- issue 35: damaged and old run folders (entries of this part go right below this line) ---
    (
        "config-json-wrong-type",
        "`report`, `board`, `compare`, `consistency` on a config.json with a string `model` or `duration_s`",
        "one line naming config.json and the field (`model.spec`, `deviations[0].id`), exit 2",
        "tests/reliability/test_damaged_documents.py::test_a_block_of_the_wrong_type_is_one_line_naming_the_file_and_the_field",
    ),
    (
        "config-json-wrong-type-list",
        "the same on a config.json with a list `options` or a number `deviations`",
        "one line naming config.json and the field, exit 2",
        "tests/reliability/test_damaged_documents.py::test_a_block_of_the_wrong_type_is_one_line_naming_the_file_and_the_field",
    ),
    (
        "metrics-json-wrong-type",
        "the same on a metrics.json with a string `value`, a list `results` or a number `skipped`",
        "one line naming metrics.json and the field (`results.overall.p1.value`), exit 2",
        "tests/reliability/test_damaged_documents.py::test_a_block_of_the_wrong_type_is_one_line_naming_the_file_and_the_field",
    ),
    (
        "metrics-json-not-a-number",
        "`report`, `board` or `compare` on a metrics.json with a NaN or infinite value, interval end or chance",
        "one line naming the file and the field, never `nan †` beside the old interval, exit 2",
        "tests/reliability/test_damaged_documents.py::test_a_non_finite_number_in_metrics_json_is_refused_never_shown_with_an_interval",
    ),
    (
        "consistency-damaged-record",
        "`consistency` on a run whose items.jsonl has `ranked_ids` that are no list of strings (or a bad `uuid`)",
        "one line naming items.jsonl, the line and the field, exit 2",
        "tests/reliability/test_damaged_documents.py::test_a_damaged_record_in_consistency_is_one_line_naming_the_file_line_and_field",
    ),
    (
        "consistency-before-alignment",
        "`consistency` on a DLAMA run made before its records had the alignment fields (`uuid`, `ranked_ids`)",
        "one line: made before consistency alignment; re-run it to get it (not: DLAMA cannot be aligned)",
        "tests/reliability/test_damaged_documents.py::test_a_dlama_run_made_before_consistency_alignment_is_told_so_by_name",
    ),
    # --- issue 35: previews and interrupted runs (entries of this part go right below this line)
    # ---
    (
        "dry-run-resume-refused",
        "`run --dry-run --resume --out RUN` on a finished run with another `--limit`",
        "the refusal the resume gives, word for word (one line, exit 2); the run folder unchanged",
        "tests/reliability/test_previews_and_incomplete.py::test_a_dry_run_resume_of_a_finished_run_with_another_limit_gives_the_resumes_refusal",
    ),
    (
        "dry-run-resume-left",
        "`run --dry-run --resume --out RUN` on an interrupted run, or on a suite folder",
        "the probes left of those planned, the first of them shown; per config in a suite",
        "tests/reliability/test_previews_and_incomplete.py::test_a_dry_run_resume_of_an_interrupted_run_shows_the_probes_left",
    ),
    (
        "consistency-incomplete",
        "`consistency` of a finished run and an interrupted one",
        "a note `INCOMPLETE k/N` on the terminal and in consistency.md; `incomplete` in consistency.json",
        "tests/reliability/test_previews_and_incomplete.py::test_consistency_marks_an_interrupted_run_incomplete",
    ),
    (
        "suite-incomplete",
        "a suite stopped in a config, then `report SUITE`, or resumed for its other configs",
        "the config marked `INCOMPLETE k/N` in suite.md, suite.json and the terminal lines",
        "tests/reliability/test_previews_and_incomplete.py::test_a_suite_summary_marks_an_interrupted_config",
    ),
    (
        "resume-keeps-provenance",
        "a run killed after some probes, then `--resume` (and a finished run resumed again)",
        "metrics.json's `truncation` counts every probe the run holds, summed over its `processes`; config.json's "
        "duration sums them; processes.json keeps each process",
        "tests/reliability/test_previews_and_incomplete.py::test_a_run_killed_and_resumed_keeps_the_earlier_processes_provenance",
    ),
    # --- issue 38: sharded runs (entries of this part go right below this line) ---
    (
        "shard-bad-k-n",
        "`run --shard 5/4` (or `0/4`, `2`, `a/b`; `run(shard=...)` alike)",
        "one line: --shard takes K/N with 1 <= K <= N, before anything loads; nothing written",
        "tests/runner/test_shards.py::test_a_bad_shard_is_refused_before_anything_loads",
    ),
    (
        "merge-shard-refused",
        "`merge` with a shard missing, one given twice, one made with other settings or another N, or a folder run "
        "without --shard",
        "one line naming the shard and its folder (the setting that differs, with both values); nothing written",
        "tests/runner/test_shards.py::test_a_missing_repeated_mismatched_or_unfinished_shard_is_refused_naming_it",
    ),
    (
        "merge-shard-incomplete",
        "`merge` with a shard that was killed before it finished",
        "one line: the shard and its folder is `INCOMPLETE k/N`, resume it first; nothing written",
        "tests/runner/test_shards.py::test_a_missing_repeated_mismatched_or_unfinished_shard_is_refused_naming_it",
    ),
    (
        "merge-out-not-empty",
        "`merge ... --out RUN` into a folder that holds a run (or any files)",
        "one line: the merge writes a new run, pass a new or empty folder; the folder unchanged",
        "tests/runner/test_shards.py::test_the_cli_merges_and_refuses_in_one_line",
    ),
    (
        "shard-resume-other-shard",
        "a shard killed mid-run, resumed; or resumed with another shard's `--shard`",
        "the shard continues to the uninterrupted shard's records; another shard's resume refused, naming run.shard's "
        "two values",
        "tests/runner/test_shards.py::test_a_shard_resumes_on_its_own_and_never_in_another_shards_folder",
    ),
    (
        "served-echo-mismatch",
        "a served model whose echo has no generated token, offsets that go back, start late or run past "
        "the prompt, more tokens than the prompt has bytes, another prompt's text, or a usage that "
        "disagrees",
        "one line naming the server and the fault; nothing scored",
        ""
        "tests/engine/test_served_replies.py::test_an_echo_that_does_not_fit_the_prompt_is_refused_never_scored",
    ),
    (
        "served-other-model",
        "a served model whose server answers naming another model",
        "one line naming both models and the server; nothing used (a revision or dated snapshot of the "
        "asked name is the same model)",
        "tests/engine/test_served_replies.py::test_a_reply_naming_another_model_is_refused_naming_both",
    ),
    (
        "served-huge-reply",
        "a served model whose server sends a 30 MB reply to a two-token generation (with or without "
        "Content-Length, or compressed)",
        "one line naming the server and the bound, refused before it is parsed; nothing stored",
        "tests/engine/test_served_replies.py::test_a_reply_beyond_its_requests_bound_is_refused_unparsed",
    ),
    (
        "served-2m-logprobs",
        "a served model whose server sends 2 M log-probs for a 600-character prompt",
        "one line naming the server; refused unparsed",
        ""
        "tests/engine/test_served_replies.py::test_two_million_log_probs_for_a_600_character_prompt_are_refused",
    ),
    (
        "served-huge-reply-cli",
        "`run` against a server that sends a 30 MB reply",
        "exit 2, one line; nothing in items.jsonl",
        ""
        "tests/engine/test_served_replies.py::test_the_cli_refuses_a_huge_reply_in_one_line_and_writes_no_record",
    ),
    (
        "served-retry-after-long",
        "a served model whose server answers 429 with Retry-After: 20 under --request-timeout 0.5 "
        "--max-retries 1",
        "ends at once (well under the bound) with one line saying the server asked to wait 20 s and the "
        "--request-timeout that allows it",
        ""
        "tests/engine/test_served_replies.py::test_a_retry_after_beyond_the_requests_bound_ends_it_at_once_saying_how_to_allow_it",
    ),
    (
        "rates-file-wrong-shape",
        "a rates.json of the wrong shape in the cache folder ([], machines a list, not JSON, 200,000 deep)",
        "every estimate goes ahead without it; one warning naming the file; the next run rewrites it",
        "tests/test_throughput.py::test_a_rates_file_of_the_wrong_shape_is_ignored_with_a_warning_naming_it",
    ),
    (
        "rates-entry-damaged",
        "a rate in rates.json with seconds 0, string or negative tokens, NaN, a list, or a field missing",
        "that entry ignored with a warning naming it, the others used; no 'nan h'; the next write drops it",
        "tests/test_throughput.py::test_a_damaged_rate_is_ignored_by_name_and_the_good_ones_kept",
    ),
    (
        "rates-fixed-or-speed-damaged",
        "a fixed part (inf, a string) or a device speed (0 FLOP/s, a negative step) damaged in rates.json",
        "ignored by name with a warning; the rest kept",
        "tests/test_throughput.py::test_a_damaged_fixed_part_or_speed_is_ignored_by_name",
    ),
    (
        "rates-write-fails",
        "a rates.json write that fails (full disk)",
        "the file stays as it was; no staging file left",
        "tests/test_throughput.py::test_a_failed_write_leaves_the_rates_file_as_it_was_and_no_staging_file",
    ),
    (
        "rates-run-and-dry-run",
        "`run --dry-run` and a run with a damaged rates.json",
        "exit 0 with one warning line naming the file, not 'unexpected error'",
        ""
        "tests/test_throughput.py::test_a_run_and_a_dry_run_go_ahead_with_a_damaged_rates_file_saying_so_once",
    ),
    (
        "document-count-out-of-range",
        "report/board/compare/consistency of a run whose metrics.json has n: -5 (or config.json a "
        "negative planned.probes, rows, duration_s)",
        "one line naming the file and the field, exit 2",
        ""
        "tests/reliability/test_damaged_documents.py::test_a_number_out_of_its_range_is_one_line_naming_the_file_and_the_field",
    ),
    (
        "document-interval-reversed",
        "report/board/compare/consistency of a metrics.json with the interval [90, 10] around 75",
        "one line naming the file and the estimate, exit 2",
        ""
        "tests/reliability/test_damaged_documents.py::test_an_interval_that_does_not_hold_its_value_is_refused",
    ),
    (
        "document-headline-missing",
        "report/board/compare/consistency of a metrics.json without its headline estimate",
        "one line naming the file and the headline, exit 2",
        ""
        "tests/reliability/test_damaged_documents.py::test_a_missing_headline_estimate_is_refused_not_left_off",
    ),
    (
        "document-nested-too-deep",
        "report/board/compare of a run whose metrics.json or config.json is nested 200,000 (or a few "
        "hundred) deep",
        "one line naming the file, exit 2, no RecursionError",
        "tests/reliability/test_damaged_documents.py::test_a_document_nested_too_deep_is_one_line_naming_it",
    ),
    (
        "board-killed-leftover",
        "a board killed mid-build (leaves .NAME.building-*), then board again",
        "the next build removes it (not while another process holds the lock; other folders kept)",
        ""
        "tests/reliability/test_damaged_documents.py::test_a_board_killed_mid_build_leaves_nothing_after_the_next_build",
    ),
    (
        "shard-huge-n",
        "`run --shard 1/300000000` on a run of 15 units",
        "refused at once (fewer units than shards), no memory that grows with N",
        "tests/runner/test_shards.py::test_a_huge_shard_count_is_refused_before_any_work_that_grows_with_it",
    ),
    (
        "shard-odd-digits",
        "`--shard ²/4`, or a 5,000-digit N",
        "one short line: --shard takes K/N (ASCII digits); exit 2, nothing written",
        "tests/runner/test_shards.py::test_a_bad_shard_is_refused_before_anything_loads",
    ),
    (
        "merge-repeated-record",
        "`merge` with a record repeated in a shard's items.jsonl",
        "one line naming the shard's folder, the record and both lines; nothing written",
        ""
        "tests/reliability/test_merge_misuse.py::test_a_record_repeated_in_a_shard_is_refused_naming_the_shard_and_its_lines",
    ),
    (
        "merge-stray-record",
        "`merge` with another shard's line copied into a shard",
        "one line naming the shard, the record and its line (not INCOMPLETE, no --resume advice)",
        ""
        "tests/reliability/test_merge_misuse.py::test_a_stray_record_is_refused_naming_the_shard_and_the_record_not_as_incomplete",
    ),
    (
        "merge-two-suites",
        "`merge` of shards of two different suites (one planned maps_ru), or a config run in one suite "
        "shard only",
        "one line naming both folders and their configs; nothing written",
        ""
        "tests/reliability/test_merge_misuse.py::test_shards_of_two_different_suites_are_refused_naming_both",
    ),
    (
        "merge-wrong-typed-documents",
        'shard.json or suite.json of the wrong type (`planned` a string, `probes` "5", a list for an '
        "object) given to merge, report, board or a suite's --resume",
        "one line naming the file and the field, never a traceback",
        ""
        "tests/reliability/test_merge_misuse.py::test_a_wrong_typed_shard_or_suite_json_is_refused_naming_it_in_merge_report_board_and_resume",
    ),
    (
        "merge-out-in-shard",
        "`merge ... --out shards/1/merged`",
        "one line: --out lies in a run folder; the shard untouched",
        "tests/reliability/test_merge_misuse.py::test_merge_out_inside_a_shard_is_refused",
    ),
    (
        "merge-api-types",
        '`merge_runs("dir", out)`, `merge_runs([dir, None], out)`, `merge_runs(dirs, 5)`',
        "the library's error naming the argument, never read letter by letter",
        "tests/reliability/test_merge_misuse.py::test_merge_runs_refuses_wrong_types_as_the_cli_does",
    ),
    (
        "merge-full-disk",
        "a full disk midway through `merge`",
        "one line naming --out, 'the merge wrote nothing', no --resume; --out absent; merging again works",
        ""
        "tests/reliability/test_merge_misuse.py::test_a_full_disk_mid_merge_names_the_folder_writes_nothing_and_a_new_merge_works",
    ),
    (
        "merge-killed",
        "`merge` killed midway",
        "--out never half-written (its lock at most); merging again works and removes the leftover",
        ""
        "tests/reliability/test_merge_misuse.py::test_a_merge_killed_midway_leaves_no_half_written_out_and_a_new_merge_works",
    ),
    (
        "shard-report-label",
        "read a shard's own report.md (also of a `--limit` run)",
        "title and first line say 'shard K/N of the CONFIG run ..., not its result'; the limited one "
        "gives its share of the run's draw",
        ""
        "tests/reliability/test_merge_misuse.py::test_a_shards_report_says_it_is_a_shard_of_the_run_never_its_result",
    ),
    (
        "shard-board-label",
        "`board` with a shard (and the whole run)",
        "runs list, leaderboard cell and page say shard K/N; the whole run is shown first",
        ""
        "tests/reliability/test_merge_misuse.py::test_a_shards_board_entry_says_it_is_a_shard_and_the_whole_run_is_shown_first",
    ),
    (
        "query-credential-any-key",
        "gives `--base-url http://h/v1?passphrase=…&pass=…&pw=…&jwt=…` and builds or pushes a board",
        "every query value is blanked (`?pw=***`) in config.json, report.md and the board, only "
        "api-version/version/model/format/limit shown; a run recorded with the values still resumes",
        ""
        "tests/reliability/test_secrets.py::test_a_credential_under_any_query_key_is_recorded_and_shown_nowhere",
    ),
    (
        "scan-parquet-page",
        "pushes an export whose gzip-compressed Parquet page holds an environment secret",
        "refused naming the .parquet file (in its Parquet data); nothing uploaded",
        ""
        "tests/reliability/test_secrets.py::test_push_refuses_an_export_with_a_secret_in_a_compressed_parquet_page",
    ),
    (
        "scan-png-ztxt",
        "pushes a board whose figure has a token in a compressed PNG text chunk (zTXt)",
        "refused naming figures/…/NAME.png (in a PNG text chunk)",
        ""
        "tests/reliability/test_secrets.py::test_push_board_refuses_a_board_holding_a_secret_and_uploads_nothing",
    ),
    (
        "scan-encoded-secrets",
        "uploads a file holding a secret URL-encoded, base64-encoded (any alignment), split across a "
        "newline, or in a Parquet/PNG compressed chunk",
        "refused naming the file and how it is written (URL-encoded, base64-encoded, split across lines, …)",
        "tests/reliability/test_secrets.py::test_the_scan_reads_a_secret_however_it_is_encoded",
    ),
    (
        "scan-no-false-positive",
        "uploads ordinary Parquet, PNG, digests, base64 of binary data, percent-encoded URLs",
        "uploaded: nothing refused",
        "tests/reliability/test_secrets.py::test_ordinary_encoded_files_pass_the_scan",
    ),
    (
        "curation-quick-start",
        "copies docs/curation.md's quick start: curate the fixture, then run the pair",
        "facts written (exit 0) and the pair probed in ar and en by dlama_custom",
        "tests/test_docs.py::test_the_curation_quick_start_runs_as_written_and_its_pair_is_probed",
    ),
    (
        "curated-pair-verify-counts",
        "runs a full new curation of arab-west as dlama_arab_west, following the error's advice "
        "verify_counts=False",
        "--data-option verify_counts=false loads it; config.json and the Reproduce command keep it",
        ""
        "tests/curation/test_run_curated.py::test_a_new_curation_of_a_released_pair_runs_under_its_config_with_verify_counts_off",
    ),
    (
        "curated-pair-choice",
        "runs dlama_custom on a folder of two curated pairs, following the advice pair=",
        "--data-option pair=asia_west probes that pair",
        ""
        "tests/curation/test_run_curated.py::test_dlama_custom_picks_one_of_several_curated_pairs_by_a_data_option",
    ),
    (
        "data-option-refused",
        "gives --data-option verify_count=false, verify_counts=maybe or a prefix of no config",
        "one line naming the valid options or values, before anything loads",
        ""
        "tests/curation/test_run_curated.py::test_a_data_option_no_config_of_the_run_takes_is_refused_naming_the_valid_ones",
    ),
    (
        "compare-suites",
        "runs compare SUITE_A SUITE_B instead of one compare per config",
        "one report config by config, one Holm family over every row, a config of one suite named as "
        "left out",
        ""
        "tests/report/test_compare.py::test_two_suites_are_compared_config_by_config_in_one_report_with_one_holm_family",
    ),
    (
        "consistency-left-out",
        "runs consistency RUN_EN RUN_AR of two one-language DLAMA runs",
        "says RankC covers 14 of 40 facts, 26 left out because the candidate sets differ, and to probe "
        "both languages in one run",
        ""
        "tests/metrics/test_language_consistency.py::test_two_runs_of_one_language_each_say_which_facts_rankc_left_out_why_and_how_to_get_all",
    ),
    (
        "readme-five-exit-3",
        "runs the README's five-benchmark commands on the shipped DLAMA copy in a set -e script",
        "the README names the skip, exit 3 and the flag that makes it exit 0",
        ""
        "tests/test_readme.py::test_the_five_benchmark_commands_say_what_they_skip_on_the_shipped_data_and_how_to_exit_0",
    ),
    (
        "readme-five-exit-0",
        "adds the README's --data-option dlama_asia_west.languages=en on the shipped copy",
        "the suite skips nothing and exits 0",
        "tests/test_readme.py::test_the_documented_fix_makes_the_suite_exit_0_on_the_shipped_dlama_copy",
    ),
    (
        "flag-twice",
        "`--limit 2 --limit 3`, `--out a --output_path b`, `--model-args dtype=x --model_args dtype=y`",
        "refused naming both values",
        "tests/reliability/test_inputs.py::test_a_flag_given_twice_with_two_values_is_refused_naming_both",
    ),
    (
        "model-args-both-spellings",
        "`--model-args dtype=… --model_args revision=…`",
        "both pairs kept; the same value twice is fine",
        ""
        "tests/reliability/test_inputs.py::test_model_args_in_both_spellings_join_and_a_flag_twice_with_one_value_is_fine",
    ),
    (
        "number-malformed",
        "`--limit ٣`, `--concurrency ٤`, a 5,000-digit `--limit`, a 21-digit `--batch-tokens`",
        "one short line naming the flag and the value",
        "tests/reliability/test_inputs.py::test_a_number_not_in_ascii_digits_or_too_long_is_one_short_line",
    ),
    (
        "lm-eval-flag-no-counterpart",
        "`--log_samples`, `--num_fewshot 5`, `--apply_chat_template`, `-t`",
        "one line saying what to do instead",
        "tests/cli/test_cli.py::test_an_lm_eval_flag_without_a_counterpart_says_what_to_do_instead",
    ),
    (
        "info-not-warning",
        "a run's cost line; a resume notice",
        "printed as `culture-probe: …`, not `warning:`",
        "tests/cli/test_cli.py::test_information_prints_as_a_plain_line_not_a_warning",
    ),
    (
        "cost-notice-python",
        "`culture_probe.run(...)` in Python",
        "the cost line is an INFO log record of the `culture_probe` logger, no warning with a source line",
        "tests/runner/test_dryrun.py::test_a_run_says_what_it_will_cost_as_it_starts",
    ),
    (
        "api-wrong-kind-more",
        "`dry_run(c, None)`, `run(options=3)`, `run(out=3)`, `run_suite(out=[...])`, `load_run(None)`, "
        "`write_report(config=3)`",
        "a CultureProbeError in one line",
        ""
        "tests/reliability/test_api_types.py::test_a_public_call_given_a_wrong_kind_is_one_line_not_a_raw_error",
    ),
    (
        "metric-module-empty",
        '`load_metric("precision_at_k").compute(predictions=[], references=[])`',
        "a MetricInputError, not an IndexError inside evaluate",
        "tests/reliability/test_api_types.py::test_every_metric_module_given_empty_inputs_says_so",
    ),
    (
        "metric-module-wrong-kind",
        "a metric module given None, a string, a number or unequal lengths",
        "the formula's error naming the argument",
        "tests/reliability/test_api_types.py::test_a_metric_module_given_a_wrong_kind_names_the_argument",
    ),
    (
        "dryrun-byte-pieces",
        "a dry run of a GPT-2-style tokenizer on Arabic",
        "pieces shown as text or <0xNN>, never mojibake",
        "tests/runner/test_dryrun.py::test_byte_level_pieces_show_as_the_text_their_bytes_are",
    ),
    (
        "busy-machine-ray-start",
        "runs the suite while other jobs load both cores (load 8-9)",
        "the Ray recipe test starts Ray in a session of its own and runs again when Ray's fixed start "
        "deadline is missed; three misses are a skip naming Ray and the load, not a failure",
        ""
        "tests/runner/test_shards.py::test_the_ray_recipe_on_a_local_ray_instance_merges_into_the_one_process_run",
    ),
    (
        "planted-smoke-chance",
        "runs a planted MAPS smoke run, whose 2 not-planted items can both be right by chance",
        "the smoke run is checked for the split only; planted vs not planted is compared on 40 items "
        "(fails by chance 2**-24)",
        "tests/tasks/test_planted_draws.py::test_a_planted_run_scores_its_planted_items_above_the_others",
    ),
    (
        "planted-dlama-chance",
        "trains a model on arab facts and compares the halves",
        "12 unplanted facts against 6 planted: chance puts the west level with the arab half about "
        "2e-11 of the time",
        ""
        "tests/benchmarks/dlama/test_dlama_protocol.py::test_a_model_planted_with_arab_facts_scores_higher_on_the_arab_half",
    ),
    (
        "busy-machine-board-open",
        "opens a full DLAMA run's board page on a busy machine",
        "its 2 s bound is on the browser's CPU time, which load does not stretch",
        "tests/board/test_browser.py::test_a_full_dlama_run_opens_in_under_two_seconds",
    ),
    (
        "busy-machine-planted-cap",
        "builds the notebooks' planted models on a loaded machine",
        "training stops on its loss or steps, never on the clock (the cap is a 900 s hang guard): "
        "stored outputs match",
        "tests/test_notebooks.py::test_notebook_runs_and_its_stored_outputs_are_current",
    ),
)
