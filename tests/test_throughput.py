"""Estimates a user can plan with (issue 45, item 8): the model's cost from its config, this
machine's speed measured once, the rates a run measures (scoring and generation apart, its model's
loading left out, nothing kept from a run too small), keyed by the model's shape so a copy of the
same weights finds them, kept by concurrent runs alike.
"""

from __future__ import annotations

import json
import multiprocessing
import shutil
import time
import warnings
from dataclasses import asdict

import pytest
from dlama_fixture import write_dlama

from culture_probe.engine import Scorer
from culture_probe.engine.preview import EncodingPreview, Workload
from culture_probe.engine.types import GenerateOptions, ScoreOptions, ScoreRequest
from culture_probe.models import save_tiny, train_tokenizer
from culture_probe.throughput import estimate as est
from culture_probe.throughput import flops, store
from culture_probe.throughput.meter import Meter, estimate_for, model_shape

TEXTS = [
    "the capital of france is paris . rice salt apple doctor away egypt africa asia europe"
] * 4
# the warnings of a damaged rates.json each test does not look for (each read of the file says them
# again)
quiet_rates = pytest.mark.filterwarnings("ignore::culture_probe.throughput.store.RatesFileWarning")
SPEED = store.DeviceSpeed("cpu (2 threads)", 2e10, 1e-5, 2e-6, 1e10, 1e-9, 1e-3, "2026-12-02")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """name -> saved folder of a tiny random model (1 layer, hidden 32)."""
    root = tmp_path_factory.mktemp("throughput")
    out = {}
    for name, arch, family, kind in (
        ("gpt2", "gpt2", "bpe", "causal"),
        ("bert", "bert", "wordpiece", "masked"),
    ):
        tok = train_tokenizer(TEXTS, family, model_kind=kind, vocab_size=200)
        out[name] = save_tiny(root / name, arch, tok, layers=1, hidden=32, heads=2)
    return out


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CULTURE_PROBE_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def requests(n: int = 6) -> list[ScoreRequest]:
    return [
        ScoreRequest(f"the capital of {w} is", ("paris", "rice salt", "apple"))
        for w in TEXTS[0].split()[:n]
    ]


def test_a_models_shape_is_counted_from_its_config_and_shared_by_a_copy(tiny, tmp_path):
    """The body is every parameter a token passes (embeddings aside), the head is vocabulary x
    hidden; the key ignores where the weights live, so a copy of the folder finds the rates of the
    original, and another shape does not.
    """
    scorer = Scorer.from_pretrained(tiny["gpt2"])
    shape = model_shape(scorer)
    model = scorer.model
    blocks = sum(p.numel() for p in model.transformer.h.parameters()) + sum(
        p.numel() for p in model.transformer.ln_f.parameters()
    )
    assert shape is not None and shape.body == blocks
    assert (
        shape.head == model.config.vocab_size * model.config.n_embd
        and shape.vocab == model.config.vocab_size
    )
    copy = shutil.copytree(tiny["gpt2"], tmp_path / "copy")
    assert model_shape(Scorer.from_pretrained(copy)).key == shape.key
    assert model_shape(Scorer.from_pretrained(tiny["bert"])).key != shape.key
    # the dry run's weightless backend counts the same shape
    weightless = EncodingPreview.weightless("causal", scorer.tokenizer, model.config).scorer
    assert model_shape(weightless) == shape


def test_scoring_and_generation_are_counted_apart_as_the_workload_counts_them(tiny):
    scorer = Scorer.from_pretrained(tiny["gpt2"])
    preview = EncodingPreview(scorer)
    asked, options = requests(), ScoreOptions()
    prompts, gen = ["the capital of", "rice salt"], GenerateOptions(max_new_tokens=3)
    before = scorer.spending.snapshot()
    scorer.score(asked, options)
    scorer.generate(prompts, gen)
    spent = {k: v - before[k] for k, v in scorer.spending.snapshot().items()}
    scored, generated = (
        preview.score_workload(asked, options),
        preview.generate_workload(prompts, gen),
    )
    assert spent["score"].tokens == scored.tokens and spent["generate"].tokens == generated.tokens
    assert all(s.batches >= 1 and s.seconds > 0 for s in spent.values())
    assert scorer.tokens_run >= scored.tokens + generated.tokens
    # what the estimate counts besides: the LM head's reads, generation's new tokens and steps
    assert scored.reads > 0 and scored.generated == 0
    assert (generated.generated, generated.new, generated.steps) == (generated.tokens, 2 * 3, 3)


def test_the_estimate_uses_each_kinds_rate_and_the_configs_fixed_part():
    work = Workload(10, 30, tokens=12_000, reads=600) + Workload(2, 0, 1_000, True, 0, 1_000, 40, 8)
    shape = flops.ModelShape(body=1_000_000, head=100_000, vocab=1_000, key="k")
    rate = store.Rate(
        "m",
        "fmlama_en",
        "cpu (2 threads)",
        "2026-12-02",
        store.KindRate(4_000, 1.0),
        store.KindRate(100, 1.0),
        5.0,
    )
    measured = est.estimate(work, shape, SPEED, rate, 7.0, "fmlama_en")
    point = 12_000 / 4_000 + 1_000 / 100 + 5.0  # the run's own fixed part, not the config's latest
    assert measured.middle == pytest.approx(point)
    spread = est.MEASURED_SPREAD
    assert (measured.low, measured.high) == pytest.approx((point / spread, point * spread))
    assert "scoring at 4,000 tokens/s and generation at 100 tokens/s" in measured.words()
    # no generation rate: that part from FLOPs, the range as wide as the FLOPs' basis
    half = est.estimate(
        work,
        shape,
        SPEED,
        store.Rate("m", "dlama", "cpu", "d", store.KindRate(4_000, 1.0)),
        7.0,
        "x",
    )
    gen_flops = est.flop_seconds(1_000, 40, 8, shape, SPEED)
    assert half.middle == pytest.approx(3.0 + gen_flops + 7.0)
    assert half.high / half.low == pytest.approx(est.FLOPS_SPREAD**2)
    assert "generation from FLOPs: 1.1 M parameters at 20.0 GFLOP/s" in half.words()
    first = est.estimate(work, shape, SPEED, None, None, "x")
    scoring = est.flop_seconds(12_000, 600, 0, shape, SPEED, candidates=30)
    assert first.middle == pytest.approx(scoring + gen_flops)
    assert "no run of this config here yet" in first.words()


def test_flops_count_tokens_reads_and_steps():
    shape = flops.ModelShape(body=10**6, head=10**5, vocab=1000, key="k")
    base = est.flop_seconds(1000, 0, 0, shape, SPEED)
    assert base == pytest.approx(1000 * 1e-5 + 2e9 / 2e10)
    read = (
        1000 * 1e-9 + 2 * 10**5 / 1e10
    )  # its log-softmax over the vocabulary, and the head's FLOPs
    assert est.flop_seconds(1000, 50, 0, shape, SPEED) - base == pytest.approx(50 * read)
    assert est.flop_seconds(1000, 0, 7, shape, SPEED) - base == pytest.approx(7e-3)
    assert est.flop_seconds(1000, 0, 0, shape, SPEED, candidates=300) - base == pytest.approx(
        300 * 2e-6
    )


@pytest.mark.parametrize(
    ("low", "high", "words"),
    [
        (0.01, 0.03, "under 0.1 s"),
        (0.3, 0.9, "0.3-0.9 s"),
        (0.02, 1.4, "0.1-1.4 s"),
        (3, 9, "3-9 s"),
        (40, 130, "0.7-2.2 min"),
        (600, 1800, "10-30 min"),
        (4000, 12_000, "1.1-3.3 h"),
    ],
)
def test_a_range_is_said_in_the_unit_of_its_top(low, high, words):
    assert est.span(low, high) == words


def test_this_machines_speed_is_measured_once_and_kept(cache):
    measured = flops.speed_for("cpu")
    assert (
        measured.flops_per_second > 1e8
        and measured.seconds_per_token >= 0
        and measured.seconds_per_candidate >= 0
        and measured.seconds_per_step >= 0
    )
    assert store.speed_of(flops.device_name("cpu")) == measured
    assert flops.speed_for("cpu") == measured  # read, not measured again


def test_a_run_keeps_its_rates_without_its_models_loading_and_none_when_too_small(
    tiny, cache, monkeypatch
):
    scorer = Scorer.from_pretrained(tiny["gpt2"])
    shape = model_shape(scorer)
    began = time.monotonic()
    meter = Meter(scorer, began, loading=0.3)
    scorer.score(requests(), ScoreOptions())
    meter.staged()
    assert meter.keep("tiny", "fmlama_en") is None  # a few milliseconds of scoring: no rate
    assert store.rate_of(shape.key, "fmlama_en") is None and store.fixed_of("fmlama_en") is not None
    monkeypatch.setattr(store, "MIN_SECONDS", 0.0)
    monkeypatch.setattr(store, "MIN_BATCHES", 1)
    meter = Meter(scorer, time.monotonic(), loading=0.3)
    time.sleep(0.5)  # reading and planning
    scorer.score(requests(), ScoreOptions())
    meter.staged()
    rate = meter.keep("tiny", "fmlama_en")
    wall = time.monotonic() - meter.began
    assert rate is not None and rate.generate is None and rate.score.tokens > 0
    # the fixed part: the wall time less the calls and the model's loading
    assert 0.5 - 0.3 - 0.05 <= rate.fixed <= wall - 0.3 - rate.score.seconds + 0.01
    assert (
        store.rate_of(shape.key, "fmlama_en") == rate == store.rate_of(shape.key, "another config")
    )
    assert store.fixed_of("fmlama_en") == rate.fixed and store.fixed_of("dlama") is None
    # a later run that generates keeps its scoring rate alongside
    meter = Meter(scorer, time.monotonic())
    scorer.generate(["the capital of"], GenerateOptions(max_new_tokens=2))
    meter.staged()
    both = meter.keep("tiny", "fmlama_en")
    assert both.generate is not None and store.rate_of(shape.key, "fmlama_en").score == rate.score


def _keep(args):
    folder, i = args
    import os

    os.environ["CULTURE_PROBE_CACHE"] = folder
    for j in range(5):
        rate = store.Rate(f"m{i}", f"config{i}-{j}", "cpu", "d", store.KindRate(1000, 1.0))
        assert store.keep_rate(f"shape{i}", rate)


def test_concurrent_runs_keep_every_rate(cache):
    """Runs that end at once each add their rates: none is lost to another's write."""
    with multiprocessing.get_context("fork").Pool(4) as pool:
        pool.map(_keep, [(str(cache), i) for i in range(4)])
    for i in range(4):
        assert all(
            store.rate_of(f"shape{i}", f"config{i}-{j}").config == f"config{i}-{j}"
            for j in range(5)
        )


@quiet_rates
def test_a_file_of_another_format_is_read_as_empty(cache):
    cache.mkdir(parents=True)
    (cache / store.RATES_FILE).write_text('{"host (2 CPUs)": {"m": {"tokens": 1}}}')
    assert store.rate_of("m", "c") is None and store.speed_of("cpu") is None
    assert store.keep_rate("m", store.Rate("m", "c", "cpu", "d", store.KindRate(10, 1.0)))
    assert store.rate_of("m", "c").score == store.KindRate(10, 1.0)


def test_the_estimate_before_a_first_run_comes_from_flops_at_the_measured_speed(tiny, cache):
    scorer = Scorer.from_pretrained(tiny["bert"])
    work = EncodingPreview(scorer).score_workload(requests(), ScoreOptions())
    estimate = estimate_for(work, scorer, "fmlama_en")
    shape, speed = model_shape(scorer), flops.speed_for(scorer.device)
    expected = est.flop_seconds(work.tokens, work.reads, 0, shape, speed, work.candidates)
    assert estimate.middle == pytest.approx(expected)
    assert (
        "scoring from FLOPs" in estimate.words()
        and "no run of a model of this shape" in estimate.words()
    )


def test_the_speed_is_measured_alone_in_a_process_of_a_multi_process_run(
    cache, tmp_path, monkeypatch
):
    """A run's process measures the machine's speed on synthetic requests by itself: none of it is
    split with the other processes, waited for, or traced as the run's shared work (a two-process
    run traced 7 calls for 1).
    """
    from culture_probe.engine import parallel

    trace = tmp_path / "trace"
    trace.mkdir()
    monkeypatch.setenv(parallel.TRACE_VARIABLE, str(trace))
    flops.measure_speed("cpu")
    assert list(trace.iterdir()) == []
    monkeypatch.setenv(
        "WORLD_SIZE", "2"
    )  # as a launcher sets it: outside `alone`, `world` would join a group
    with parallel.alone():
        assert parallel.world() == (0, 1)


# rates.json as a careless hand or another tool leaves it: (the file's text, what the warning names)
WHOLE_FILES = {
    "a list": ("[]", "not a JSON object with `format` 2"),
    "machines a list": ('{"format": 2, "machines": []}', "not a JSON object with `format` 2"),
    "not JSON": ('{"format": 2, "machines": {', "not JSON"),
    "nested too deep": ("[" * 200_000 + "]" * 200_000, "nested too deep to read"),
}


def _rates(shape: str = "s", **kinds: object) -> dict:
    """A rate entry of `shape` on config c as a run writes it, with `kinds` (score, generate, fixed)
    replaced.
    """
    rate = {"model": "m", "config": "c", "device": "cpu", "date": "d", "generate": None}
    return {**rate, "score": {"tokens": 1000, "seconds": 2.0}, "fixed": 1.0, **kinds}


def _write_rates(cache, part: dict) -> None:
    cache.mkdir(parents=True, exist_ok=True)
    document = {"format": store.FORMAT, "machines": {store.machine(): part}}
    (cache / store.RATES_FILE).write_text(json.dumps(document))


@pytest.mark.parametrize("text, said", list(WHOLE_FILES.values()), ids=list(WHOLE_FILES))
def test_a_rates_file_of_the_wrong_shape_is_ignored_with_a_warning_naming_it(cache, text, said):
    """Never a failed run: every read is empty, with one warning naming the file, and the next keep
    rewrites it.
    """
    cache.mkdir(parents=True)
    (cache / store.RATES_FILE).write_text(text)
    with pytest.warns(store.RatesFileWarning) as caught:
        assert store.rate_of("s", "c") is None and store.fixed_of("c") is None
        assert store.speed_of("cpu") is None
        assert store.keep_fixed("c", 1.5)
    message = str(caught[0].message)
    assert message.startswith(f"{cache / store.RATES_FILE}: ") and said in message, message
    assert "\n" not in message and "the whole file is ignored" in message
    assert store.fixed_of("c") == 1.5 and list(cache.glob(".rates.json.*")) == []


@quiet_rates
@pytest.mark.parametrize(
    "entry, field",
    [
        (_rates(score={"tokens": 1000, "seconds": 0}), "score.seconds` should be above 0"),
        (
            _rates(score={"tokens": "1000", "seconds": 2.0}),
            "score.tokens` should be a whole number",
        ),
        (
            _rates(score={"tokens": 1000, "seconds": float("nan")}),
            "score.seconds` should be a finite",
        ),
        (_rates(score={"tokens": -1000, "seconds": 2.0}), "score.tokens` should be above 0"),
        (_rates(fixed=-3.0), "fixed` should be 0 or more"),
        (_rates(score=[1000, 2.0]), "score` should be a JSON object"),
        ({"model": "m"}, "` lacks `config`"),
        ([], "` should be a JSON object"),
    ],
    ids=[
        "zero seconds",
        "string tokens",
        "nan",
        "negative tokens",
        "negative fixed",
        "list",
        "lacking",
        "[]",
    ],
)
def test_a_damaged_rate_is_ignored_by_name_and_the_good_ones_kept(cache, entry, field):
    """The estimate falls back to FLOPs for the damaged shape (no "nan h", no ZeroDivisionError),
    the other shapes' rates stay in use, and the next run's write drops only the damaged entry.
    """
    good = _rates("good")
    _write_rates(cache, {"rates": {"s c": entry, "s": entry, "good": good}, "fixed": {"c": 4.0}})
    with pytest.warns(
        store.RatesFileWarning, match=r"rates\.json: `machines\..*\.rates\.s c"
    ) as caught:
        assert store.rate_of("s", "c") is None
    assert any(field in str(w.message) for w in caught), [str(w.message) for w in caught]
    assert all("is ignored: the time estimates do without it" in str(w.message) for w in caught)
    assert store.rate_of("good", "c") == store.Rate(
        "m", "c", "cpu", "d", store.KindRate(1000, 2.0), None, 1.0
    )
    work = Workload(2, 6, tokens=600, reads=12)
    shape = flops.ModelShape(body=1_000, head=100, vocab=10, key="s")
    estimate = est.estimate(work, shape, SPEED, store.rate_of("s", "c"), store.fixed_of("c"), "c")
    assert "nan" not in estimate.words() and "scoring from FLOPs" in estimate.words()
    with pytest.warns(store.RatesFileWarning):
        assert store.keep_fixed("c", 5.0)
    kept = json.loads((cache / store.RATES_FILE).read_text())["machines"][store.machine()]
    assert set(kept["rates"]) == {"good"} and kept["fixed"] == {"c": 5.0}


@quiet_rates
@pytest.mark.parametrize(
    "part, where",
    [
        ({"fixed": {"c": float("inf"), "d": 2.0}}, "fixed.c"),
        ({"fixed": {"c": "12 s", "d": 2.0}}, "fixed.c"),
        ({"fixed": ["c"]}, "fixed"),
        ({"devices": {"cpu": {**asdict(SPEED), "flops_per_second": 0}}}, "devices.cpu"),
        ({"devices": {"cpu": {**asdict(SPEED), "seconds_per_step": -1e-3}}}, "devices.cpu"),
        ({"devices": []}, "devices"),
    ],
    ids=[
        "inf fixed",
        "string fixed",
        "fixed a list",
        "zero FLOP rate",
        "negative step",
        "devices a list",
    ],
)
def test_a_damaged_fixed_part_or_speed_is_ignored_by_name(cache, part, where):
    _write_rates(cache, part)
    with pytest.warns(store.RatesFileWarning, match=rf"`machines\.[^`]*\.{where}` is ignored"):
        assert store.fixed_of("c") is None and store.speed_of("cpu") is None
    assert store.fixed_of("d") == (2.0 if "d" in part.get("fixed", {}) else None)


def test_a_failed_write_leaves_the_rates_file_as_it_was_and_no_staging_file(cache, monkeypatch):
    assert store.keep_fixed("c", 1.0)
    before = (cache / store.RATES_FILE).read_text()

    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(store.os, "replace", full_disk)
    assert not store.keep_fixed("c", 2.0)
    assert (cache / store.RATES_FILE).read_text() == before
    assert sorted(p.name for p in cache.iterdir()) == [store.RATES_FILE, f"{store.RATES_FILE}.lock"]


def _warning_lines(argv: list[str]) -> tuple[int, list[str]]:
    """Run the command line `argv`: its exit code and the warnings it printed, as the terminal shows
    them.
    """
    from culture_probe.cli import main

    shown: list[str] = []
    with warnings.catch_warnings():
        warnings.simplefilter("default")  # as a terminal has it: each warning once
        warnings.showwarning = lambda message, category, *args, **kwargs: shown.append(
            warnings.formatwarning(message, category, *args, **kwargs)
        )
        code = main(argv)
    return code, shown


def test_a_run_and_a_dry_run_go_ahead_with_a_damaged_rates_file_saying_so_once(
    tiny, cache, tmp_path, capsys, monkeypatch
):
    """The red-team's files made every run and dry run on the machine fail with "unexpected error"
    naming no file: now each says, in one warning line naming it, what it ignored, and goes ahead.
    """
    from culture_probe import runner

    data = write_dlama(tmp_path / "dlama")
    scorer = Scorer.from_pretrained(tiny["bert"])
    shape = model_shape(scorer).key
    entry = _rates(score={"tokens": "1000", "seconds": 0})
    device = {
        flops.device_name("cpu"): asdict(SPEED)
    }  # measured: the dry run need not measure it again
    _write_rates(cache, {"rates": {shape: entry}, "devices": device})
    argv = ["run", "dlama_arab_west", "--model", str(tiny["bert"]), "--data-dir", f"dlama={data}"]
    argv += ["--language", "en", "--no-cache"]
    code, shown = _warning_lines([*argv, "--dry-run", "--show", "0"])
    where = f"machines.{store.machine()}.rates.{shape}"
    assert code == 0 and [line for line in shown if "rates.json" in line] == [
        f"culture-probe: warning: {cache / store.RATES_FILE}: `{where}.score.tokens` should be a whole number, "
        f"got '1000'; `{where}` is ignored: the time estimates do without it, and the next run that measures it "
        "rewrites it\n"
    ]
    out = capsys.readouterr().out
    assert "scoring from FLOPs" in out and "nan" not in out
    (cache / store.RATES_FILE).write_text('{"format": 2, "machines": []}')
    # the speed the file lost is measured again (seconds on a busy machine, and no part of what is
    # tested here)
    monkeypatch.setattr(flops, "measure_speed", lambda device: SPEED)
    with pytest.warns(store.RatesFileWarning, match="the whole file is ignored"):
        runner.run(
            "dlama_arab_west",
            scorer,
            data_dir=str(data),
            language="en",
            progress=False,
            no_cache=True,
        )
    assert store.fixed_of("dlama_arab_west") is not None  # rewritten by the run
