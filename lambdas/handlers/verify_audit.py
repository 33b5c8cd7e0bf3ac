"""Scheduled (EventBridge): check every audit chain against the audit anchor."""

from __future__ import annotations

from typing import Any

from sdc_remediation.lambdas.handlers._deps import deps
from sdc_remediation.lambdas.logic.core.audit_check import check_audit
from sdc_remediation.lambdas.observability import logger, metrics, traced


@logger.inject_lambda_context
@traced
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> Any:
    return check_audit(deps())
