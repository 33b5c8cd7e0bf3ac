"""Headless Chromium (Debian's `chromium` package) for the dashboard page's tests: render the
widget's HTML the way a browser does, screenshot it and read the DOM back, with the page and the
browser flags `sdc page` uses (`sdc_remediation.infra.cli.page`).

The dashboard sanitizes the widget's HTML and hides each `<cwdb-action>` (its content shows
only when its action runs); the page hides them the same way, so the screenshot shows the
widget as a viewer first sees it.

Not installed, or unable to start: `ChromiumUnavailable`, naming the reason and what to run
(`make test` installs the package as root). The tests fail with it; they never skip.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sdc_remediation.infra.cli.page import BrowserUnavailable, document, dom, screenshot

ChromiumUnavailable = BrowserUnavailable


@dataclass(frozen=True)
class Rendered:
    screenshot: Path
    dom: str
    """The DOM after rendering (`--dump-dom`)."""


def render(widget_html: str, directory: Path) -> Rendered:
    """`widget_html` in its page, screenshotted to `directory/widget.png`, its DOM dumped."""
    page = directory / "widget.html"
    page.write_text(document(widget_html), encoding="utf-8")
    return Rendered(screenshot=screenshot(page, directory / "widget.png"), dom=dom(page))
