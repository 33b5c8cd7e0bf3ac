"""The one Powertools Logger, Tracer and Metrics of the functions, shared by every layer.

Service name and metrics namespace come from Powertools' own variables
(`POWERTOOLS_SERVICE_NAME`, `POWERTOOLS_METRICS_NAMESPACE`); without them (tests, the local
drill) the deployed values of `sdc_remediation.lambdas.metric_names` apply, so a metric lands where the
dashboard looks for it. Handlers are traced (`traced`) only in Lambda, where X-Ray is on unless
`POWERTOOLS_TRACE_DISABLED=true`.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit

from sdc_remediation.lambdas.metric_names import PIPELINE_NAMESPACE, SERVICE_NAME, PipelineMetric
from sdc_remediation.lambdas.models.environment import EnvVar

SERVICE = os.environ.get(EnvVar.POWERTOOLS_SERVICE_NAME) or SERVICE_NAME

logger = Logger(service=SERVICE)
metrics = Metrics(
    service=SERVICE,
    namespace=os.environ.get(EnvVar.POWERTOOLS_METRICS_NAMESPACE) or PIPELINE_NAMESPACE,
)


def traced(handler: Callable[..., Any]) -> Callable[..., Any]:
    """The handler in an X-Ray subsegment (its response left out) when it runs in Lambda; the
    handler itself elsewhere (tests, the local run, the CLI), where Powertools' Tracer would
    disable itself anyway, yet building one loads the X-Ray SDK, whose recorder (outside Lambda)
    makes botocore clients for its sampler at import: more than importing boto3 costs."""
    if "LAMBDA_TASK_ROOT" not in os.environ:
        return handler
    return Tracer(service=SERVICE).capture_lambda_handler(handler, capture_response=False)


# An invocation may rightly record no counter (a malformed event raises before any step runs);
# Powertools would warn about the empty metric set on every such invocation.
warnings.filterwarnings("ignore", message="No application metrics to publish", category=UserWarning)


def count(metric: PipelineMetric, value: int = 1) -> None:
    """One pipeline counter (EMF, flushed by the handler's `log_metrics`)."""
    metrics.add_metric(name=metric.value, unit=MetricUnit.Count, value=value)


def seconds(metric: PipelineMetric, value: float) -> None:
    """One duration, in seconds (negative values, from a skewed clock, are recorded as 0)."""
    metrics.add_metric(name=metric.value, unit=MetricUnit.Seconds, value=max(0.0, value))


def gauge(metric: PipelineMetric, value: int) -> None:
    """The current level of something (unit Count): plot its Maximum, never its Sum."""
    metrics.add_metric(name=metric.value, unit=MetricUnit.Count, value=value)
