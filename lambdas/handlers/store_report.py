"""EventBridge: SDC Report (source sdc.trainer) → stored as evidence."""

from __future__ import annotations

from typing import Any

from lambdas.handlers._deps import deps
from lambdas.logic.intake import parsed_or_refused, store_report
from lambdas.models.events import parse_report_event
from lambdas.observability import logger, metrics, traced


@logger.inject_lambda_context(correlation_id_path="detail.report_id")
@traced
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> Any:
    current = deps()
    return store_report(
        parsed_or_refused(event, parse_report_event, "store_report", current), current
    )
