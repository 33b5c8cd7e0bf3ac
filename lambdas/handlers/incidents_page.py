"""The dashboard's custom widget: the open incidents as HTML (reads only, decides nothing)."""

from __future__ import annotations

from typing import Any

from sdc_remediation.lambdas.handlers._deps import page_deps
from sdc_remediation.lambdas.logic.approval import incidents_page
from sdc_remediation.lambdas.models.widget import parse_widget_request
from sdc_remediation.lambdas.observability import logger, traced


@logger.inject_lambda_context
@traced
def handler(event: dict[str, Any], context: Any) -> str:
    return incidents_page(parse_widget_request(event), page_deps())
