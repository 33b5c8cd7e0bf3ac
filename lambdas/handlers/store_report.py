"""EventBridge: SDC Report (source sdc.trainer) → stored as evidence.

An event without the documented shape is refused: audited, then raised, so it lands in the
dead-letter queue."""

from __future__ import annotations

from typing import Any

from lambdas.handlers._deps import deps
from lambdas.logic.intake import refuse, store_report
from lambdas.models.errors import MalformedEvent
from lambdas.models.report import parse_report_event
from lambdas.observability import logger, metrics, traced


@logger.inject_lambda_context(correlation_id_path="detail.report_id")
@traced
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> Any:
    current = deps()
    try:
        report = parse_report_event(event)
    except MalformedEvent as err:
        refuse(event, err, "store_report", current)
        raise
    return store_report(report, current)
