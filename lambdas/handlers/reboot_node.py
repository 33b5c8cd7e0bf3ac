"""Remediation state machine: re-check the node, then BatchRebootClusterNodes."""

from __future__ import annotations

from typing import Any

from sdc_remediation.lambdas.handlers._deps import deps
from sdc_remediation.lambdas.logic.recovery import reboot_node
from sdc_remediation.lambdas.models.payloads import parse_incident_ref
from sdc_remediation.lambdas.observability import logger, metrics, traced


@logger.inject_lambda_context(correlation_id_path="incident_id")
@traced
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> Any:
    return reboot_node(parse_incident_ref(event), deps())
