"""The time a run will take, said as a range with where it comes from (docs/dry-run.md, "What it
will cost").

After a run of a model of the same shape has measured its rates here (`store.Rate`), the workload's
scoring tokens at the scoring rate, its generation tokens at the generation rate, and the config's
fixed part; a kind the rates do not cover, and any run before the first, from FLOPs (`flops`): the
tokens and LM-head reads at this device's measured speed. Each range is the estimate divided and
multiplied by the spread its basis has shown on the full runs of docs/performance.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from culture_probe.engine.preview import Workload
from culture_probe.throughput.flops import ModelShape
from culture_probe.throughput.store import DeviceSpeed, Rate

# how far each basis has been off, either way, on the full runs measured (docs/performance.md)
MEASURED_SPREAD = 2.0
FLOPS_SPREAD = 3.0
WORDS = {"score": "scoring", "generate": "generation"}


@dataclass(frozen=True)
class Estimate:
    """A run's time, `low` to `high` seconds, and what it comes from in words (`basis`)."""

    low: float
    high: float
    basis: str

    @property
    def middle(self) -> float:
        """The estimate the range is spread around (their geometric mean)."""
        return float((self.low * self.high) ** 0.5)

    def words(self) -> str:
        """The range and its basis."""
        return f"{span(self.low, self.high)} ({self.basis})"


def flop_seconds(
    tokens: int, reads: int, steps: int, shape: ModelShape, speed: DeviceSpeed, candidates: int = 0
) -> float:
    """The time of `tokens` through a model of `shape`, its LM head and log-softmax at `reads`
    positions, in `steps` generation steps, `candidates` scored, at `speed`.
    """
    body = tokens * (speed.seconds_per_token + 2.0 * shape.body / speed.flops_per_second)
    body += candidates * speed.seconds_per_candidate
    head = reads * (
        shape.vocab * speed.seconds_per_vocab_read + 2.0 * shape.head / speed.head_flops_per_second
    )
    return body + head + steps * speed.seconds_per_step


def estimate(
    work: Workload,
    shape: ModelShape,
    speed: DeviceSpeed,
    rate: Rate | None,
    fixed: float | None,
    config: str,
) -> Estimate:
    """The time a run of `config` doing `work` takes on a model of `shape`: at `rate` where it
    measured the kinds `work` asks, from FLOPs at `speed` otherwise; plus the fixed part (`fixed`:
    any model's run of `config` here).
    """
    parts = {
        "score": ((work.tokens or 0) - work.generated, work.reads, 0, work.candidates),
        "generate": (work.generated, work.new, work.steps, 0),
    }
    measured, from_flops, seconds = [], [], 0.0
    for kind, (tokens, reads, steps, candidates) in parts.items():
        if not tokens:
            continue
        kept = getattr(rate, kind) if rate is not None else None
        if kept is not None:
            seconds += tokens / kept.per_second
            measured.append(f"{WORDS[kind]} at {kept.per_second:,.0f} tokens/s")
        else:
            seconds += flop_seconds(tokens, reads, steps, shape, speed, candidates)
            from_flops.append(WORDS[kind])
    own = rate.fixed if rate is not None and rate.config == config else fixed
    seconds += own or 0.0
    spread = FLOPS_SPREAD if from_flops else MEASURED_SPREAD
    return Estimate(
        seconds / spread, seconds * spread, _basis(measured, from_flops, rate, shape, speed, own)
    )


def _basis(
    measured: list[str],
    from_flops: list[str],
    rate: Rate | None,
    shape: ModelShape,
    speed: DeviceSpeed,
    fixed: float | None,
) -> str:
    said = []
    if measured and rate is not None:
        said.append(
            f"{' and '.join(measured)}, measured here ({rate.device}) by a run of {rate.model} on {rate.config} "
            f"({rate.date})"
        )
    if from_flops:
        said.append(
            f"{' and '.join(from_flops)} from FLOPs: {shape.parameters / 1e6:,.1f} M parameters at "
            f"{speed.flops_per_second / 1e9:,.1f} GFLOP/s, measured on this machine's {speed.device} "
            f"({speed.date}); no run of a model of this shape measured here yet"
        )
    if fixed is None:
        said.append("reading, planning and metrics not counted: no run of this config here yet")
    elif fixed >= 0.5:
        said.append(f"{fixed:,.0f} s of reading, planning and metrics")
    return "; ".join(said)


def span(low: float, high: float) -> str:
    """`low` to `high` seconds as a person reads a wait, in the unit of the larger: 0.2-0.6 s, 20-45
    s, 3.2-7.1 min, 1.5-3 h (a tenth of a unit at least: under 0.1 s when even the top is less).
    """
    if high < 0.05:
        return "under 0.1 s"
    for unit, size, limit in (("s", 1, 90), ("min", 60, 5400), ("h", 3600, float("inf"))):
        if high < limit:
            digits = 0 if high / size >= (5 if unit == "s" else 20) else 1
            return f"{max(low / size, 0.1**digits):.{digits}f}-{high / size:.{digits}f} {unit}"
    raise AssertionError("unreachable")


def counts(name: str, work: Workload) -> str:
    """`name`: the probes, candidates and tokens of `work`."""
    candidates = f", {work.candidates:,} candidates" if work.candidates else ""
    about = "" if work.exact else "about "
    counted = "" if work.exact else " (counted on a sample of its requests)"
    tokens = (
        f", {about}{work.tokens:,} tokens through the model{counted}"
        if work.tokens is not None
        else ""
    )
    return f"{name}: {work.probes:,} probes{candidates}{tokens}"


def cost_line(name: str, work: Workload, estimate: Estimate | None) -> str:
    """One line of what a run doing `work` is and the time it takes (None: no estimate, and why)."""
    if work.tokens is None:
        return f"{counts(name, work)}; no tokens or time estimated (a served model tokenizes)"
    if estimate is None:
        return f"{counts(name, work)}; no time estimate: the model's shape could not be read from its config"
    return f"{counts(name, work)}; {estimate.words()}"


def total_line(name: str, parts: Sequence[tuple[Workload, Estimate | None]]) -> str:
    """One line of several workloads together, their ranges summed."""
    work = sum((w for w, _ in parts), Workload())
    if work.tokens is None:
        return f"{counts(name, work)}; no tokens or time estimated (a served model tokenizes)"
    known = [e for _, e in parts if e is not None]
    if len(known) < len(parts):
        return f"{counts(name, work)}; no time estimate: a config's model shape could not be read"
    low, high = sum(e.low for e in known), sum(e.high for e in known)
    return f"{counts(name, work)}; {span(low, high)}, each config at its own rates"
