"""`--dry-run`: every benchmark's first probes previewed for every model kind are what the engine
really feeds the model (the previewed inputs, run through the model the slow way, give the engine's
scores; a generation prompt's ids are the ones `model.generate` receives), with no weights loaded
and nothing written.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import shutil
import sys
import types
from pathlib import Path

import numpy as np
import pytest
import torch
from dlama_fixture import write_dlama

from culture_probe import runner, throughput
from culture_probe.engine import Scorer
from culture_probe.engine.preview import (
    EncodingPreview,
    GenerateView,
    ScoreView,
    ServedView,
    Workload,
)
from culture_probe.engine.tokenizer import separator
from culture_probe.engine.types import FillMaskOptions
from culture_probe.errors import CultureProbeError, InvalidValueError, MissingDataError
from culture_probe.models import save_tiny, train_tokenizer
from culture_probe.runner.dryrun import dry_run
from culture_probe.tasks.probes import GenerateProbe, ScoreProbe

# small limits keep it fast
pytestmark = pytest.mark.filterwarnings("ignore::culture_probe.runner.SmallLimitWarning")
CHAT = (
    "{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
TEXTS = [
    "Egypt is located in Africa . The capital of France is Paris . question : what does the person mean ?",
    "Qatar Oman Canada Asia Europe North America ingredients food rice salt proverb apple doctor away",
    "مصر في أفريقيا كان في الابتدائي معاي بنت عربية اسمها فاطمة لبس ابوي ثوب في العيد",
    "美食 是 以 米 为 主要 原料 制作 的 。 北京 是 中国 的 首都",
] * 3
# name -> (architecture, tokenizer family, model kind, chat template)
MODELS = {
    "bert": ("bert", "wordpiece", "masked", None),
    "gpt2": ("gpt2", "bpe", "causal", None),
    "llama-chat": ("llama", "metaspace", "causal", CHAT),
    "t5": ("t5", "metaspace", "seq2seq", None),
}


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """name -> (saved model folder, the engine's scorer of it), loaded before any test forbids
    loading weights.
    """
    root = tmp_path_factory.mktemp("dryrun_models")
    out = {}
    for name, (arch, family, kind, chat) in MODELS.items():
        tok = train_tokenizer(TEXTS, family, model_kind=kind, vocab_size=400)
        tok.chat_template = chat
        folder = save_tiny(root / name, arch, tok, layers=1, hidden=32, heads=2)
        out[name] = (folder, Scorer.from_pretrained(folder))
    return out


@pytest.fixture(scope="module")
def dlama_dir(tmp_path_factory):
    return write_dlama(tmp_path_factory.mktemp("dlama"))


@pytest.fixture(scope="module")
def fmlama_rows():
    """The first dishes of FmLAMA's English rows: their ingredients are the candidate pool."""
    from culture_probe.loading import load_rows

    _mirror()
    return load_rows("fmlama_en")[:8]


@pytest.fixture
def sealed(tmp_path, monkeypatch):
    """Runs `dry_run` where it may load no weights and must write nothing: not in the working
    folder, the score cache, the library's cache (planted models) or the default score folder.
    """
    import transformers as tf

    def refuse(*args, **kwargs):
        raise AssertionError("a dry run loaded model weights")

    work, scores, library = tmp_path / "cwd", tmp_path / "scores", tmp_path / "library_cache"
    work.mkdir()

    def run(*args, **kwargs):
        with monkeypatch.context() as patch:
            for name in ("AutoModelForCausalLM", "AutoModelForMaskedLM", "AutoModelForSeq2SeqLM"):
                patch.setattr(getattr(tf, name), "from_pretrained", refuse)
            patch.setattr(tf.PreTrainedModel, "from_pretrained", refuse)
            patch.setattr("culture_probe.models.planted.train_planted", refuse)
            patch.chdir(work)
            patch.setenv("CULTURE_PROBE_CACHE", str(library))
            result = dry_run(*args, cache_dir=str(scores), **kwargs)
        assert list(work.iterdir()) == [] and not scores.exists() and not library.exists()
        assert list(runner.stage_models.default_cache_dir().iterdir()) == []
        return result

    return run


def _mirror(*parts: str) -> str:
    """A path in the local mirror of the benchmarks' files (CULTURE_PROBE_MIRROR); skips when there
    is none.
    """
    root = os.environ.get("CULTURE_PROBE_MIRROR")
    if not root or not Path(root).is_dir():
        pytest.skip("no local mirror (set CULTURE_PROBE_MIRROR)")
    return str(Path(root).joinpath(*parts))


# (config, options, model): every benchmark on every kind of model its protocol takes
CASES = [
    *[("dlama_arab_west", {}, m) for m in ("bert", "gpt2", "t5")],
    # on a few dishes: a few hundred candidates
    *[("fmlama_en", {}, m) for m in ("bert", "gpt2", "t5")],
    ("fmlama_en", {"mode": "chat"}, "llama-chat"),
    *[("camel_co_prompts", {"limit": 2, "sample_size": 5}, m) for m in ("bert", "gpt2", "t5")],
    ("xfakt_factual_recall", {"judge": "string", "language": "en"}, "llama-chat"),
    ("xfakt_factual_recall", {"judge": "string", "language": "en"}, "t5"),
    ("xfakt_factual_recall", {"mode": "rank", "language": "en"}, "llama-chat"),
    ("xfakt_factual_recall", {"mode": "rank", "rank_prompt": "plain", "language": "en"}, "gpt2"),
    ("xfakt_factual_recall", {"mode": "rank", "language": "en"}, "t5"),
    *[("maps_en", {"limit": 2}, m) for m in ("bert", "gpt2", "llama-chat", "t5")],
]


def _data_dir(config, dlama_dir):
    if config.startswith("dlama"):
        return str(dlama_dir)
    if config.startswith("maps"):
        return _mirror("manual", "maps")
    _mirror()  # the other benchmarks' files come from the mirror
    return None


@pytest.mark.parametrize(
    ("config", "options", "model"), CASES, ids=[f"{c}-{m}-{len(o)}" for c, o, m in CASES]
)
def test_the_preview_is_what_the_engine_feeds_the_model(
    config, options, model, models, dlama_dir, sealed, request
):
    folder, scorer = models[model]
    rows = request.getfixturevalue("fmlama_rows") if config.startswith("fmlama") else None
    result = sealed(
        config, folder, n=2, data_dir=_data_dir(config, dlama_dir), rows=rows, **options
    )
    (plan,) = result.configs
    assert plan.kind == scorer.kind and len(plan.shown) == 2 and plan.stages[0].probes > 0
    for shown in plan.shown:
        if isinstance(shown.probe, ScoreProbe):
            _check_score(scorer, shown.probe, shown.view)
        else:
            _check_generate(scorer, shown.probe, shown.view)
    assert f"{config}: a {scorer.kind} model" in result.text()


def _check_score(scorer, probe, view):
    """The previewed inputs, run one by one through the model, give the engine's score of each
    candidate.
    """
    assert isinstance(view, ScoreView) and view.request == probe.request
    want = scorer.score([probe.request], dataclasses.replace(probe.options, keep_tokens=True))[0]
    assert [c.text for c in view.candidates] == list(want.candidates)
    assert [len(c.scored.ids) for c in view.candidates] == list(want.n_tokens)
    for n, cand in enumerate(view.candidates[:3]):
        reads = [_replay(scorer, view, model_input) for model_input in cand.inputs]
        assert sum(len(r) for r in reads) == want.n_tokens[n]
        np.testing.assert_allclose(
            sum(sum(r) for r in reads), want.sum_logprob[n], atol=1e-4, err_msg=cand.text
        )


def _replay(scorer, view, model_input):
    """The log-probs the input's reads take in one plain forward pass of the model (no batching, no
    cache).
    """
    ids = torch.tensor([model_input.tokens.ids])
    with torch.inference_mode():
        if scorer.kind == "seq2seq":
            logits = scorer.model(
                input_ids=torch.tensor([view.context.ids]), decoder_input_ids=ids
            ).logits[0]
        else:
            logits = scorer.model(input_ids=ids).logits[0]
    logp = torch.log_softmax(logits.float(), dim=-1)
    return [float(logp[position, token]) for position, token in model_input.reads]


class _Fed(Exception):
    """Raised by the model's `generate` once it has seen its input: the test needs the input, not
    the text.
    """


def _check_generate(scorer, probe, view):
    """The previewed prompt ids are the ones `model.generate` receives, and the options are the
    probe's.
    """
    assert isinstance(view, GenerateView) and view.options == probe.options
    fed = {}

    def generate(**batch):
        fed.update(batch)
        raise _Fed

    scorer.model.generate = generate
    try:
        with pytest.raises(_Fed):
            scorer.generate([probe.prompt], probe.options)
    finally:
        del scorer.model.generate
    kept = fed["attention_mask"][0].bool()
    assert view.tokens.ids == tuple(fed["input_ids"][0][kept].tolist())
    assert probe.prompt in view.prompt and (view.prompt != probe.prompt) == probe.options.chat


def test_a_chat_template_is_applied_as_the_engine_applies_it(models, sealed):
    folder, scorer = models["llama-chat"]
    (plan,) = sealed("xfakt_factual_recall", folder, n=1, language="en", judge="string").configs
    view = plan.shown[0].view
    question = plan.shown[0].probe.prompt
    # the template above, rendered by hand
    assert view.prompt == f"<s><|user|>{question}\n<|assistant|>"
    # the template's BOS, not a second one
    assert view.tokens.ids.count(scorer.tokenizer.bos_token_id) == 1


def test_a_causal_model_without_chat_template_cannot_preview_a_chat_protocol(models, sealed):
    folder, _ = models["gpt2"]
    with pytest.raises(CultureProbeError, match="chat template"):
        sealed("xfakt_factual_recall", folder, language="en", judge="string")


def test_later_stages_are_named_with_their_model_and_no_count(models, sealed):
    folder, _ = models["llama-chat"]
    judge = str(folder)
    (plan,) = sealed("xfakt_factual_recall", folder, n=0, language="en", judge_model=judge).configs
    answer, judged = plan.stages
    assert (answer.name, judged.name) == ("answer", "judge") and answer.probes == plan.sampled
    assert (
        judged.probes is None
        and judged.model == judge
        and judge in judged.about
        and plan.shown == ()
    )
    known = (
        "built from the records of stage answer; its probe count is known once that stage has run"
    )
    assert f"stage judge: {known}; {judged.about}" in "\n".join(plan.lines())


def test_a_limit_counts_the_sampled_items_and_skipped_probes_are_counted(models, sealed):
    folder, _ = models["gpt2"]
    (full,) = sealed("maps_en", folder, n=0, data_dir=_mirror("manual", "maps")).configs
    (small,) = sealed("maps_en", folder, n=0, data_dir=_mirror("manual", "maps"), limit=3).configs
    assert (
        full.sampled == full.items == full.rows and small.sampled == 3 and small.items == full.items
    )
    assert small.stages[0].probes < full.stages[0].probes
    assert [s.name for s in full.stages] == ["reason", "memorise"] and full.stages[1].probes is None


def test_a_suite_skips_a_config_whose_data_is_missing_unless_strict(models, sealed, dlama_dir):
    folder, _ = models["bert"]
    result = sealed(["dlama_arab_west", "maps_en"], folder, n=1, data_dir=f"dlama={dlama_dir}")
    assert [p.config for p in result.configs] == ["dlama_arab_west"]
    assert (
        "data_dir" in result.skipped["maps_en"]
        and "maps_en: skipped, MAPS needs data_dir=" in result.text()
    )
    with pytest.raises(
        MissingDataError, match="In the suite's config maps_en: MAPS needs data_dir="
    ):
        sealed(["dlama_arab_west", "maps_en"], folder, data_dir=f"dlama={dlama_dir}", strict=True)


def test_a_negative_count_is_refused(models):
    with pytest.raises(InvalidValueError, match="n >= 0"):
        dry_run("dlama_arab_west", models["bert"][0], n=-1)


def test_a_fill_mask_preview_is_the_engine_input(models, monkeypatch):
    folder, scorer = models["bert"]
    preview = EncodingPreview.weightless("masked", scorer.tokenizer, scorer.model.config)
    lefts = ["Egypt is located in", "美食 是"]
    options = FillMaskOptions(sep=None)
    views = preview.fill_mask(lefts, options)
    fed = []
    monkeypatch.setattr(
        scorer,
        "_top_pieces",
        lambda inputs, top_k: fed.extend(inputs) or [[("", 0.0)]] * len(inputs),
    )
    scorer.fill_mask(lefts, options)
    assert [(v.tokens.ids, v.mask) for v in views] == fed
    assert all(v.tokens.pieces[v.mask] == scorer.tokenizer.mask_token for v in views)


def test_a_served_model_shows_the_requests_it_would_be_sent(models, sealed, monkeypatch):
    # the openai client, which must never be used: the dry run records instead of sending
    class OpenAI:
        def __init__(self, **kwargs):
            self.completions = self.chat = None

    # an HTTP client that holds no connection
    client = types.SimpleNamespace(_transport=None, _mounts={})
    stub = types.SimpleNamespace(OpenAI=OpenAI, DefaultHttpxClient=lambda **kwargs: client)
    monkeypatch.setitem(sys.modules, "openai", stub)
    url = "http://127.0.0.1:9/v1"
    (generate,) = sealed(
        "xfakt_factual_recall", "openai:tiny", base_url=url, n=1, language="en", judge="string"
    ).configs
    probe, view = generate.shown[0].probe, generate.shown[0].view
    assert isinstance(probe, GenerateProbe) and isinstance(view, ServedView)
    (call,) = view.calls
    assert call.endpoint == "chat.completions" and call.body["messages"] == [
        {"role": "user", "content": probe.prompt}
    ]
    assert (
        call.body["max_tokens"] == probe.options.max_new_tokens and call.body["temperature"] == 0.0
    )
    (score,) = sealed("camel_co_prompts", "openai:tiny", base_url=url, n=1, limit=1).configs
    probe, view = score.shown[0].probe, score.shown[0].view
    request = probe.request
    sent = [request.left + separator(request.left, request.sep) + c for c in request.candidates]
    # all the probe's candidates in one request
    assert [c.body["prompt"] for c in view.calls] == [sent] and all(
        c.body["echo"] and c.body["logprobs"] == 0 for c in view.calls
    )
    assert "POST /completions" in "\n".join(score.lines())


def test_a_planted_model_is_previewed_with_the_tokenizer_training_would_give(sealed, tmp_path):
    from culture_probe.models.planted import train_planted
    from culture_probe.models.planted_benchmarks import CHAT_TEMPLATE, chat_prompt, planted_spec

    _mirror()
    (plan,) = sealed(
        "xfakt_factual_recall", "planted:xfakt_factual_recall", n=2, judge="string"
    ).configs
    spec = planted_spec("xfakt_factual_recall")
    trained = Scorer.from_pretrained(
        train_planted(dataclasses.replace(spec, steps=1), tmp_path / "planted")
    )
    trained.tokenizer.chat_template = CHAT_TEMPLATE  # as planted_model_dir saves it
    for shown in plan.shown:
        assert shown.view.prompt == chat_prompt(shown.probe.prompt)
        _check_generate(trained, shown.probe, shown.view)


def _forward_tokens(model) -> list[tuple[int, int]]:
    """A list that grows by the shape (rows, length) of the input of every forward pass of `model`'s
    body (as perf/bench_engine.py's `counted_tokens`): what the engine really puts through the
    model, padding and repeated contexts included.
    """
    seen: list[tuple[int, int]] = []

    def count(_, args, kwargs):
        ids = kwargs.get("input_ids") if kwargs.get("input_ids") is not None else args[0]
        seen.append(tuple(ids.shape))

    model.base_model.register_forward_pre_hook(count, with_kwargs=True)
    return seen


@pytest.mark.parametrize(("model", "budget"), [("gpt2", None), ("bert", 1)])
def test_the_dry_run_counts_the_tokens_the_engine_puts_through_the_model(
    model, budget, models, fmlama_rows, sealed
):
    """The dry run's count is the engine's own (its batches' costs), and what a forward hook sees go
    through the model: exactly, where the engine runs a request in one pass without padding (causal:
    context and candidate trie in one packed row; masked: one query per forward), more where a long
    trie takes several rows that each repeat the context (FmLAMA's templates that score the text
    after the slot).
    """
    folder, _ = models[model]
    (plan,) = sealed("fmlama_en", folder, n=0, rows=fmlama_rows).configs
    scorer = Scorer.from_pretrained(folder, batch_tokens=budget)
    seen = _forward_tokens(scorer.model)
    settings = runner.RunSettings()
    spec = runner.stage_models.model_spec(folder, settings)
    ahead = runner.planning.plan("fmlama_en", spec, settings, {}, rows=fmlama_rows)
    one_pass = 0
    for probe in ahead.probes:
        before, ran = len(seen), scorer.tokens_run
        scorer.score([probe.request], probe.options)
        if all(rows == 1 for rows, _ in seen[before:]):  # one unpadded row per forward
            # a request's tokens, each run once
            assert sum(n for _, n in seen[before:]) == scorer.tokens_run - ran
            one_pass += 1
    candidates = sum(len(p.request.candidates) for p in ahead.probes)
    assert plan.work.probes == len(ahead.probes) == 80 and plan.work.candidates == candidates
    assert (
        plan.work.tokens == scorer.tokens_run <= sum(rows * n for rows, n in seen)
        and one_pass >= 40
    )
    line = f"cost of stage main: 80 probes, {candidates:,} candidates, {plan.work.tokens:,} tokens through the model"
    assert line + "; " in "\n".join(plan.lines()) and "scoring from FLOPs" in plan.cost()


def test_the_dry_run_estimates_the_time_at_the_rates_a_run_measured_here(
    models, dlama_dir, fmlama_rows, tmp_path, monkeypatch
):
    """Before any run: a range from FLOPs; a run too small keeps no rate; a run that measures one is
    used by the next dry run of the same model, or of a copy of it, with the config's own fixed
    part; and the dry run writes nothing, the speed it measured included.
    """
    from culture_probe.throughput import estimate as est
    from culture_probe.throughput import store

    folder, _ = models["bert"]
    scorer = Scorer.from_pretrained(folder)
    cache = tmp_path / "cache"
    monkeypatch.setenv("CULTURE_PROBE_CACHE", str(cache))
    names, data = ["dlama_arab_west", "fmlama_en"], f"dlama={dlama_dir}"
    before = dry_run(names, folder, n=0, data_dir=data, limit=2)
    assert all("scoring from FLOPs" in c.cost() for c in before.configs) and not cache.exists()
    assert all(
        c.estimate.high / c.estimate.low == pytest.approx(est.FLOPS_SPREAD**2)
        for c in before.configs
    )
    runner.run("dlama_arab_west", scorer, data_dir=str(dlama_dir), progress=False, no_cache=True)
    shape = throughput.model_shape(scorer).key
    assert (
        0 < scorer.tokens_run and store.rate_of(shape, "dlama_arab_west") is None
    )  # too small to measure
    small = store.fixed_of("dlama_arab_west")  # its fixed part is measured all the same
    monkeypatch.setattr(store, "MIN_SECONDS", 0.0)
    monkeypatch.setattr(store, "MIN_BATCHES", 1)
    runner.run("fmlama_en", scorer, rows=fmlama_rows, progress=False, no_cache=True)
    rate = store.rate_of(shape, "dlama_arab_west")  # the shape's latest: fmlama_en's
    assert (
        rate is not None
        and rate.config == "fmlama_en"
        and rate.score.tokens > 0
        and rate.generate is None
    )
    copy = shutil.copytree(folder, tmp_path / "copy")
    plan = dry_run(names, copy, n=0, data_dir=data, limit=2)
    for config in plan.configs:
        fixed = rate.fixed if config.config == "fmlama_en" else small
        middle = config.work.tokens / rate.score.per_second + fixed
        assert config.estimate.middle == pytest.approx(middle, rel=1e-6)
        assert f"scoring at {rate.score.per_second:,.0f} tokens/s, measured here" in config.cost()
    assert small is not None and small > 0
    total = plan.total()
    low = sum(c.estimate.low for c in plan.configs)
    high = sum(c.estimate.high for c in plan.configs)
    assert total.endswith(f"; {est.span(low, high)}, each config at its own rates")


def test_a_workload_too_large_to_count_is_counted_on_a_sample_and_says_so(
    models, fmlama_rows, monkeypatch
):
    """Beyond `COUNTED_CANDIDATES` candidates the tokens are counted on a seeded sample of the
    requests and scaled up: close to the exact count, the same each time, and said to be an
    estimate.
    """
    from culture_probe.engine import preview

    folder, _ = models["gpt2"]
    (exact,) = dry_run("fmlama_en", folder, n=0, rows=fmlama_rows).configs
    monkeypatch.setattr(preview, "COUNTED_CANDIDATES", exact.work.candidates // 4)
    (sampled,) = dry_run("fmlama_en", folder, n=0, rows=fmlama_rows).configs
    (again,) = dry_run("fmlama_en", folder, n=0, rows=fmlama_rows).configs
    assert exact.work.exact and not sampled.work.exact and sampled.work == again.work
    assert (sampled.work.probes, sampled.work.candidates) == (
        exact.work.probes,
        exact.work.candidates,
    )
    assert (
        sampled.work.tokens != exact.work.tokens
        and abs(sampled.work.tokens / exact.work.tokens - 1) < 0.05
    )
    counted = f"about {sampled.work.tokens:,} tokens through the model (counted on a sample of its requests)"
    assert counted in sampled.cost() and "about" not in exact.cost()


def test_a_dry_run_of_a_shard_plans_what_the_shard_asks(models, dlama_dir):
    """`--shard K/N` in a dry run: each shard's part of the items and probes, which together are the
    whole run's, and what the shard's run then asks.
    """
    folder, scorer = models["gpt2"]
    (whole,) = dry_run("dlama_arab_west", folder, n=0, data_dir=str(dlama_dir)).configs
    parts = [
        dry_run("dlama_arab_west", folder, n=0, data_dir=str(dlama_dir), shard=f"{k}/2").configs[0]
        for k in (1, 2)
    ]
    assert sum(p.sampled for p in parts) == whole.items and all(
        0 < p.sampled < whole.items for p in parts
    )
    assert sum((p.work for p in parts), Workload()) == whole.work
    assert f"{parts[0].sampled} of {whole.items} items (shard 1/2)" in parts[0].lines()[0]
    run = runner.run(
        "dlama_arab_west",
        scorer,
        data_dir=str(dlama_dir),
        shard="1/2",
        progress=False,
        no_cache=True,
    )
    assert len(run.records) == parts[0].work.probes


def _cost_lines(caplog) -> list[str]:
    """The cost notices logged (INFO on the `culture_probe` logger), in order."""
    from culture_probe.throughput import RunCostNotice

    notices = (getattr(record, "notice", None) for record in caplog.records)
    return [notice.line for notice in notices if isinstance(notice, RunCostNotice)]


def test_a_suite_says_its_total_cost_once_its_model_has_loaded(
    models, dlama_dir, tmp_path, monkeypatch, caplog
):
    """A suite's first notice is the total of its configs' first stages, as the dry run counts them;
    each run then says its own part.
    """
    from culture_probe.runner.suite import run_suite

    folder, _ = models["gpt2"]
    monkeypatch.setenv("CULTURE_PROBE_CACHE", str(tmp_path / "cache"))
    names, data = ["dlama_arab_west", "fmlama_en"], f"dlama={dlama_dir}"
    plan = dry_run(names, folder, n=0, data_dir=data, limit=2)
    with caplog.at_level(logging.INFO, logger="culture_probe"):
        run_suite(names, folder, data_dir=data, limit=2, no_cache=True)
    first, *each = _cost_lines(caplog)
    # probes, candidates and tokens, as the dry run counts
    counted = plan.total().split("; ")[0].split(": ", 1)[1]
    assert first.startswith(f"the suite starts: 2 configs' first stages: {counted}; ")
    assert [line.split(" starts")[0] for line in each] == names
    for line, config in zip(
        each, plan.configs, strict=True
    ):  # each run's part, counted once by the suite
        assert (
            f"starts, stage main: {config.work.probes} probes, {config.work.candidates:,} candidates"
            in line
        )


def test_a_run_says_what_it_will_cost_as_it_starts(
    models, dlama_dir, tmp_path, monkeypatch, caplog, recwarn
):
    """As information logged at INFO, never as a warning (which would show the library's source
    line).
    """
    folder, scorer = models["gpt2"]
    monkeypatch.setenv("CULTURE_PROBE_CACHE", str(tmp_path / "cache"))
    (plan,) = dry_run("dlama_arab_west", folder, n=0, data_dir=str(dlama_dir), limit=2).configs
    with caplog.at_level(logging.INFO, logger="culture_probe"):
        runner.run("dlama_arab_west", scorer, data_dir=str(dlama_dir), limit=2, no_cache=True)
    (line,) = _cost_lines(caplog)
    assert not [w for w in recwarn if "starts, stage" in str(w.message)]
    assert line.startswith(f"dlama_arab_west starts, stage main: {plan.work.probes} probes, ")
    assert f"{plan.work.tokens:,} tokens through the model; " in line and "from FLOPs" in line


def _bytes_of(pieces) -> bytes:
    """Readable pieces back to their bytes: text as UTF-8, each <0xNN> as its byte."""
    parts = [re.split(r"<0x([0-9A-F]{2})>", piece) for piece in pieces]
    return b"".join(
        bytes.fromhex(part) if odd else part.encode()
        for split in parts
        for odd, part in ((i % 2, p) for i, p in enumerate(split))
    )


def test_byte_level_pieces_show_as_the_text_their_bytes_are(models, sealed, dlama_dir):
    """A GPT-2 style vocabulary writes each byte as a stand-in character ('ĠÙħ' for ' م'): the dry
    run shows the text, and a byte of a character split across pieces as <0xD9>, never the
    stand-ins.
    """
    from culture_probe.engine.preview import Tokens

    folder, scorer = models["gpt2"]
    text = " مصر في أفريقيا"
    tokens = Tokens.of(scorer.tokenizer, scorer.tokenizer.encode(text, add_special_tokens=False))
    assert _bytes_of(tokens.pieces).decode() == text
    stand_ins = set("ĠÙØħ")
    assert not stand_ins & set("".join(tokens.pieces)), tokens.pieces
    assert any("م" in piece or "ي" in piece for piece in tokens.pieces), tokens.pieces
    shown = sealed(["dlama_arab_west"], folder, n=2, data_dir=str(dlama_dir), language="ar").text()
    assert "pieces" in shown or "scored ids" in shown
    assert not stand_ins & set(shown), shown
