"""The page job: the dashboard's custom widget of the open incidents. Reads only; decides
nothing."""

from __future__ import annotations

from sdc_remediation.lambdas.logic.ports import PageDeps
from sdc_remediation.lambdas.models.widget import WidgetRequest
from sdc_remediation.lambdas.observability import logger
from sdc_remediation.lambdas.wording import page


def incidents_page(request: WidgetRequest, deps: PageDeps) -> str:
    """The dashboard's custom widget: the open incidents as HTML (`sdc_remediation.lambdas.wording.page`), or
    the widget's documentation when the console asks for it. Reads only; decides nothing."""
    if request.describe:
        return page.DESCRIBE
    incidents = deps.incidents.open_incidents()
    logger.info("page rendered", incidents=len(incidents))
    return page.page_html(incidents, deps.settings, now=deps.clock.now(), zone=request.zone)
