"""Remediation state machine (every end): final state, lock released, audit, notification."""

from __future__ import annotations

from typing import Any

from sdc_remediation.lambdas.handlers._deps import deps
from sdc_remediation.lambdas.logic.closing import close_incident
from sdc_remediation.lambdas.models.payloads import parse_close_request
from sdc_remediation.lambdas.observability import logger, metrics, traced


@logger.inject_lambda_context(correlation_id_path="incident_id")
@traced
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> Any:
    return close_incident(parse_close_request(event), deps())
