"""Golden runs: one small run per benchmark and mode, on stored rows and tiny random models, whose
records and metrics were written before the pipeline refactor of issue 11 and must not move (a
refactor guard, not proof of correctness: that comes from the protocol tests' references).

`python tests/golden/cases.py [BENCH ...] --why "..."` rewrites the golden runs on the stored rows
(`--reselect` draws the rows anew from the mirror); do it only when a change is meant to move
numbers. The reason is appended to each file's `changes` (and belongs in the commit message too).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Case:
    """One golden run: a config, its rows (stored in the golden file), a tiny model and protocol
    options.
    """

    name: str
    config: str
    arch: str
    options: dict[str, Any] = field(default_factory=dict)
    chat_template: bool = False
    # X-FaKT's LLM judge, a tiny model too (rotary: its long rubric fits)
    judge_arch: str | None = None


CASES = {
    "dlama": [
        Case("masked", "dlama_arab_west", "bert"),
        Case("causal", "dlama_arab_west", "gpt2"),
        Case(
            "generate",
            "dlama_arab_west",
            "gpt2",
            {"mode": "generate", "max_new_tokens": 6},
            chat_template=True,
        ),
    ],
    "fmlama": [
        Case("masked_en", "fmlama_en", "bert"),
        Case("causal_en", "fmlama_en", "gpt2"),
        Case("seq2seq_en", "fmlama_en", "t5"),
        Case(
            "chat_en",
            "fmlama_en",
            "gpt2",
            {"mode": "chat", "chat_max_new_tokens": 6},
            chat_template=True,
        ),
        Case("masked_zh", "fmlama_zh", "bert"),
    ],
    "camel": [
        Case("masked", "camel_co_prompts", "bert", {"n_runs": 2, "sample_size": 4}),
        Case("causal", "camel_co_prompts", "gpt2", {"n_runs": 2, "sample_size": 4}),
        Case(
            "causal_shots",
            "camel_co_prompts",
            "gpt2",
            {"n_runs": 2, "sample_size": 4, "n_shot": 1, "culture_token": True},
        ),
        Case(
            "seq2seq",
            "camel_co_prompts",
            "t5",
            {"n_runs": 1, "sample_size": 3, "seq2seq_style": "plain"},
        ),
    ],
    "xfakt": [
        Case(
            "generate",
            "xfakt_factual_recall",
            "gpt2",
            {"judge": "string", "max_new_tokens": 6},
            chat_template=True,
        ),
        Case("rank", "xfakt_factual_recall", "gpt2", {"mode": "rank"}, chat_template=True),
        Case(
            "judged",
            "xfakt_counter_factual",
            "gpt2",
            {"judge": "llm", "max_new_tokens": 6, "judge_max_new_tokens": 6},
            chat_template=True,
            judge_arch="llama",
        ),
    ],
    "maps": [
        Case("causal_en", "maps_en", "gpt2"),
        Case("masked_en", "maps_en", "bert"),
        Case("seq2seq_en", "maps_en", "t5"),
        Case("few_shot_en", "maps_en", "gpt2", {"n_shot": 2, "memorisation": False}),
        Case("causal_zh", "maps_zh", "gpt2"),
    ],
}


# ---------------------------------------------------------------- rows


def _pick(rows: list[dict[str, Any]], key, per: int) -> list[dict[str, Any]]:
    """The first `per` rows of each value of `key(row)`, in row order."""
    seen: dict[Any, int] = {}
    out = []
    for row in rows:
        k = key(row)
        if seen.get(k, 0) < per:
            seen[k] = seen.get(k, 0) + 1
            out.append(row)
    return out


def select_rows(config: str, mirror: Path) -> list[dict[str, Any]]:
    """A small, varied subset of a config's real rows (only used when the golden files are
    written).
    """
    from culture_probe.data.registry import load_benchmark

    data_dir = {"dlama": mirror / "manual/dlama/dlama-v1", "maps": mirror / "manual/maps"}.get(
        config.split("_")[0]
    )
    rows = [dict(r) for r in load_benchmark(config, data_dir=data_dir)["test"]]
    if config.startswith("dlama"):
        return _pick(rows, lambda r: (r["language"], r["predicate"], r["culture"]), 1)
    if config.startswith("fmlama"):
        return _pick(rows, lambda r: r["group"], 2)[:8]
    if config.startswith("camel"):
        return _pick(rows, lambda r: r["entity_type"], 1)
    if config == "xfakt_factual_recall":
        chosen = {r["entity_idx"] for r in _pick(rows, lambda r: r["country"], 1)}
        return [r for r in rows if r["entity_idx"] in chosen and r["template_id"] == "T1"][:169]
    if config.startswith("xfakt"):
        return _pick(rows, lambda r: r["language"], 2)
    return rows[:6] if config == "maps_en" else rows[:4]


# ---------------------------------------------------------------- models


def corpus(rows: list[dict[str, Any]]) -> list[str]:
    """Every string in the rows (what the tiny tokenizers are trained on)."""
    out: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, str):
            out.append(value)
        elif isinstance(value, dict):
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)

    walk(rows)
    return out


def build_model(
    path: Path, arch: str, rows: list[dict[str, Any]], chat_template: bool, positions: int = 512
) -> Path:
    """A tiny random model of `arch` with a tokenizer trained on the rows' strings (`positions`: a
    decoder's).
    """
    from culture_probe.models.planted_benchmarks import CHAT_TEMPLATE
    from culture_probe.models.tiny import ARCH_KIND, save_tiny, train_tokenizer

    family = {"gpt2": "bpe", "bert": "wordpiece", "t5": "metaspace", "llama": "metaspace"}[arch]
    tokenizer = train_tokenizer(corpus(rows), family, vocab_size=800, model_kind=ARCH_KIND[arch])
    if chat_template:
        tokenizer.chat_template = CHAT_TEMPLATE
    return save_tiny(path, arch, tokenizer, seed=0, positions=positions)


def run_case(case: Case, rows: list[dict[str, Any]], workdir: Path, mirror: Path) -> dict[str, Any]:
    """Records and metrics of one golden run (models built under `workdir`)."""
    import culture_probe

    model = build_model(workdir / f"{case.config}-{case.name}", case.arch, rows, case.chat_template)
    options = dict(case.options)
    if case.judge_arch:
        # positions for the whole rubric: generation cuts longer prompts now (issue 16); rotary
        # weights do not depend on the count, so the golden judge is the same model as before
        options["judge_model"] = str(
            build_model(
                workdir / f"{case.config}-{case.name}-judge",
                case.judge_arch,
                rows,
                True,
                positions=4096,
            )
        )
    # MAPS: few-shot rows too
    data_dir = mirror / "manual/maps" if case.config.startswith("maps") else None
    result = culture_probe.run(
        case.config, str(model), rows=rows, data_dir=data_dir, progress=False, **options
    )
    return {
        "records": [r if isinstance(r, dict) else r.to_json() for r in result.records],
        "metrics": result.metrics,
    }


def golden_path(bench: str) -> Path:
    return HERE / f"{bench}.json"


def write(bench: str, mirror: Path, workdir: Path, why: str, reselect: bool = False) -> None:
    """Run every case of `bench` on its stored rows (or on rows selected anew: `reselect`, or no
    golden file yet) and write its golden file; keeping the rows keeps every number a change does
    not mean to move. `why` is added to the file's `changes`, so the file itself says what moved its
    numbers and why.
    """
    path = golden_path(bench)
    old = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    rows = {} if reselect else old.get("rows", {})
    for case in CASES[bench]:
        rows.setdefault(case.config, select_rows(case.config, mirror))
    out = {
        "changes": [*old.get("changes", []), why],
        "rows": rows,
        "runs": {c.name: run_case(c, rows[c.config], workdir, mirror) for c in CASES[bench]},
    }
    golden_path(bench).write_text(
        json.dumps(out, ensure_ascii=False, indent=1, sort_keys=True) + "\n", encoding="utf-8"
    )


if __name__ == "__main__":
    import argparse
    import tempfile

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    mirror_root = Path(
        os.environ.get("CULTURE_PROBE_MIRROR") or HERE.parents[2] / "shared" / "mirror"
    )
    parser = argparse.ArgumentParser(
        description="Rewrite golden runs (only when a change is meant to move them)."
    )
    parser.add_argument(
        "benches", nargs="*", help=f"benchmarks (default: all of {', '.join(CASES)})"
    )
    parser.add_argument(
        "--why", required=True, help="what moved and why: kept in the golden file's `changes`"
    )
    parser.add_argument(
        "--reselect", action="store_true", help="draw the rows anew from the mirror"
    )
    args = parser.parse_args()
    if unknown := set(args.benches) - set(CASES):
        parser.error(f"no golden runs for {', '.join(sorted(unknown))}")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.benches or CASES:
            write(name, mirror_root, Path(tmp), args.why, reselect=args.reselect)
            print(f"wrote {golden_path(name)}")
