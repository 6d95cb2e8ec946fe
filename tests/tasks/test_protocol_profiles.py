"""The two protocol profiles (`--protocol default|upstream`): every deviation says how to get
upstream's behaviour or why there is none, the upstream profile is one consistent set of option
values per model kind, and a run records the profile and each deviation's side in config.json and
the report.
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from culture_probe.data.registry import list_benchmarks
from culture_probe.engine.types import MODEL_KINDS
from culture_probe.errors import UnknownNameError
from culture_probe.tasks import task_for
from culture_probe.tasks.deviations import Deviation

TASK_CLASSES = sorted(
    {task_for(entry.name) for entry in list_benchmarks()}, key=lambda cls: cls.__name__
)


@pytest.mark.parametrize("task_cls", TASK_CLASSES, ids=lambda cls: cls.__name__)
def test_each_deviation_has_an_upstream_side_or_says_why_not(task_cls) -> None:
    fields = {f.name for f in dataclasses.fields(task_cls.Options)}
    ids = [d.id for d in task_cls.deviations]
    assert len(ids) == len(set(ids))
    for deviation in task_cls.deviations:
        if deviation.upstream is None:
            assert deviation.upstream_note, f"{deviation.id}: no upstream values and no reason"
        else:
            assert deviation.upstream and set(deviation.upstream) <= fields, deviation.id
            assert set(deviation.upstream_kinds) <= set(MODEL_KINDS), deviation.id
            assert deviation.side(task_cls.Options()) == "default", (
                f"{deviation.id}: the default is upstream's"
            )


@pytest.mark.parametrize("task_cls", TASK_CLASSES, ids=lambda cls: cls.__name__)
def test_the_upstream_profile_is_one_consistent_set_of_options_per_kind(task_cls) -> None:
    assert task_cls.profile("default") == {}
    # the union over kinds checks a suite's options before the model loads
    task_cls.options_for("upstream", {})
    for kind in MODEL_KINDS:
        asked: dict[str, tuple[str, object]] = {}
        for deviation in task_cls.deviations:
            if deviation.upstream and kind in deviation.upstream_kinds:
                for key, value in deviation.upstream.items():
                    assert asked.setdefault(key, (deviation.id, value))[1] == value, (
                        f"{deviation.id} and {asked[key][0]} ask {key} for different values"
                    )
        # the profile's values are valid options
        options = task_cls.options_for("upstream", {}, kind)
        for deviation in task_cls.deviations:
            if deviation.upstream and kind in deviation.upstream_kinds:
                assert deviation.side(options) == "upstream", deviation.id
    with pytest.raises(UnknownNameError, match="Unknown protocol 'paper'"):
        task_cls.profile("paper")


def test_a_users_option_wins_over_the_profile() -> None:
    task_cls = task_for("fmlama_en")
    profile = task_cls.profile("upstream", "masked")
    key = next(iter(profile))
    other = next(
        v
        for v in (None, 3, "gold", True, False, 0)
        if v != profile[key] and isinstance(v, type(getattr(task_cls.Options(), key)))
    )
    assert getattr(task_cls.options_for("upstream", {key: other}, "masked"), key) == other


def test_side_and_record_name_how_to_switch() -> None:
    @dataclasses.dataclass(frozen=True)
    class Options:
        cap: int | None = None

    with_side = Deviation("Z1", "No cap (upstream: 10).", upstream={"cap": 10})
    without = Deviation("Z2", "Storage only.", upstream_note="changes no number")
    assert with_side.side(Options()) == "default" and with_side.side(Options(cap=10)) == "upstream"
    both = Deviation("Z3", "Two switches.", upstream={"cap": 10, "other": True})

    @dataclasses.dataclass(frozen=True)
    class Two:
        cap: int | None = None
        other: bool = False

    assert both.side(Two(cap=10)) == "partial" and both.side(Two(cap=10, other=True)) == "upstream"
    assert with_side.record(Options(), "causal")["upstream"] == "cap=10"
    masked_only = Deviation("Z4", "Masked only.", upstream={"cap": 10}, upstream_kinds=("masked",))
    assert masked_only.record(Options(), "causal")["upstream"].startswith(
        "no upstream side for causal models"
    )
    assert with_side.record(Options(cap=10)) == {
        "id": "Z1",
        "description": "No cap (upstream: 10).",
        "when": "every run",
        "side": "upstream",
        "upstream": "cap=10",
    }
    assert without.record(Options())["upstream"] == "no upstream side: changes no number"


def test_a_run_records_the_profile_and_each_side(xfakt_release, tmp_path) -> None:
    from test_xfakt_protocol import rows_of, tiny_chat_scorer

    from culture_probe.runner import run

    rows = rows_of(xfakt_release, "New York", languages=("en", "hi"))
    for protocol in ("default", "upstream"):
        run(
            "xfakt_factual_recall",
            tiny_chat_scorer(xfakt_release),
            rows=rows,
            judge="string",
            max_new_tokens=4,
            out=tmp_path / protocol,
            progress=False,
            data_dir=str(xfakt_release),
            protocol=protocol,
        )
    configs = {
        p: json.loads((tmp_path / p / "config.json").read_text()) for p in ("default", "upstream")
    }
    assert (
        configs["upstream"]["run"]["protocol"] == "upstream"
        and configs["default"]["run"]["protocol"] == "default"
    )
    sides = {p: {d["id"]: d["side"] for d in c["deviations"]} for p, c in configs.items()}
    switched = {i for i, side in sides["upstream"].items() if side == "upstream"}
    assert switched and not {i for i, side in sides["default"].items() if side == "upstream"}
    report = (tmp_path / "upstream" / "report.md").read_text()
    assert "Protocol profile: **upstream**" in report
    # the command repeats the profile
    assert "--protocol upstream" in report.split("## Reproduce")[1]
    for deviation_id in switched:
        assert f"| {deviation_id} |" in report


def switched(result) -> set[str]:
    """The deviations that took upstream's side in a run."""
    return {d["id"] for d in result.config.deviations if d["side"] == "upstream"}


def records_of(result) -> list[dict]:
    return [dict(r.fields) | {"id": r.item_id, "tag": r.tag} for r in result.records]


def test_upstream_and_default_runs_differ_exactly_where_the_table_says(
    xfakt_release, camel_release
) -> None:
    """Two runs of each protocol, default and upstream, on the same model and items: where no
    deviation switched side (CAMeL: no upstream code), records and metrics are equal; where only
    X-FaKT's statistics switched (X8, rank mode), the records and the scores are equal and only the
    std and the t-test move.
    """
    from test_camel_protocol import tiny_scorer
    from test_xfakt_protocol import tiny_chat_scorer

    from culture_probe.data.registry import load_benchmark
    from culture_probe.runner import run

    camel_rows = [
        r
        for r in load_benchmark("camel_co_prompts", data_dir=str(camel_release))["test"]
        if r["entity_type"] == 3
    ][:2]
    camel = {
        p: run(
            "camel_co_prompts",
            tiny_scorer(str(camel_release), "bert"),
            rows=camel_rows,
            n_runs=1,
            progress=False,
            data_dir=str(camel_release),
            protocol=p,
        )
        for p in ("default", "upstream")
    }
    assert not switched(camel["upstream"])
    assert records_of(camel["default"]) == records_of(camel["upstream"])
    assert camel["default"].metrics == camel["upstream"].metrics

    from test_xfakt_protocol import recall_rows

    # cells of several items
    rows = [r for r in recall_rows(xfakt_release) if r["language"] in ("en", "ar", "fr")]
    xfakt = {
        p: run(
            "xfakt_factual_recall",
            tiny_chat_scorer(xfakt_release),
            rows=rows,
            mode="rank",
            progress=False,
            data_dir=str(xfakt_release),
            protocol=p,
        )
        for p in ("default", "upstream")
    }
    assert switched(xfakt["upstream"]) == {"X8"} and not switched(xfakt["default"])
    assert records_of(xfakt["default"]) == records_of(xfakt["upstream"])
    default, upstream = xfakt["default"].metrics, xfakt["upstream"].metrics
    moved = {key for key in default if default[key] != upstream[key]}
    assert moved and moved <= {
        "assoc_error",
        "non_assoc_error",
        "t_statistic",
        "p_value",
        "tiers",
        "results",
        "round_statistics",
    }
    for key in ("frs", "kts", "xfakt", "mu_assoc", "mu_non", "error_table"):
        assert default[key] == upstream[key], key


def test_the_profile_sets_only_what_concerns_the_run() -> None:
    """Given the config and the kind, options of modes the run does not use are left alone (no inert
    option in config.json, the Reproduce command, or a resume check), and a served model gets no
    token-level upstream side.
    """
    dlama = task_for("dlama_arab_west")
    ranked = dlama.options_for("upstream", {}, "causal", config="dlama_arab_west")
    generated = dlama.options_for(
        "upstream", {"mode": "generate"}, "causal", config="dlama_arab_west"
    )
    # D4 concerns generation only
    assert ranked.generate_first_n is None and generated.generate_first_n == 3
    xfakt = task_for("xfakt_factual_recall")
    assert (
        xfakt.options_for("upstream", {}, "causal", config="xfakt_factual_recall").double_bos
        is True
    )
    served = xfakt.options_for("upstream", {}, "causal", config="xfakt_factual_recall", served=True)
    # X1 needs the model in process
    assert served.double_bos is False and served.round_statistics is True


def test_the_reproduce_command_keeps_an_option_the_user_unset_under_the_upstream_profile() -> None:
    from culture_probe.record import RunRecord
    from culture_probe.report.markdown import reproduce

    config = {
        "config": "fmlama_en",
        "model": {"spec": "m"},
        "run": {"protocol": "upstream"},
        "options": {"max_candidate_tokens": None, "ap_denominator": "ranked"},
    }
    command = reproduce(RunRecord.from_json(config))
    assert "--protocol upstream" in command and "--option max_candidate_tokens=none" in command
    default = RunRecord.from_json({**config, "run": {"protocol": "default"}})
    assert "max_candidate_tokens" not in reproduce(default)


def test_a_run_cannot_resume_under_the_other_profile(xfakt_release, tmp_path) -> None:
    from test_xfakt_protocol import rows_of, tiny_chat_scorer

    from culture_probe.errors import CultureProbeError
    from culture_probe.runner import run

    rows = rows_of(xfakt_release, "New York", languages=("en",))
    keywords = dict(
        rows=rows,
        judge="string",
        max_new_tokens=4,
        out=tmp_path / "run",
        progress=False,
        data_dir=str(xfakt_release),
    )
    run("xfakt_factual_recall", tiny_chat_scorer(xfakt_release), **keywords)
    with pytest.raises(CultureProbeError, match="run.protocol was 'default' and is now 'upstream'"):
        run(
            "xfakt_factual_recall",
            tiny_chat_scorer(xfakt_release),
            resume=True,
            protocol="upstream",
            **keywords,
        )
