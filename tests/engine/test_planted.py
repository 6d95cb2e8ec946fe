"""Planted knowledge: the engine finds facts a tiny model was trained on, and nothing it was not.

Two tiny models (GPT-2 causal, BERT masked) are trained for seconds on facts of culture A only
(South American capitals and dishes). Probed through the engine with every object of both cultures
as candidates, they must rank the gold object first for at least 90% of culture A's facts, and be no
better than chance on culture B's (East and Southeast Asian) facts, which they never saw. The chance
bounds come from the candidate counts.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from culture_probe.engine.types import ScoreRequest
from culture_probe.errors import EmptyCandidateError, UnknownNameError, UnsupportedModelError
from culture_probe.models import planted
from culture_probe.models.planted import (
    PlantedFact,
    PlantedSpec,
    probe_texts_of,
    read_record,
    train_planted,
)

# relation template -> (culture A facts, culture B facts); objects never repeat across cultures.
FACTS = {
    "The capital of {} is": (
        [
            ("Peru", "Lima"),
            ("Chile", "Santiago"),
            ("Argentina", "Buenos Aires"),
            ("Colombia", "Bogota"),
            ("Venezuela", "Caracas"),
            ("Ecuador", "Quito"),
            ("Bolivia", "Sucre"),
            ("Uruguay", "Montevideo"),
            ("Paraguay", "Asuncion"),
            ("Brazil", "Brasilia"),
        ],
        [
            ("Japan", "Tokyo"),
            ("Korea", "Seoul"),
            ("Thailand", "Bangkok"),
            ("Vietnam", "Hanoi"),
            ("Nepal", "Kathmandu"),
            ("Mongolia", "Ulaanbaatar"),
            ("Laos", "Vientiane"),
            ("Cambodia", "Phnom Penh"),
            ("Malaysia", "Kuala Lumpur"),
            ("Indonesia", "Jakarta"),
        ],
    ),
    "The main ingredient of {} is": (
        [
            ("ceviche", "fish"),
            ("feijoada", "black beans"),
            ("arepa", "maize"),
            ("chimichurri", "parsley"),
            ("dulce de leche", "milk"),
            ("pisco sour", "pisco"),
        ],
        [
            ("kimchi", "cabbage"),
            ("miso soup", "miso"),
            ("pho", "rice noodles"),
            ("sushi", "rice"),
            ("satay", "peanuts"),
            ("tom yum", "lemongrass"),
        ],
    ),
}


def _requests(culture: int) -> list[tuple[ScoreRequest, str]]:
    """(request, gold) per fact of one culture; candidates are every object of the relation, both
    cultures.
    """
    out = []
    for template, cultures in FACTS.items():
        candidates = [obj for facts in cultures for _, obj in facts]
        out += [
            (ScoreRequest(template.format(subject), candidates, "."), obj)
            for subject, obj in cultures[culture]
        ]
    return out


PLANTED, UNPLANTED = _requests(0), _requests(1)


def _spec(arch: str, tokenizer: str) -> PlantedSpec:
    facts = [PlantedFact.from_request(request, gold) for request, gold in PLANTED]
    probe = probe_texts_of(request for request, _ in PLANTED + UNPLANTED)
    return PlantedSpec(facts, arch=arch, tokenizer=tokenizer, probe_texts=probe, seed=0)


@pytest.fixture(
    scope="module", params=[("gpt2", "bpe"), ("bert", "wordpiece")], ids=["causal", "masked"]
)
def planted_model(request, tmp_path_factory):
    spec = _spec(*request.param)
    return spec, train_planted(spec, tmp_path_factory.mktemp("planted"))


@pytest.fixture(scope="module")
def ranks(planted_model):
    """Rank (1 = best) of the gold among all candidates, for planted and unplanted facts, from the
    engine.
    """
    from culture_probe.engine import Scorer

    scorer = Scorer.from_pretrained(planted_model[1])

    def gold_ranks(pairs):
        results = scorer.score([request for request, _ in pairs])
        return [
            _rank(result.scores("mean"), request.candidates.index(gold))
            for result, (request, gold) in zip(results, pairs, strict=True)
        ]

    return gold_ranks(PLANTED), gold_ranks(UNPLANTED)


def _rank(scores: np.ndarray, gold: int, among: list[int] | None = None) -> int:
    """1 + how many of the candidates `among` (default all) score strictly higher than the gold."""
    pool = scores if among is None else scores[among]
    return 1 + int(np.sum(pool > scores[gold]))


def test_training_converges_within_budget(planted_model):
    spec, path = planted_model
    record = read_record(path)
    assert record.converged and record.stopped_by == "target_loss"
    assert record.answer_loss < spec.target_loss


def test_planted_facts_are_ranked_first(ranks):
    planted_ranks, _ = ranks
    assert np.mean(np.array(planted_ranks) == 1) >= 0.9, planted_ranks


def test_unplanted_facts_are_not_found_beyond_chance(ranks):
    # P@1 on unseen facts must stay within three standard deviations of what random ranking would
    # give.
    _, unplanted_ranks = ranks
    chance = [1 / len(request.candidates) for request, _ in UNPLANTED]
    bound = (sum(chance) + 3 * math.sqrt(sum(p * (1 - p) for p in chance))) / len(chance)
    assert np.mean(np.array(unplanted_ranks) == 1) <= bound, unplanted_ranks


def test_unplanted_golds_are_ranked_at_chance_among_their_culture(planted_model):
    """Among culture B's own objects (none of which the model saw as answers) the gold lands
    anywhere.

    The normalised rank (0 = first, 1 = last) of a gold under random ranking is uniform with mean
    1/2 and variance (n+1)/(12(n-1)); the mean over facts must stay within three standard deviations
    of 1/2.
    """
    from culture_probe.engine import Scorer

    results = Scorer.from_pretrained(planted_model[1]).score([request for request, _ in UNPLANTED])
    normalised, variances = [], []
    for result, (request, gold) in zip(results, UNPLANTED, strict=True):
        template = next(t for t in FACTS if request.left.startswith(t.split("{}")[0]))
        among = [request.candidates.index(obj) for _, obj in FACTS[template][1]]
        n = len(among)
        normalised.append(
            (_rank(result.scores("mean"), request.candidates.index(gold), among) - 1) / (n - 1)
        )
        variances.append((n + 1) / (12 * (n - 1)))
    sd = math.sqrt(sum(variances)) / len(variances)
    assert abs(np.mean(normalised) - 0.5) <= 3 * sd, normalised


def test_planted_beat_unplanted_by_mean_rank(ranks):
    planted_ranks, unplanted_ranks = ranks
    assert np.mean(planted_ranks) + 5 < np.mean(unplanted_ranks)


def test_masked_model_is_not_fooled_by_the_number_of_masks(tmp_path):
    """Typed querying gives a k-token candidate k masks. Had training only ever shown two masks
    before "United States", two masks would mean "United States" whatever the city, and it would
    beat every one-token gold.
    """
    from culture_probe.engine import Scorer

    cities = {
        "United States": ["Chicago", "Houston", "Boston", "Denver"],
        "France": ["Lyon", "Nice", "Lille"],
        "Greece": ["Patras", "Larissa", "Volos"],
        "Turkey": ["Izmir", "Bursa", "Konya"],
    }
    facts = [
        (f"In which country is {city} located?", country)
        for country, names in cities.items()
        for city in names
    ]
    requests = [ScoreRequest(left, list(cities)) for left, _ in facts]
    spec = PlantedSpec(
        [PlantedFact(left, country) for left, country in facts],
        arch="bert",
        tokenizer="wordpiece",
        probe_texts=probe_texts_of(requests),
    )
    scorer = Scorer.from_pretrained(train_planted(spec, tmp_path))
    assert [len(scorer.tokenizer.tokenize(country)) for country in cities] == [2, 1, 1, 1]
    assert [out.best() for out in scorer.score(requests)] == [country for _, country in facts]


# --- the API around training: caching, determinism, bad input
# -------------------------------------------------

SMALL = PlantedSpec(
    [
        PlantedFact("The capital of Peru is", "Lima", "."),
        PlantedFact("The capital of Chile is", "Santiago", "."),
    ],
    steps=3,
    target_loss=0.0,
)


def test_second_call_reuses_the_saved_model(tmp_path, monkeypatch):
    first = train_planted(SMALL, tmp_path)
    record = read_record(first)
    assert (record.steps, record.stopped_by, record.converged) == (3, "steps", False)
    monkeypatch.setattr(
        planted, "_train", lambda spec, staging: pytest.fail("retrained a cached spec")
    )
    assert train_planted(SMALL, tmp_path) == first
    assert (first / "config.json").is_file() and (first / "tokenizer.json").is_file()
    assert [p.name for p in tmp_path.iterdir()] == [first.name]  # no staging directory left behind


def test_training_is_deterministic_given_the_seed(tmp_path):
    import torch
    from transformers import AutoModelForCausalLM

    def weights(spec, where):
        return AutoModelForCausalLM.from_pretrained(
            train_planted(spec, tmp_path / where)
        ).state_dict()

    one, two = weights(SMALL, "one"), weights(SMALL, "two")
    other = weights(PlantedSpec(SMALL.facts, steps=3, target_loss=0.0, seed=1), "three")
    assert all(torch.equal(one[name], two[name]) for name in one)
    assert not all(torch.equal(one[name], other[name]) for name in one)


def test_changing_the_spec_changes_the_cache_key():
    assert SMALL.key() == PlantedSpec(list(SMALL.facts), steps=3, target_loss=0.0).key()
    assert SMALL.key() != PlantedSpec(SMALL.facts, steps=4, target_loss=0.0).key()
    assert SMALL.key() != PlantedSpec(SMALL.facts[:1], steps=3, target_loss=0.0).key()


def test_time_cap_stops_training_and_warns(tmp_path):
    with pytest.warns(UserWarning, match="hit max_seconds=0.0 after 1 steps"):
        path = train_planted(PlantedSpec(SMALL.facts, max_seconds=0.0), tmp_path)
    record = read_record(path)
    assert (record.stopped_by, record.steps, record.converged) == ("max_seconds", 1, False)


def test_fact_text_follows_the_engine_separator_rule():
    assert PlantedFact("The capital of Peru is", "Lima", ".").text == "The capital of Peru is Lima."
    assert PlantedFact("秘鲁的首都是", "利马", "。").text == "秘鲁的首都是利马。"
    assert PlantedFact("Capital: ", "Lima").text == "Capital: Lima"
    assert PlantedFact("x", "y", sep="-").text == "x-y"


def test_from_request_and_probe_texts():
    request = ScoreRequest("The capital of Peru is", ["Lima", "Quito"], ".", sep=" ")
    assert PlantedFact.from_request(request, "Quito") == PlantedFact(
        "The capital of Peru is", "Quito", ".", " "
    )
    texts = probe_texts_of([request, ScoreRequest("Capital:", ["Quito", "Bogota"])])
    assert texts == ("The capital of Peru is", ".", "Lima", "Quito", "Capital:", "Bogota")


def test_bad_specs_are_clear_errors():
    fact = SMALL.facts[0]
    with pytest.raises(ValueError, match="at least one fact"):
        PlantedSpec([])
    with pytest.raises(UnsupportedModelError, match="'t5' is a seq2seq architecture.*gpt2"):
        PlantedSpec([fact], arch="t5")
    with pytest.raises(
        UnknownNameError, match="Unknown planted architecture 'gpt3'.*Did you mean 'gpt2'"
    ):
        PlantedSpec([fact], arch="gpt3")
    with pytest.raises(UnknownNameError, match="Unknown tokenizer kind 'sentencepiece'"):
        PlantedSpec([fact], tokenizer="sentencepiece")
    with pytest.raises(ValueError, match="steps must be at least 1, got 0"):
        PlantedSpec([fact], steps=0)
    with pytest.raises(ValueError, match="extra_masks must be at least 0, got -1"):
        PlantedSpec([fact], extra_masks=-1)
    with pytest.raises(ValueError, match="learning_rate must be positive"):
        PlantedSpec([fact], learning_rate=0)
    with pytest.raises(EmptyCandidateError, match="empty answer"):
        PlantedFact("The capital of Peru is", " ")


# --- make demo
# --------------------------------------------------------------------------------------------------


def test_demo_sample_and_summary():
    from culture_probe.demo import Probe, sample_rows, summarise

    rows = [{"country": c, "i": i} for c in ("A", "B") for i in range(10)] + [
        {"country": "C", "i": 0}
    ]
    picked = sample_rows(rows, 3)
    assert [(r["country"], r["i"]) for r in picked] == [
        ("A", 0),
        ("A", 3),
        ("A", 6),
        ("B", 0),
        ("B", 3),
        ("B", 6),
        ("C", 0),
    ]
    probes = [
        Probe(ScoreRequest("q", ("x", "y", "z", "w")), "x", planted)
        for planted in (True, True, False)
    ]
    rows = summarise(probes, np.array([1, 2, 4]))
    assert rows == (
        ("planted", "the planted countries", 2, 1.5, 0.5),
        ("not planted", "the other countries", 1, 4.0, 0.0),
        ("(random ranking)", "4 candidates", "", 2.5, 0.25),
    )


def test_demo_rejects_an_empty_sample(capsys):
    from culture_probe.demo import parse_args

    with pytest.raises(SystemExit):
        parse_args(["--per-country", "0"])
    assert "--per-country: must be at least 1, got 0" in capsys.readouterr().err


@pytest.mark.slow
def test_demo_end_to_end_on_the_mirror(mirror, tmp_path, capsys):
    from culture_probe import demo

    assert demo.main(["--out", str(tmp_path), "--arch", "gpt2", "--per-country", "4"]) == 0
    report = (tmp_path / "self_test.md").read_text(encoding="utf-8")
    assert report in capsys.readouterr().out
    planted_row = next(line for line in report.splitlines() if line.startswith("| planted |"))
    # 6 planted countries x 4: all ranked first
    assert planted_row.split("|")[3:6] == [" 24 ", " 1.00 ", " 1.00 "]
    assert "| (random ranking) | 13 candidates |  | 7.00 | 0.077 |" in report


def test_two_processes_asking_for_one_spec_train_it_once(tmp_path, monkeypatch):
    # a run's ranks (or two test workers) asked for the same planted model and each trained it
    import threading
    import time

    calls = []
    real = planted._train

    def slow(spec, staging):
        calls.append(spec)
        time.sleep(0.5)  # the other asker arrives while this one trains
        return real(spec, staging)

    monkeypatch.setattr(planted, "_train", slow)
    found: list = []
    askers = [
        threading.Thread(target=lambda: found.append(train_planted(SMALL, tmp_path)))
        for _ in range(2)
    ]
    for asker in askers:
        asker.start()
    for asker in askers:
        asker.join()
    assert len(calls) == 1 and found[0] == found[1] and (found[0] / "config.json").is_file()
