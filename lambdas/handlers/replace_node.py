"""Remediation state machine: re-check the node, then BatchReplaceClusterNodes."""

from __future__ import annotations

from typing import Any

from sdc_remediation.lambdas.handlers._deps import deps
from sdc_remediation.lambdas.logic.recovery import replace_node
from sdc_remediation.lambdas.models.payloads import parse_incident_ref
from sdc_remediation.lambdas.observability import logger, metrics, traced


@logger.inject_lambda_context(correlation_id_path="incident_id")
@traced
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> Any:
    return replace_node(parse_incident_ref(event), deps())
