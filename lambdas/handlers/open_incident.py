"""EventBridge: CloudWatch Alarm Contributor State Change → open (or attach to) an incident.

The correlation id starts as the EventBridge event id and becomes the incident id as soon as
the logic knows it."""

from __future__ import annotations

from typing import Any

from lambdas.handlers._deps import deps
from lambdas.logic.intake import open_incident, parsed_or_refused
from lambdas.models.events import parse_contributor_event
from lambdas.observability import logger, metrics, traced


@logger.inject_lambda_context(correlation_id_path="id")
@traced
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> Any:
    current = deps()
    return open_incident(
        parsed_or_refused(event, parse_contributor_event, "open_incident", current), current
    )
