"""A served run whose server dies mid-run, resumed once the server is back, equals an uninterrupted
run: the records written before the failure are kept, only the rest is asked, and records and
metrics come out the same.
"""

from __future__ import annotations

import json
import signal

import pytest
from vllm_compare import FIGURES, Comparison

import culture_probe
from culture_probe.engine.served import ServedScorer
from culture_probe.errors import CultureProbeError

pytestmark = [pytest.mark.slow, pytest.mark.served, pytest.mark.mirror]

CHUNK = 64  # the runner writes a stage's records 64 probes at a time (runner/execution.py CHUNK)


def test_a_run_resumed_after_the_server_was_killed_equals_an_uninterrupted_run(
    vllm, mirror, tmp_path, monkeypatch
):
    # MAPS on 16 proverbs: 32 reasoning probes scored, 80 memorisation probes generated (two chunks)
    settings = {
        "data_dir": str(mirror / "manual" / "maps"),
        "limit": 16,
        "progress": False,
        "no_cache": True,
        "base_url": vllm.base_url,
        "max_retries": 0,
        # a hang guard, not a bound under test: a reply that a busy machine delays is still a reply
        "request_timeout": 300,
    }
    model = f"openai:{vllm.name}"
    whole = culture_probe.run("maps_en", model, out=tmp_path / "whole", **settings)

    asked: list[str] = []
    generate = ServedScorer.generate

    def dying(self, prompts, *args, **kwargs):
        # the server dies (SIGKILL, as a crash) as the second chunk of generations begins
        if len(asked) >= CHUNK and vllm.process is not None:
            vllm.stop(signal.SIGKILL)
        asked.extend(prompts)
        return generate(self, prompts, *args, **kwargs)

    monkeypatch.setattr(ServedScorer, "generate", dying)
    folder = tmp_path / "resumed"
    with pytest.raises(CultureProbeError, match="could not be reached"):
        culture_probe.run("maps_en", model, out=folder, **settings)
    written = (folder / "items.jsonl").read_text().splitlines()
    assert 0 < len(written) < len(whole.records)

    vllm.start()
    asked.clear()
    resumed = culture_probe.run("maps_en", model, out=folder, resume=True, **settings)
    # only the generations that were missing were asked
    generated = sum(r.kind == "generate" for r in whole.records)
    assert len(asked) == generated - sum(
        json.loads(line)["probe"] == "generate" for line in written
    )
    assert [r.key for r in resumed.records] == [r.key for r in whole.records]
    comparison = Comparison()
    for a, b in zip(whole.records, resumed.records, strict=True):
        comparison.check(a.to_json(), b.to_json(), a.key)
    comparison.check(whole.metrics, resumed.metrics, "metrics")
    comparison.assert_equal()
    FIGURES["resume after the server was killed"] = (
        f"{len(written)} of {len(whole.records)} records written before the kill, {len(asked)} asked on "
        f"resume; {comparison.summary()}; restart {vllm.started_in[-1]:.0f} s"
    )
