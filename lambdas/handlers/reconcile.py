"""Scheduled (and `sdc reconcile`): settle the incidents that are stuck (sdc_remediation.lambdas.logic.closing)."""

from __future__ import annotations

from typing import Any

from sdc_remediation.lambdas.handlers._deps import deps
from sdc_remediation.lambdas.logic.closing import reconcile
from sdc_remediation.lambdas.observability import logger, metrics, traced


@logger.inject_lambda_context
@traced
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> Any:
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    return reconcile(deps(), (lambda: remaining() / 1000) if remaining else None)
