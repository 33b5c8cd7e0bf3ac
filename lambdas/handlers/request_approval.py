"""Remediation state machine (.waitForTaskToken): store the token, publish the approval card."""

from __future__ import annotations

from typing import Any

from sdc_remediation.lambdas.handlers._deps import deps
from sdc_remediation.lambdas.logic.approval import request_approval
from sdc_remediation.lambdas.models.payloads import parse_approval_request
from sdc_remediation.lambdas.observability import logger, metrics, traced


@logger.inject_lambda_context(correlation_id_path="incident_id")
@traced
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> Any:
    return request_approval(parse_approval_request(event), deps())
