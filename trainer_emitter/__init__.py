"""trainer_emitter: publish silent-data-corruption alarms from training code to AWS."""

from trainer_emitter.contract import (
    DIMENSIONS,
    NAMESPACE,
    REPORT_DETAIL_TYPE,
    REPORT_SOURCE,
    Metric,
)

__all__ = ["DIMENSIONS", "NAMESPACE", "REPORT_DETAIL_TYPE", "REPORT_SOURCE", "Metric"]
