"""EventBridge: CloudWatch Alarm Contributor State Change → open (or attach to) an incident.

The correlation id starts as the EventBridge event id and becomes the incident id as soon as
the logic knows it. An event without the documented shape is refused: audited, then raised, so
it lands in the dead-letter queue."""

from __future__ import annotations

from typing import Any

from sdc_remediation.lambdas.handlers._deps import deps
from sdc_remediation.lambdas.logic.intake import open_incident, refuse
from sdc_remediation.lambdas.models.errors import MalformedEvent
from sdc_remediation.lambdas.models.events import parse_contributor_event
from sdc_remediation.lambdas.observability import logger, metrics, traced


@logger.inject_lambda_context(correlation_id_path="id")
@traced
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> Any:
    current = deps()
    try:
        alarm = parse_contributor_event(event)
    except MalformedEvent as err:
        refuse(event, err, "open_incident", current)
        raise
    return open_incident(alarm, current)
