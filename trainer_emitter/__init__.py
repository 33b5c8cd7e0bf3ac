"""trainer_emitter: publish silent-data-corruption alarms from training code to AWS.

from trainer_emitter import setup, report
setup(cluster_name="ml-cluster-1", job_name="llama-70b")   # once, after init_process_group
...
if alarm:
    report(alarm)                                            # never raises, never blocks long
"""

from trainer_emitter.contract import (
    DIMENSIONS,
    NAMESPACE,
    REPORT_DETAIL_TYPE,
    REPORT_SOURCE,
    Metric,
    Role,
)
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
    "gather_rank_map",
    "local_rank_info",
    "report",
    "setup",
]
