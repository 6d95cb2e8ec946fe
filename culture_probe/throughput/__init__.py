"""What a run will cost here, said before it is paid for, and what it measured once paid
(docs/dry-run.md, "What it will cost"): the workload of its probes, the time that takes as a range
(`estimate`: from the rates a run of the same model shape measured on this machine, else from FLOPs
at this machine's measured speed), and the rates each run measures (`meter`), kept per machine in
the cache folder (`store`).
"""

from culture_probe.throughput.estimate import Estimate, cost_line, span, total_line
from culture_probe.throughput.meter import (
    Meter,
    RunCostNotice,
    estimate_for,
    loaded_workload,
    model_shape,
    probe_workload,
    start_meter,
)
from culture_probe.throughput.store import RatesFileWarning

__all__ = [
    "Estimate",
    "Meter",
    "RatesFileWarning",
    "RunCostNotice",
    "cost_line",
    "estimate_for",
    "loaded_workload",
    "model_shape",
    "probe_workload",
    "span",
    "start_meter",
    "total_line",
]
