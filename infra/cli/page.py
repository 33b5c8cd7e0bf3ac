"""`sdc page`: the dashboard's page of open incidents (the custom widget the `incidents_page`
function answers) rendered here, from the deployment's incidents table: the same incidents
(`open_incidents`, the `by_state` index) worded by the same code (`sdc_remediation.lambdas.wording.page`), in a
page of its own as the dashboard shows the widget (each popup hidden until its link is clicked),
written to an HTML file, and screenshotted to a PNG where headless Chromium is installed.

Against the drill's served account (`make drill ARGS=--serve`) it shows the practice incident
as the dashboard would, with no deployment at all."""

from __future__ import annotations

import argparse
import shutil
import subprocess
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

from sdc_remediation.infra.cli.exits import EXIT_OK
from sdc_remediation.infra.cli.wiring import Operator
from sdc_remediation.lambdas.adapters.dynamodb.incidents import DynamoOpenIncidents
from sdc_remediation.lambdas.models.quantity import count
from sdc_remediation.lambdas.models.widget import WidgetZone
from sdc_remediation.lambdas.wording import page

BROWSERS: Final = ("chromium", "chromium-browser")
"""Headless Chromium's names on PATH (Debian's `chromium` package)."""
INSTALL: Final = "apt-get install -y chromium"
HEADLESS: Final = (
    "--headless",
    "--no-sandbox",  # as root in a container the sandbox cannot start
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
"""Chromium's flags for a page rendered offline: no GPU, no first-run, no network of its own."""
WINDOW: Final = (1200, 900)
BROWSER_TIMEOUT_SECONDS: Final = 60
DOCUMENT: Final = """<!doctype html>
<html><head><meta charset="utf-8"><title>SDC incidents widget</title>
<style>cwdb-action {{ display: none; }} body {{ font-family: sans-serif; font-size: 13px; }}
.btn {{ display: inline-block; padding: 2px 10px; border: 1px solid #545b64; }}
.btn-primary {{ background: #ec7211; color: #fff; }}</style>
</head><body>{widget}</body></html>
"""
"""The widget's HTML inside a page, as the dashboard shows it: `cwdb-action` hidden, buttons
styled as the console's default styles do."""


class BrowserUnavailable(RuntimeError):
    """Headless Chromium is not installed or could not render the page."""


def document(widget_html: str) -> str:
    """The widget's HTML as a page of its own (`DOCUMENT`)."""
    return DOCUMENT.format(widget=widget_html)


def browser() -> str:
    """The path of headless Chromium; BrowserUnavailable naming how to install it."""
    for name in BROWSERS:
        found = shutil.which(name)
        if found:
            return found
    raise BrowserUnavailable(
        f"headless Chromium is not installed (no {' or '.join(BROWSERS)} on PATH); "
        f"install it as root: {INSTALL}"
    )


def run_browser(page_file: Path, *args: str, what: str) -> str:
    """Chromium on `page_file` with `args` and a fresh profile; its stdout."""
    with tempfile.TemporaryDirectory(prefix="sdc-chromium-") as profile:
        command = [
            browser(),
            *HEADLESS,
            f"--user-data-dir={profile}",
            f"--window-size={WINDOW[0]},{WINDOW[1]}",
            *args,
            page_file.resolve().as_uri(),
        ]
        try:
            done = subprocess.run(
                command,
                capture_output=True,
                text=True,
                timeout=BROWSER_TIMEOUT_SECONDS,
                check=False,
            )
        except subprocess.TimeoutExpired as err:
            raise BrowserUnavailable(
                f"chromium did not {what} within {BROWSER_TIMEOUT_SECONDS} s"
            ) from err
    if done.returncode != 0:
        raise BrowserUnavailable(
            f"chromium could not {what} (exit {done.returncode}): {done.stderr.strip()[-800:]}"
        )
    return done.stdout


def screenshot(page_file: Path, png: Path) -> Path:
    """`page_file` rendered by headless Chromium into `png`."""
    png.parent.mkdir(parents=True, exist_ok=True)
    run_browser(page_file, f"--screenshot={png.resolve()}", what="screenshot the page")
    if not png.is_file() or png.stat().st_size == 0:
        raise BrowserUnavailable(f"chromium wrote no screenshot at {png}")
    return png


def dom(page_file: Path) -> str:
    """The DOM of `page_file` after Chromium rendered it (`--dump-dom`)."""
    return run_browser(page_file, "--dump-dom", what="dump the DOM")


def cmd_page(op: Operator, args: argparse.Namespace) -> int:
    incidents = DynamoOpenIncidents(
        op.deployment.incidents_table, op.factory("dynamodb")
    ).open_incidents()
    widget = page.page_html(
        incidents, op.deployment.settings(), now=datetime.now(UTC), zone=WidgetZone.utc()
    )
    html: Path = args.out
    html.parent.mkdir(parents=True, exist_ok=True)
    html.write_text(document(widget), encoding="utf-8")
    lines = [f"{count(len(incidents), 'open incident')}: {html}"]
    if not args.no_png:
        png = html.with_suffix(".png")
        try:
            lines.append(f"screenshot: {screenshot(html, png)}")
        except BrowserUnavailable as err:
            lines.append(f"no screenshot: {err}")
    print("\n".join(lines))
    return EXIT_OK
