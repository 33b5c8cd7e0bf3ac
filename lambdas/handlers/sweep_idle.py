"""EventBridge Scheduler, one schedule per swept cluster: run the cluster's idle sweep
(sdc_remediation.lambdas.logic.sweep). The schedule's input is the sweep's request; an input without its
documented shape is refused (audited under the cluster's sweep, or the event) and raised."""

from __future__ import annotations

from typing import Any

from sdc_remediation.lambdas.handlers._deps import deps
from sdc_remediation.lambdas.logic.intake import refuse
from sdc_remediation.lambdas.logic.sweep import sweep
from sdc_remediation.lambdas.logic.sweep.run import ACTOR
from sdc_remediation.lambdas.models.errors import MalformedEvent
from sdc_remediation.lambdas.models.sweep import parse_sweep_request
from sdc_remediation.lambdas.observability import logger, metrics, traced


@logger.inject_lambda_context
@traced
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> Any:
    current = deps()
    try:
        request = parse_sweep_request(event)
    except MalformedEvent as err:
        refuse(event, err, ACTOR, current)
        raise
    return sweep(request, current)
