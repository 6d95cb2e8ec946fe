"""Whole protocol runs through a real vLLM server (`openai:NAME` with its base URL) against the
in-process engine on the same folder, each with its default options and its upstream profile: every
record (scores within 1e-4, predictions, rankings and generated texts equal) and the metrics. A
setting the server cannot serve is refused before the first request reaches it.
"""

from __future__ import annotations

from typing import Any

import pytest
from vllm_compare import FIGURES, Comparison

import culture_probe
from culture_probe.errors import UnsupportedModelError

pytestmark = [pytest.mark.slow, pytest.mark.served, pytest.mark.mirror]

PLAIN_RANK = {"mode": "rank", "rank_prompt": "plain"}
# (config, protocol options, --limit, folder of its data under the mirror); each runs as is and with
# protocol="upstream"
CASES: list[tuple[str, dict[str, Any], int, str | None]] = [
    # the reasoning question scored (a/b) and the memorisation texts generated
    ("maps_en", {}, 3, "manual/maps"),
    ("camel_co_prompts", {}, 1, None),
    ("camel_ag_prompts", {}, 1, None),
    ("xfakt_factual_recall", PLAIN_RANK, 1, None),
    ("xfakt_factual_recall", {"judge": "string", "max_new_tokens": 16}, 1, None),
    ("dlama_arab_west", {}, 1, "manual/dlama"),
    # a right context after the slot (its templates all have a left context)
    ("fmlama_he", {}, 1, None),
    # templates that start with the slot: the first candidate token after the model's start token,
    # sent by token ids
    ("fmlama_en", {}, 1, None),
]
PROTOCOLS = ["default", "upstream"]
COUNTED = {
    "requests": "vllm:request_success_total",
    "prompt tokens": "vllm:prompt_tokens_total",
    "prefix-cache hits": "vllm:prefix_cache_hits_total",
}


def both(vllm, mirror, config: str, options: dict[str, Any], limit: int, data: str | None):
    """(in-process run, served run, what the server counted) of `config` on the served model's
    folder.
    """
    settings: dict[str, Any] = {"limit": limit, "progress": False, "no_cache": True}
    if data:
        settings["data_dir"] = str(mirror / data)
    local = culture_probe.run(config, str(vllm.model), **settings, **options)
    before = vllm.metrics()
    served = culture_probe.run(
        config, f"openai:{vllm.name}", base_url=vllm.base_url, concurrency=8, **settings, **options
    )
    after = vllm.metrics()
    counted = {label: after.get(name, 0) - before.get(name, 0) for label, name in COUNTED.items()}
    return local, served, counted


def compare_runs(local, served) -> Comparison:
    """Records, key by key and in order, and metrics; the in-process run's truncation count is its
    own (a server cuts long inputs itself, and reports nothing).
    """
    assert [r.key for r in served.records] == [r.key for r in local.records]
    comparison = Comparison()
    for a, b in zip(local.records, served.records, strict=True):
        comparison.check(a.to_json(), b.to_json(), a.key)
    ours = {k: v for k, v in local.metrics.items() if k != "truncation"}
    comparison.check(ours, served.metrics, "metrics")
    return comparison


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize(
    ("config", "options", "limit", "data"),
    CASES,
    ids=[f"{c[0]}-{'-'.join(f'{k}={v}' for k, v in c[1].items()) or 'defaults'}" for c in CASES],
)
def test_a_served_run_equals_the_in_process_run(
    vllm, mirror, config, options, limit, data, protocol
):
    options = {**options, **({"protocol": "upstream"} if protocol == "upstream" else {})}
    local, served, counted = both(vllm, mirror, config, options, limit, data)
    comparison = compare_runs(local, served)
    comparison.assert_equal()
    assert local.records and comparison.numbers + comparison.texts > 0
    assert counted["requests"] > 0  # it was the server that answered
    FIGURES[f"{config} {options}"] = (
        f"{len(served.records)} records, {comparison.summary()}; server: "
        + ", ".join(f"{v:.0f} {k}" for k, v in counted.items())
    )


@pytest.mark.parametrize(
    ("config", "options", "why"),
    [
        # X-FaKT's rank mode scores the countries after the chat template, which a server does not
        # expose
        ("xfakt_factual_recall", {"mode": "rank"}, "chat"),
    ],
)
def test_a_run_the_server_cannot_serve_is_refused_before_any_request(vllm, config, options, why):
    before = vllm.metrics()
    with pytest.raises(UnsupportedModelError, match=why):
        culture_probe.run(
            config,
            f"openai:{vllm.name}",
            base_url=vllm.base_url,
            limit=1,
            progress=False,
            no_cache=True,
            **options,
        )
    after = vllm.metrics()
    assert {name: after.get(name) for name in COUNTED.values()} == {
        name: before.get(name) for name in COUNTED.values()
    }
