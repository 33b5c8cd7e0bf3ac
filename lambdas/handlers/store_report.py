"""The claims intake: an SDC Report (EventBridge, source sdc.trainer) or a hardware alert (SNS,
from a telemetry cluster's Prometheus workspace) → evidence, and the incidents it opens.

Both are claims by parties the pipeline cannot authenticate, checked the same way
(`sdc_remediation.lambdas.logic.intake`); one function takes both, so they share its reserved concurrency and
its failure queue. An event without the documented shape is refused: audited, then raised, so
it lands in the failure queue."""

from __future__ import annotations

from typing import Any

from sdc_remediation.lambdas.handlers._deps import deps
from sdc_remediation.lambdas.logic.intake import hardware_alerts, refuse, store_report
from sdc_remediation.lambdas.models.errors import MalformedEvent
from sdc_remediation.lambdas.models.hardware_alert import is_sns_delivery, parse_alert_notification
from sdc_remediation.lambdas.models.report import parse_report_event
from sdc_remediation.lambdas.observability import logger, metrics, traced


@logger.inject_lambda_context(correlation_id_path="detail.report_id")
@traced
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> Any:
    current = deps()
    if is_sns_delivery(event):
        try:
            note = parse_alert_notification(event)
        except MalformedEvent as err:
            refuse(event, err, "store_report", current)
            raise
        return hardware_alerts(note, current)
    try:
        report = parse_report_event(event)
    except MalformedEvent as err:
        refuse(event, err, "store_report", current)
        raise
    return store_report(report, current)
