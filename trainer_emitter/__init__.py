"""trainer_emitter: publish silent-data-corruption alarms from training code to AWS.

from trainer_emitter import setup, report
setup(cluster_name="ml-cluster-1", job_name="llama-70b")   # once, after init_process_group
...
if alarm:
    report(alarm)                                            # never raises, never blocks long

The emitter's names load on first use: the Lambda functions import `trainer_emitter.contract`
alone, and their asset ships only that module (and the report schema) of this package.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from trainer_emitter.contract import (
    DIMENSIONS,
    NAMESPACE,
    REPORT_DETAIL_TYPE,
    REPORT_SOURCE,
    Metric,
    Role,
)

if TYPE_CHECKING:
    from trainer_emitter.emitter import (
        ConfigurationError,
        Emitter,
        EmitterConfig,
        ReportResult,
        report,
        setup,
    )
    from trainer_emitter.rankmap import RankInfo, RankMap, gather_rank_map, local_rank_info
    from trainer_emitter.sinks import AwsSink, DeliveryError, EmfSink, MemorySink
    from trainer_emitter.version import __version__

_HOMES = {
    "trainer_emitter.version": ("__version__",),
    "trainer_emitter.emitter": (
        "ConfigurationError",
        "Emitter",
        "EmitterConfig",
        "ReportResult",
        "report",
        "setup",
    ),
    "trainer_emitter.rankmap": ("RankInfo", "RankMap", "gather_rank_map", "local_rank_info"),
    "trainer_emitter.sinks": ("AwsSink", "DeliveryError", "EmfSink", "MemorySink"),
}
_HOME_OF = {name: module for module, names in _HOMES.items() for name in names}


def __getattr__(name: str) -> Any:
    home = _HOME_OF.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(home), name)
    globals()[name] = value
    return value


__all__ = [
    "DIMENSIONS",
    "NAMESPACE",
    "REPORT_DETAIL_TYPE",
    "REPORT_SOURCE",
    "AwsSink",
    "ConfigurationError",
    "DeliveryError",
    "EmfSink",
    "Emitter",
    "EmitterConfig",
    "MemorySink",
    "Metric",
    "RankInfo",
    "RankMap",
    "ReportResult",
    "Role",
    "__version__",
    "gather_rank_map",
    "local_rank_info",
    "report",
    "setup",
]
