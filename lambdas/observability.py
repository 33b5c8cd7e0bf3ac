"""The one Powertools Logger, Tracer and Metrics of the functions, shared by every layer.

Service name and metrics namespace come from Powertools' own variables
(`POWERTOOLS_SERVICE_NAME`, `POWERTOOLS_METRICS_NAMESPACE`); without them (tests, the local
drill) the defaults below keep metrics flushable. The Tracer disables itself outside Lambda or
with `POWERTOOLS_TRACE_DISABLED=true`.
"""

from __future__ import annotations

import os
import warnings

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit

SERVICE = os.environ.get("POWERTOOLS_SERVICE_NAME") or "sdc-remediation"

logger = Logger(service=SERVICE)
tracer = Tracer(service=SERVICE)
metrics = Metrics(
    service=SERVICE,
    namespace=os.environ.get("POWERTOOLS_METRICS_NAMESPACE") or "SDCRemediation",
)


# An invocation may rightly record no counter (a malformed event raises before any step runs);
# Powertools would warn about the empty metric set on every such invocation.
warnings.filterwarnings("ignore", message="No application metrics to publish", category=UserWarning)


def count(name: str, value: int = 1) -> None:
    """One pipeline counter (EMF, flushed by the handler's `log_metrics`)."""
    metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)
