"""Approval state machine: validate the decision and answer the waiting task."""

from __future__ import annotations

from typing import Any

from sdc_remediation.lambdas.handlers._deps import deps
from sdc_remediation.lambdas.logic.approval import decide
from sdc_remediation.lambdas.models.payloads import parse_decision_request
from sdc_remediation.lambdas.observability import logger, metrics, traced


@logger.inject_lambda_context(correlation_id_path="incident_id")
@traced
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> Any:
    return decide(parse_decision_request(event), deps())
