"""MAPS under `--protocol upstream` against minimal excerpts of the released code (UKPLab/maps at
commit cf96c7ba), restated here in our own words: the XLM-R letter decision with the bare pieces
"a"/"b", the mT0 letter decision from the decoder start, and memorisation success with upstream's
post-processing of the output (4 new tokens for causal models, 19 for mT0). Each test runs the
library with `protocol="upstream"`, compares it with the excerpt, and shows where the default
protocol differs.
"""

from __future__ import annotations

import pytest

from culture_probe.benchmarks.maps.task import MapsTask, memorisation_prompts, reasoning_prompt
from culture_probe.engine import Scorer
from culture_probe.engine.types import CandidateScores
from culture_probe.models.tiny import tiny_model, train_tokenizer
from culture_probe.runner import run

PAIRS = [
    ("Look before you leap", "Think first.", "Do not think first."),
    ("Haste makes waste", "Hurry spoils work.", "Hurry helps work."),
    ("Practice makes perfect", "Training helps.", "Training is useless."),
    ("An apple a day keeps the doctor away", "Apples keep you healthy.", "Apples make you ill."),
    ("Every cloud has a silver lining", "Bad times bring some good.", "Bad times bring only bad."),
    ("Actions speak louder than words", "Deeds matter more.", "Words matter more."),
]
ROWS = [
    {
        "id": f"r{i}",
        "language": "en",
        "proverb": proverb,
        "answer1": right,
        "answer2": wrong,
        "conversation": f'Person 1: "Why?" Person 2: "{proverb}."',
        "is_figurative": bool(i % 2),
        "label": i % 2,
    }
    for i, (proverb, right, wrong) in enumerate(PAIRS)
]
# The memorisation patterns as upstream's experiments/src/patterns.py:3-51 writes them (English in
# lower case).
UPSTREAM_PATTERNS = {
    "en": [
        "proverb: {proverb}",
        "complete this proverb: {proverb}",
        "finish the proverb: {proverb}",
        "what's missing at the end of this proverb: {proverb}",
        "what's the last word of this proverb: {proverb}",
    ],
    "de": [
        "Sprichwort: {proverb}",
        "Vervollständige dieses Sprichwort: {proverb}",
        "Beende das Sprichwort: {proverb}",
        "Was fehlt am Ende dieses Sprichworts: {proverb}",
        "Was ist das letzte Wort dieses Sprichworts: {proverb}",
    ],
}


def test_the_upstream_profile_per_model_kind():
    assert MapsTask.options_for("upstream", {}, "causal") == MapsTask.Options(
        mem_max_new_tokens=4, mem_match="substring"
    )
    assert MapsTask.options_for("upstream", {}, "seq2seq") == MapsTask.Options(
        mem_max_new_tokens=19, mem_match="substring", seq2seq_style="plain"
    )
    assert MapsTask.options_for("upstream", {}, "masked") == MapsTask.Options(
        mlm_letter_pieces="bare", mem_template_lang="native", mem_match="substring"
    )
    assert MapsTask.options_for("default", {}, "masked") == MapsTask.Options()
    sides = {
        d["id"]: d["side"]
        for d in MapsTask(
            "maps_en", MapsTask.options_for("upstream", {}, "masked"), kind="masked"
        ).applied_deviations()
    }
    assert sides == {
        "M1": "default",
        "M4": "upstream",
        "M5": "upstream",
        "M6c": "upstream",
        "M7": "default",
        "M9": "default",
    }  # M1, M7 and M9 have no upstream side (their notes say why)


# ---------------------------------------------------------------- reasoning: the letter decision


def upstream_xlmr_letter(model, tok, prompt: str) -> str:
    """UKPLab/maps experiments/qa_experiments.py:103-112 (XLM-R): encode the prompt followed by "
    <mask>", read the mask's logits of the vocabulary pieces named "a" and "b"
    (convert_tokens_to_ids: bare, not word-initial), softmax the two, and answer b only if its share
    is larger (qa_experiments.py:46-49).
    """
    import torch

    encoded = tok(prompt + " <mask>", return_tensors="pt")
    with torch.no_grad():
        logits = model(**encoded).logits[0]
    at = encoded["input_ids"][0].tolist().index(tok.mask_token_id)
    pair = logits[at, [tok.convert_tokens_to_ids("a"), tok.convert_tokens_to_ids("b")]]
    share_a, share_b = torch.softmax(pair, dim=0).tolist()
    return "b" if share_a < share_b else "a"


def test_xlmr_compares_the_bare_letter_pieces():
    import torch

    tok = train_tokenizer(
        [reasoning_prompt(r) for r in ROWS] * 3, "metaspace", vocab_size=300, model_kind="masked"
    )
    assert {tok.convert_tokens_to_ids(p) for p in ("a", "b", "▁a", "▁b")}.isdisjoint(
        {tok.unk_token_id}
    )
    model = tiny_model("xlm-roberta", tok, layers=1, hidden=32, seed=0)
    scorer = Scorer(model, tok)
    upstream = run(
        "maps_en", scorer, rows=ROWS, protocol="upstream", memorisation=False, progress=False
    )
    default = run("maps_en", scorer, rows=ROWS, memorisation=False, progress=False)
    expected = [upstream_xlmr_letter(model, tok, reasoning_prompt(r)) for r in ROWS]
    assert [r["pred"] for r in upstream.records] == expected
    # The default reads the word-initial pieces "▁a"/"▁b" at the same mask: other scores, here other
    # answers.
    prompt = reasoning_prompt(ROWS[0])
    encoded = tok(prompt + " <mask>", return_tensors="pt")
    at = encoded["input_ids"][0].tolist().index(tok.mask_token_id)
    with torch.no_grad():
        logprobs = torch.log_softmax(model(**encoded).logits[0, at], dim=-1)
    word_initial = logprobs[tok.convert_tokens_to_ids(["▁a", "▁b"])].tolist()
    assert [default.records[0]["score_a"], default.records[0]["score_b"]] == pytest.approx(
        word_initial, abs=1e-5
    )
    assert [r["pred"] for r in default.records] != expected


def upstream_mt0_letter(model, tok, prompt: str) -> str:
    """UKPLab/maps experiments/qa_experiments.py:82-91 (mT0): the prompt alone is the encoder input
    (cut at 1,024 tokens); each letter's ids (`tokenizer(letter, add_special_tokens=False)`) are the
    decoder target, fed shifted right behind the start token, and scored by the mean raw logit of
    the target ids.
    """
    import torch

    encoded = tok(prompt, return_tensors="pt", truncation=True, max_length=1024)
    scores = []
    for letter in ("a", "b"):
        target = torch.tensor([tok(letter, add_special_tokens=False)["input_ids"]])
        with torch.no_grad():
            logits = model(**encoded, decoder_input_ids=model._shift_right(target)).logits
        scores.append(float(logits.gather(2, target[..., None]).mean()))
    return "b" if scores[0] < scores[1] else "a"


def test_mt0_scores_the_letter_from_the_decoder_start():
    tok = train_tokenizer(
        [reasoning_prompt(r) for r in ROWS] * 3, "metaspace", vocab_size=300, model_kind="seq2seq"
    )
    assert all(
        len(tok(letter, add_special_tokens=False)["input_ids"]) == 1 for letter in ("a", "b")
    )
    model = tiny_model("t5", tok, layers=1, hidden=32, seed=0)
    scorer = Scorer(model, tok)
    upstream = run(
        "maps_en", scorer, rows=ROWS, protocol="upstream", memorisation=False, progress=False
    )
    expected = [upstream_mt0_letter(model, tok, reasoning_prompt(r)) for r in ROWS]
    # single-token letters: log-prob = raw-logit decision
    assert [r["pred"] for r in upstream.records] == expected
    default = run("maps_en", scorer, rows=ROWS, memorisation=False, progress=False)
    assert [r["score_a"] for r in default.records] != pytest.approx(
        [r["score_a"] for r in upstream.records]
    )


# ---------------------------------------------------------------- memorisation: upstream's
# post-processing


def upstream_searched_text(decoded: str, pattern: str, front: str, kind: str, language: str) -> str:
    """The text UKPLab/maps experiments/memorization.py:37-60 looked for the proverb in. `decoded`
    is what upstream decoded: a causal model's whole sequence (prompt and continuation, special
    tokens included), mT0's output, or XLM-R's argmax piece; `pattern` is the template as
    patterns.py writes it; `front` the proverb without its last word (lower-cased, without the
    mask).

    Upstream drops "</s>" (causal and mT0), puts a space after each ">", deletes the pattern's text
    up to its first colon (colon included, case-sensitive), drops the space-separated tokens holding
    a ">", lower-cases, strips "." from both ends, and puts the front before mT0's and XLM-R's
    output (a space between, none for zh; XLM-R's front stripped).
    """
    if kind != "masked":
        decoded = decoded.replace("</s>", "")
    decoded = decoded.replace(">", "> ").replace(pattern.partition(":")[0] + ":", "").strip()
    text = (
        " ".join(word.strip() for word in decoded.split(" ") if ">" not in word)
        .strip()
        .lower()
        .strip(".")
    )
    gap = "" if language == "zh" else " "
    if kind == "seq2seq":
        return front + gap + text
    if kind == "masked":
        return front.strip() + gap + text
    return text


def upstream_memorised(decoded: str, proverb: str, pattern: str, kind: str, language: str) -> bool:
    """memorization.py:62-75: success iff the lower-cased proverb is in the searched text (or the
    text is the whole filled pattern, which holds the proverb anyway).
    """
    proverb = proverb.lower()
    front = proverb[:-1] if language == "zh" else proverb.rpartition(" ")[0]
    text = upstream_searched_text(decoded, pattern, front, kind, language)
    return proverb in text or text == pattern.format(proverb=proverb).lower()


class Stub:
    """Engine stand-in of any kind: "a" wins every letter choice; fixed continuations (or mask
    pieces) per prompt.
    """

    identity = {"name_or_path": "stub"}

    def __init__(self, kind: str, outputs: dict[str, str], target_tokens: int = 3):
        self.kind, self.outputs, self.target_tokens = kind, outputs, target_tokens
        self.budgets: set[int] = set()
        self.asked: list[str] = []

    def score(self, requests, options=None):
        import numpy as np

        return [
            CandidateScores(
                r.candidates,
                np.array([-1.0] * len(r.candidates)),
                np.array([self.target_tokens] * len(r.candidates)),
            )
            for r in requests
        ]

    def generate(self, prompts, options):
        self.budgets.add(options.max_new_tokens)
        self.asked += prompts
        return [self.outputs.get(p, " nothing") for p in prompts]

    def fill_mask(self, lefts, options):
        self.asked += lefts
        return [[(self.outputs.get(left, "nothing"), -1.0)] for left in lefts]


CASES = [  # kind, language, proverb, template (0-based), output, upstream success, default success
    ("causal", "en", "An apple a day keeps the doctor away", 0, " away from", True, True),
    # strip(".") drops the period
    ("causal", "de", "Wer A sagt muss auch B sagen.", 1, " sagen.", False, True),
    # ... unless more follows
    ("causal", "de", "Wer A sagt muss auch B sagen.", 2, " sagen. und", True, True),
    # a token holding ">" is dropped
    ("causal", "en", "Look before you leap", 3, " leap<br>", False, True),
    ("causal", "de", "Hunde, die bellen, beißen nicht!", 4, " nicht", False, True),
    ("seq2seq", "en", "Haste makes waste", 1, "Waste!", True, True),
    ("seq2seq", "de", "Wer A sagt muss auch B sagen.", 0, "sagen.", False, True),
    ("seq2seq", "zh", "一寸光阴一寸金", 2, "金", True, True),
    ("masked", "de", "Wer A sagt muss auch B sagen.", 1, "sagen", False, True),
    ("masked", "de", "Hunde bellen", 3, "bellen", True, True),
]


@pytest.mark.parametrize("kind,language,proverb,t,output,upstream_success,default_success", CASES)
def test_memorisation_success_follows_upstreams_post_processing(
    kind, language, proverb, t, output, upstream_success, default_success
):
    row = {**ROWS[0], "id": "p", "language": language, "proverb": proverb}
    successes, prompts = {}, {}
    for protocol in ("upstream", "default"):
        options = MapsTask.options_for(protocol, {}, kind)
        prompts[protocol] = memorisation_prompts(proverb, language, options.mem_template_lang)
        stub = Stub(kind, {prompts[protocol][t]: output})
        result = run(f"maps_{language}", stub, rows=[row], protocol=protocol, progress=False)
        successes[protocol] = [r["success"] for r in result.records if "success" in r]
        assert sorted(stub.asked) == sorted(prompts[protocol])
    # M5: upstream asked XLM-R in the proverb's own language (memorization.py:101), the others in
    # English
    pattern = UPSTREAM_PATTERNS["de" if kind == "masked" else "en"][t]
    assert (
        prompts["upstream"][t] == pattern.format(proverb=proverb.lower().rpartition(" ")[0]).lower()
        or language == "zh"
    )
    # what upstream decoded: a causal model's prompt and continuation together, the others' output
    # alone
    decoded = prompts["upstream"][t] + output if kind == "causal" else output
    assert upstream_memorised(decoded, proverb, pattern, kind, language) is upstream_success
    assert successes["upstream"][t] is upstream_success
    assert successes["default"][t] is default_success


def test_budget_is_four_new_tokens_for_causal_models_and_nineteen_for_mt0():
    """UKPLab/maps experiments/memorization.py:41 generates 4 new tokens for causal models; :37
    calls mT0's generate without a length, so the HF default max_length 20 applies (the decoder
    start token and 19 new tokens).
    """
    row = {**ROWS[1], "id": "p"}
    for kind, upstream_budget in (("causal", 4), ("seq2seq", 19)):
        upstream, default = Stub(kind, {}, target_tokens=5), Stub(kind, {}, target_tokens=5)
        run("maps_en", upstream, rows=[row], protocol="upstream", progress=False)
        run("maps_en", default, rows=[row], progress=False)
        # default: max(4, T + 2)
        assert upstream.budgets == {upstream_budget} and default.budgets == {7}


def test_causal_memorisation_on_a_real_model_matches_upstream():
    """A tiny Llama-style model (SentencePiece-like tokenizer, which drops the leading space of a
    continuation decoded alone). UKPLab/maps experiments/memorization.py:39-42 generated 4 new
    tokens and decoded the whole sequence, prompt included, which :44-75 then post-processed and
    searched.
    """
    import torch

    fronts = ["look before you", "haste makes", "practice makes"]
    texts = [p for f in fronts for p in memorisation_prompts(f + " x", "en")] * 3 + [
        "away leap waste perfect"
    ] * 3
    tok = train_tokenizer(texts, "metaspace", vocab_size=200, model_kind="causal")
    model = tiny_model("llama", tok, layers=1, hidden=32, seed=6)

    def upstream_generate(prompt: str) -> tuple[str, list[int]]:
        encoded = tok(prompt, return_tensors="pt")
        with torch.no_grad():
            out = model.generate(**encoded, max_new_tokens=4, do_sample=False)[0]
        return tok.decode(out), out[encoded["input_ids"].shape[1] :].tolist()

    # Plant one proverb: its last word is what the model says after the first template's prompt (a
    # word-initial piece, so that a joint decoding and the library's prompt + continuation read
    # alike: see upstream_completion).
    decoded, new_ids = upstream_generate(memorisation_prompts(fronts[0] + " x", "en")[0])
    assert tok.convert_ids_to_tokens(new_ids)[0].startswith("▁")
    planted = fronts[0] + " " + decoded.split("proverb: " + fronts[0])[1].split()[0]
    rows = [
        {**ROWS[0], "id": f"p{i}", "proverb": p}
        for i, p in enumerate([planted, fronts[1] + " waste"])
    ]
    result = run("maps_en", Scorer(model, tok), rows=rows, protocol="upstream", progress=False)
    got = {(r["id"], r["template"]): r for r in result.records if "success" in r}
    for row in rows:
        for t, prompt in enumerate(memorisation_prompts(row["proverb"], "en")):
            decoded, new_ids = upstream_generate(prompt)
            record = got[row["id"], t + 1]
            assert len(new_ids) == 4 and record["output"] == tok.decode(
                new_ids, skip_special_tokens=True
            )
            assert record["success"] is upstream_memorised(
                decoded, row["proverb"], UPSTREAM_PATTERNS["en"][t], "causal", "en"
            ), (row["proverb"], t, decoded)
    assert got["p0", 1]["success"] and not got["p1", 1]["success"]
