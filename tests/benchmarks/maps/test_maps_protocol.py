"""MAPS protocol: the upstream prompts as exact strings (reasoning, negative variants,
memorisation), the success rules, the spec's worked examples through the task, the memorisation
budget, the culture gap, and runs with tiny models. MAPS is gated: tests use synthetic rows and
`maps_release` (tests/releases.py: made-up rows in the release's xlsx layout), and the mirror only
when present (the same runs on the released rows, a planted model).
"""

from __future__ import annotations

import json
from contextlib import nullcontext
from functools import cache

import numpy as np
import pytest

from culture_probe.benchmarks.maps.report import sections
from culture_probe.benchmarks.maps.task import (
    MapsTask,
    culture_gap_study,
    delta_en_study,
    memorisation_prompts,
    memorised,
    reasoning_prompt,
    split_proverb,
)
from culture_probe.data.registry import load_benchmark
from culture_probe.engine import Scorer
from culture_probe.engine.types import CandidateScores
from culture_probe.errors import CultureProbeError, UnknownNameError
from culture_probe.loading import load_task
from culture_probe.models.tiny import tiny_model, train_tokenizer
from culture_probe.runner import run

ROW = {
    "id": "maps_en-test-0000",
    "language": "en",
    "proverb": "Look before you  leap",
    "conversation": 'Person 1: "Should I sign now?" Person 2: "Look before you leap."',
    "answer1": "Think first.",
    "answer2": "Do not think first.",
    "is_figurative": 1.0,
    "label": 0,
}


def rows(labels, figurative=(1, 1, 0, 0)):
    return [
        {**ROW, "id": f"r{i}", "label": label, "is_figurative": bool(fig)}
        for i, (label, fig) in enumerate(zip(labels, figurative, strict=True))
    ]


# ---------------------------------------------------------------- prompts


def test_reasoning_prompt_is_the_upstream_pattern():
    assert reasoning_prompt(ROW) == (
        "question: what does the person mean by the proverb?\n"
        "proverb:'look before you leap'\n"
        'context: person 1: "should i sign now?" person 2: "look before you leap."\n'
        "choices: a: think first. b: do not think first.\n"
        "answer:"
    )


@pytest.mark.parametrize(
    "variant,line",
    [
        ("neg", "question: what does the person not mean by the proverb?"),
        ("neg1", "question: which answer is contrary to what the person means by the proverb?"),
        (
            "neg2",
            "question: which answer is impossible as the interpretation of what the person means by the proverb?",
        ),
        ("neg3", "question: pick the opposite answer to what the person means by the proverb."),
        ("neg4", "question: pick the wrong answer to what the person means by the proverb."),
    ],
)
def test_negative_variants_replace_the_question_line(variant, line):
    first, rest = reasoning_prompt(ROW, variant).split("\n", 1)
    assert first == line and rest == reasoning_prompt(ROW).split("\n", 1)[1]


def test_memorisation_prompts_and_splits():
    assert memorisation_prompts("An apple a day keeps the doctor away", "en") == [
        "proverb: an apple a day keeps the doctor",
        "complete this proverb: an apple a day keeps the doctor",
        "finish the proverb: an apple a day keeps the doctor",
        "what's missing at the end of this proverb: an apple a day keeps the doctor",
        "what's the last word of this proverb: an apple a day keeps the doctor",
    ]
    assert split_proverb("一石二鸟", "zh") == ("一石二", "鸟")
    assert split_proverb("একা", "bn") == ("", "একা")  # no space: empty front (spec 5, edge cases)
    assert memorisation_prompts("একা", "bn")[0] == "proverb: "


def test_success_rules():
    assert memorised(" away, says grandma", "an apple a day keeps the doctor away", "en")
    assert not memorised(" far away", "an apple a day keeps the doctor away", "en")
    # punctuation-insensitive (M6a-c)
    assert memorised(" nicht", "Hunde, die bellen, beißen nicht!", "de")
    assert memorised("鸟。", "一石二鸟", "zh")
    assert memorised(" away", "an apple a day keeps the doctor away", "en", match="substring")
    assert not memorised(" nicht", "Hunde, die bellen, beißen nicht!", "de", match="substring")


# ---------------------------------------------------------------- the spec's worked examples


class LetterScorer:
    """Engine stand-in: letter log-probs per item (spec 5), and fixed generations."""

    kind = "causal"
    identity = {"name_or_path": "letters"}

    def __init__(self, letters, outputs=None, target_tokens=1):
        self.letters, self.outputs, self.target_tokens, self.budgets = (
            letters,
            outputs or {},
            target_tokens,
            [],
        )
        self.calls = 0

    def score(self, requests, options=None):
        out = []
        for request in requests:
            if request.candidates == ("a", "b"):
                self.calls += 1
                out.append(
                    CandidateScores(
                        ("a", "b"), np.array(self.letters[self.calls - 1]), np.array([1, 1])
                    )
                )
            else:
                out.append(
                    CandidateScores(
                        request.candidates, np.array([-1.0]), np.array([self.target_tokens])
                    )
                )
        return out

    def generate(self, prompts, options):
        self.budgets.append(options.max_new_tokens)
        return [self.outputs.get(p, " nothing") for p in prompts]


LETTERS = [(-0.9, -1.3), (-1.1, -0.4), (-0.7, -0.7), (-2.0, -1.5)]


def test_worked_example_accuracy_negative_and_figurative_split():
    data = rows(["a", "b", "b", "a"])
    result = run("maps_en", LetterScorer(LETTERS), rows=data, memorisation=False, progress=False)
    assert [r["pred"] for r in result.records] == ["a", "b", "a", "b"]  # the tie goes to a
    assert result.metrics["accuracy"] == 50.0
    assert result.metrics["subsets"]["figurative"]["accuracy"] == 100.0
    assert result.metrics["subsets"]["non_figurative"]["accuracy"] == 0.0
    negative = run(
        "maps_en",
        LetterScorer(LETTERS),
        rows=data,
        memorisation=False,
        question="neg",
        progress=False,
    )
    assert negative.metrics["accuracy"] == 50.0 and [r["correct"] for r in negative.records] == [
        0,
        0,
        1,
        1,
    ]


def test_memorisation_union_budget_and_breakdown():
    data = rows(["a", "b", "b", "a"])
    prompts = memorisation_prompts(ROW["proverb"], "en")
    scorer = LetterScorer(LETTERS, outputs={prompts[1]: " leap now"}, target_tokens=3)
    result = run("maps_en", scorer, rows=data, progress=False)
    assert set(scorer.budgets) == {5}  # max(4, T + 2) with T = 3
    mem = result.metrics["memorisation"]
    assert mem["union"] == 100.0 and mem["per_template"] == [0.0, 100.0, 0.0, 0.0, 0.0]
    assert result.metrics["subsets"]["memorised"]["n"] == 4
    compat = LetterScorer(LETTERS, target_tokens=3)
    run("maps_en", compat, rows=data, mem_max_new_tokens=4, mem_match="substring", progress=False)
    assert set(compat.budgets) == {4}  # the upstream causal budget (M6a)


def test_report_rounds_percentages_as_metrics_json_and_shows_their_n():
    # 2/3 is shown as 66.67 (the one rounding rule of reports), not truncated to 66.66 as the paper
    # printed it
    proverbs = ("Look before you leap", "Haste makes waste", "Practice makes perfect")
    data = [
        {**ROW, "id": f"r{i}", "proverb": p, "label": label}
        for i, (p, label) in enumerate(zip(proverbs, ("a", "a", "b"), strict=True))
    ]
    outputs = {memorisation_prompts(p, "en")[0]: f" {p.split()[-1]}" for p in proverbs[:2]}
    result = run(
        "maps_en", LetterScorer([(-0.5, -1.0)] * 3, outputs=outputs), rows=data, progress=False
    )
    reasoning, memorisation = sections(result.config, result.records, result.metrics)
    assert (
        reasoning.tables[0].rows[0][:2] == ("all", "66.67 †")
        and reasoning.tables[0].rows[0][-1] == 3
    )
    assert memorisation.tables[0].rows[0] == ("union over templates", "66.67 (n=3) †")
    assert memorisation.text.endswith("memorised 100.00 (n=2) †, not_memorised 0.00 (n=1) †")


def test_culture_gap_from_four_runs():
    gaps = culture_gap_study(
        {"maps_zh": 70.0, "maps_en": 80.0, "maps_zh_en_mt": 60.0, "maps_zh_en_ht": 72.5}
    )
    assert gaps == {"culture_gap": 7.5, "language_gap": 12.5}
    with pytest.raises(CultureProbeError, match="missing maps_en_zh_ht"):
        culture_gap_study({"maps_en": 1.0, "maps_zh": 1.0, "maps_en_zh_mt": 1.0}, "en_zh")


def test_delta_en_from_runs():
    # the paper's Table 11 (Llama-2 13B): En 78.68, de->en MT 73.35 (Δ 5.33), bn->en MT 61.76 (Δ
    # 16.92)
    runs = {
        "maps_en": 78.68,
        "maps_de_en_mt": 73.35,
        "maps_bn_en_mt": 61.76,
        "maps_zh": 50.0,
        "maps_zh_en_ht": 1.0,
    }
    assert delta_en_study(runs) == {"de": pytest.approx(5.33), "bn": pytest.approx(16.92)}
    with pytest.raises(
        CultureProbeError, match="needs the accuracy of maps_en and of at least one"
    ):
        delta_en_study({"maps_de_en_mt": 73.35})
    with pytest.raises(CultureProbeError, match="got maps_en, maps_zh_en_ht"):
        delta_en_study({"maps_en": 78.68, "maps_zh_en_ht": 70.0})


class MaskStub(LetterScorer):
    """A masked-model stand-in: a fixed best piece per prompt at the mask; it cannot generate."""

    kind = "masked"

    def __init__(self, letters, pieces):
        super().__init__(letters)
        self.pieces, self.asked = pieces, []

    def fill_mask(self, lefts, options):
        self.asked += [(left, options.sep) for left in lefts]
        return [[(self.pieces.get(left, "nothing"), -1.0)] for left in lefts]

    def generate(self, prompts, options):
        raise AssertionError("a masked model is never asked to generate")


def test_masked_models_complete_the_proverb_at_one_mask_per_template():
    prompts = memorisation_prompts(ROW["proverb"], "en")
    # a piece that is only part of the word
    scorer = MaskStub(LETTERS, {prompts[2]: "Leap", prompts[3]: "lea"})
    result = run("maps_en", scorer, rows=rows(["a", "b", "b", "a"]), progress=False)
    # spec 4.3: prompt + " <mask>"
    assert sorted(set(scorer.asked)) == sorted((p, " ") for p in prompts)
    mem = result.metrics["memorisation"]
    assert mem["union"] == 100.0 and mem["per_template"] == [0.0, 0.0, 100.0, 0.0, 0.0]
    zh = {**ROW, "id": "z", "language": "zh", "proverb": "一寸光阴一寸金"}
    zh_prompts = memorisation_prompts(zh["proverb"], "zh")
    scorer = MaskStub(LETTERS, {zh_prompts[0]: "金"})
    result = run("maps_zh", scorer, rows=[zh], progress=False)
    assert {sep for _, sep in scorer.asked} == {""} and result.metrics["memorisation"][
        "union"
    ] == 100.0
    with pytest.raises(
        CultureProbeError, match=r"mem_max_new_tokens must be a whole number >= 1 \(or None\)"
    ):
        MapsTask.Options(mem_max_new_tokens=0)


def test_native_memorisation_templates_reproduce_upstream_xlmr(tmp_path):
    # M5: upstream XLM-R asked in the proverb's own language; the paper (and the default) asks in
    # English.
    de = {**ROW, "id": "d", "language": "de", "proverb": "Hunde, die bellen, beißen nicht"}
    native = memorisation_prompts(de["proverb"], "de", "native")
    assert native[0] == "sprichwort: hunde, die bellen, beißen"
    assert native[4] == "was ist das letzte wort dieses sprichworts: hunde, die bellen, beißen"
    assert memorisation_prompts(de["proverb"], "de")[0] == "proverb: hunde, die bellen, beißen"
    # full-width colon: no space (upstream patterns.py)
    zh = memorisation_prompts("一寸光阴一寸金", "zh", "native")
    assert zh[:2] == ["谚语: 一寸光阴一寸", "补全这个谚语：一寸光阴一寸"]
    scorer = MaskStub(LETTERS, {native[1]: "nicht"})
    result = run(
        "maps_de",
        scorer,
        rows=[de],
        out=tmp_path / "run",
        progress=False,
        mem_template_lang="native",
    )
    assert sorted(left for left, _ in scorer.asked) == sorted(native)
    assert result.metrics["memorisation"]["per_template"] == [0.0, 100.0, 0.0, 0.0, 0.0]
    assert (
        json.loads((tmp_path / "run" / "config.json").read_text())["protocol"]["mem_template_lang"]
        == "native"
    )
    assert "Vervollständige dieses Sprichwort" in (tmp_path / "run" / "report.md").read_text()
    with pytest.raises(UnknownNameError, match="mem_template_lang"):
        MapsTask("maps_en", MapsTask.Options(mem_template_lang="local"), kind="masked")
    with pytest.raises(CultureProbeError, match="no templates for language 'fr'"):
        memorisation_prompts("Qui vivra verra", "fr", "native")


def test_masked_memorisation_reads_the_argmax_piece_of_a_real_model():
    import torch

    proverbs = ("Look before you leap", "Haste makes waste", "Practice makes perfect")
    data = [{**ROW, "id": f"r{i}", "proverb": p} for i, p in enumerate(proverbs)]
    texts = [reasoning_prompt(r) for r in data] + [
        p for r in data for p in memorisation_prompts(r["proverb"], "en")
    ]
    tok = train_tokenizer(texts, "wordpiece", vocab_size=200, model_kind="masked")
    model = tiny_model("bert", tok, layers=1, hidden=32)
    result = run("maps_en", Scorer(model, tok), rows=data, progress=False)
    outputs = {(r["id"], r["template"]): r["output"] for r in result.records if "output" in r}
    assert len(outputs) == 15
    special = tok.all_special_ids
    # reference: the spec's input text, one full forward, the argmax outside special tokens
    for row in data:
        for t, prompt in enumerate(memorisation_prompts(row["proverb"], "en"), 1):
            ids = tok(prompt + " " + tok.mask_token, return_tensors="pt")["input_ids"]
            with torch.no_grad():
                logits = model(input_ids=ids).logits[0, ids[0].tolist().index(tok.mask_token_id)]
            logits[special] = float("-inf")
            assert outputs[row["id"], t] == tok.decode(
                [int(logits.argmax())], skip_special_tokens=True
            )


# ---------------------------------------------------------------- runs with tiny models


@cache
def split_rows(data_dir: str, config: str, split: str = "test") -> tuple[dict, ...]:
    """The rows of one split of `config` from a MAPS folder."""
    return tuple(load_benchmark(config, data_dir=data_dir)[split])


def maps_folder(source: str, request: pytest.FixtureRequest) -> str:
    """The MAPS folder of `source`: the `maps_release` fixture, or the mirror's copy (skipped
    without the mirror).
    """
    root = request.getfixturevalue(source)
    return str(root if source == "maps_release" else root / "manual" / "maps")


@cache
def tiny_scorer(data_dir: str, arch: str) -> Scorer:
    kind, family = {
        "gpt2": ("causal", "bpe"),
        "bert": ("masked", "wordpiece"),
        "t5": ("seq2seq", "metaspace"),
    }[arch]
    texts = [
        reasoning_prompt(r)
        for r in split_rows(data_dir, "maps_en")[:40] + split_rows(data_dir, "maps_zh")[:40]
    ]
    tok = train_tokenizer(texts, family, vocab_size=400, model_kind=kind)
    return Scorer(tiny_model(arch, tok, layers=1, hidden=32), tok)


@pytest.mark.slow
@pytest.mark.parametrize("source", ["maps_release", "mirror"])
@pytest.mark.parametrize(
    "arch,config", [("gpt2", "maps_en"), ("t5", "maps_zh"), ("bert", "maps_en")]
)
def test_runs_on_the_rows_with_each_kind(source, arch, config, tmp_path, request):
    data_dir = maps_folder(source, request)  # the mirror's variant runs the released rows
    data = list(split_rows(data_dir, config)[:3])
    result = run(
        config,
        tiny_scorer(data_dir, arch),
        rows=data,
        out=tmp_path / arch,
        progress=False,
        data_dir=data_dir,
    )
    reason = [r for r in result.records if r["tag"] == "reason"]
    assert len(reason) == 3 and all(r["pred"] in ("a", "b") for r in reason)
    assert result.metrics["n"] == 3
    assert result.metrics["accuracy"] == pytest.approx(
        100 * np.mean([r["pred"] == r["label"] for r in reason])
    )
    generated = [r for r in result.records if r["tag"].startswith("mem") and "output" in r]
    assert len(generated) == 15  # masked models fill one mask per template (M9)
    assert "Reasoning" in (tmp_path / arch / "report.md").read_text()


def test_few_shot_prompts_use_five_seeded_sets_of_english_demonstrations():
    demos = [{**ROW, "id": f"fs{i}", "proverb": f"proverb {i}", "label": i % 2} for i in range(30)]
    task = MapsTask(
        "maps_zh",
        MapsTask.Options(n_shot=2, memorisation=False),
        kind="causal",
        resources={"few_shot": demos},
    )
    probes = task.build_probes([ROW])
    assert [p.tag for p in probes] == ["reason0", "reason1", "reason2", "reason3", "reason4"]
    rs = np.random.RandomState(42)
    first = rs.permutation(30)[:2]
    blocks = probes[0].request.left.split("\n\n")
    assert blocks == [reasoning_prompt(demos[i]) + " " + "ab"[i % 2] for i in first] + [
        reasoning_prompt(ROW)
    ]
    negative = MapsTask(
        "maps_zh",
        MapsTask.Options(n_shot=2, question="neg"),
        kind="causal",
        resources={"few_shot": demos},
    )
    assert (
        negative.build_probes([ROW])[0]
        .request.left.split("\n\n")[0]
        .endswith(" " + "ba"[first[0] % 2])
    )
    with pytest.raises(CultureProbeError, match="n_shot=31 exceeds the 30 few-shot items"):
        MapsTask(
            "maps_en", MapsTask.Options(n_shot=31), kind="causal", resources={"few_shot": demos}
        ).build_probes([ROW])


def test_few_shot_accuracy_is_the_mean_over_the_sets(maps_release):
    data_dir = str(maps_release)
    result = run(
        "maps_en",
        LetterScorer(LETTERS * 5),
        rows=[ROW],
        n_shot=5,
        memorisation=False,
        progress=False,
        data_dir=data_dir,
    )  # the demonstrations come from the run's MAPS folder
    assert (
        result.metrics["per_set"] == [100.0, 0.0, 100.0, 0.0, 100.0]
        and result.metrics["accuracy"] == 60.0
    )
    assert [r["demo_set"] for r in result.records] == [0, 1, 2, 3, 4]
    few_shot = result.config.resources["few_shot"]
    assert few_shot["sources"] == [str(maps_release / "en" / "fs_proverbs.xlsx")]
    # each set: five of the folder's English few-shot rows (not the zh ones), RandomState(42)
    # permutations
    demos = split_rows(data_dir, "maps_en", "few_shot")
    task = load_task(
        "maps_zh", MapsTask.Options(n_shot=5, memorisation=False), kind="causal", data_dir=data_dir
    )[0]
    first = np.random.RandomState(42).permutation(len(demos))[:5]
    blocks = task.build_probes([ROW])[0].request.left.split("\n\n")
    assert blocks[:-1] == [
        reasoning_prompt(demos[i]) + " " + "ab"[demos[i]["label"]] for i in first
    ]
    with pytest.raises(CultureProbeError, match="MAPS needs data_dir="):
        run("maps_en", LetterScorer(LETTERS), rows=[ROW], n_shot=5, progress=False)


def test_seq2seq_prompts_are_cut_on_the_left_at_1024_tokens():
    long_row = {
        **ROW,
        "conversation": " ".join(["Person 1: should I sign the lease now or wait a week?"] * 150),
    }
    prompt = reasoning_prompt(long_row)
    tok = train_tokenizer([prompt], "metaspace", vocab_size=200, model_kind="seq2seq")
    scorer = Scorer(tiny_model("t5", tok, layers=1, hidden=32), tok)
    full = tok(prompt + " <extra_id_0>")["input_ids"]
    assert len(full) > 1100 and full[-1] == tok.eos_token_id
    seen = []
    handle = scorer.model.get_encoder().register_forward_pre_hook(
        lambda _m, args, kwargs: seen.append(kwargs["input_ids"][0].tolist()), with_kwargs=True
    )
    try:
        for limit in (1024, None):
            task = MapsTask(
                "maps_en",
                MapsTask.Options(memorisation=False, seq2seq_max_tokens=limit),
                kind="seq2seq",
            )
            with pytest.warns(UserWarning, match="cut on the left") if limit else nullcontext():
                scorer.score([p.request for p in task.build_probes([long_row])])
    finally:
        handle.remove()
    # the question, the slot and EOS survive; the start goes (M12)
    assert seen == [full[-1024:], full]
    # the spec's default
    assert MapsTask("maps_en", kind="seq2seq").options.seq2seq_max_tokens == 1024
    # seq2seq only
    assert MapsTask("maps_en", kind="causal").build_probes([ROW])[0].request.max_tokens is None
    with pytest.raises(CultureProbeError, match="seq2seq_max_tokens must be a whole number >= 1"):
        MapsTask.Options(seq2seq_max_tokens=0)


@pytest.mark.slow
def test_planted_masked_model_completes_planted_proverbs_only(mirror):
    import dataclasses

    from culture_probe.benchmarks.maps.planted import maps_spec
    from culture_probe.models.planted import train_planted

    data = list(split_rows(str(mirror / "manual" / "maps"), "maps_en")[:16])
    spec = dataclasses.replace(
        maps_spec(data, n_planted=8), arch="bert", tokenizer="wordpiece", steps=300
    )
    result = run("maps_en", str(train_planted(spec)), rows=data, progress=False)
    union = {}
    for r in result.records:
        if "success" in r:
            union[r["id"]] = union.get(r["id"], False) or r["success"]
    planted = {r["id"] for r in data[:8]}
    assert (
        sum(union[i] for i in planted) >= 7
        and sum(v for i, v in union.items() if i not in planted) <= 2
    )
