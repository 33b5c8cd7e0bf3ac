"""Headless Chromium (Debian's `chromium` package) for the dashboard page's tests: render the
widget's HTML the way a browser does, screenshot it and read the DOM back.

The dashboard sanitizes the widget's HTML and hides each `<cwdb-action>` (its content shows
only when its action runs); the harness hides them the same way, so the screenshot shows the
widget as a viewer first sees it.

Not installed, or unable to start: `ChromiumUnavailable`, naming the reason and what to run
(`make test` installs the package as root). The tests fail with it; they never skip.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Final

BINARY_NAMES: Final = ("chromium", "chromium-browser")
INSTALL: Final = "apt-get update && apt-get install -y chromium"
TIMEOUT_SECONDS: Final = 60
WINDOW: Final = (1200, 900)
HARNESS: Final = """<!doctype html>
<html><head><meta charset="utf-8"><title>SDC incidents widget</title>
<style>cwdb-action {{ display: none; }} body {{ font-family: sans-serif; font-size: 13px; }}
.btn {{ display: inline-block; padding: 2px 10px; border: 1px solid #545b64; }}
.btn-primary {{ background: #ec7211; color: #fff; }}</style>
</head><body>{widget}</body></html>
"""
"""The widget's HTML inside a page, as the dashboard shows it: `cwdb-action` hidden, buttons
styled as the console's default styles do."""


class ChromiumUnavailable(RuntimeError):
    """Chromium is not installed or could not render the page."""


@dataclass(frozen=True)
class Rendered:
    screenshot: Path
    dom: str
    """The DOM after rendering (`--dump-dom`)."""


def chromium_binary() -> str:
    for name in BINARY_NAMES:
        found = shutil.which(name)
        if found:
            return found
    raise ChromiumUnavailable(
        "headless Chromium is not installed (no chromium on PATH); install Debian's package "
        f"as root: {INSTALL}"
    )


def render(widget_html: str, directory: Path) -> Rendered:
    """`widget_html` in the harness, screenshotted to `directory/widget.png`, its DOM dumped."""
    binary = chromium_binary()
    page = directory / "widget.html"
    page.write_text(HARNESS.format(widget=widget_html), encoding="utf-8")
    screenshot = directory / "widget.png"
    common = [
        binary,
        "--headless",
        # Tests run as root in containers, where Chromium's sandbox cannot start.
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        f"--user-data-dir={directory / 'profile'}",
        f"--window-size={WINDOW[0]},{WINDOW[1]}",
    ]
    _run([*common, f"--screenshot={screenshot}", page.as_uri()], "screenshot")
    if not screenshot.is_file() or screenshot.stat().st_size == 0:
        raise ChromiumUnavailable(f"chromium wrote no screenshot at {screenshot}")
    dom = _run([*common, "--dump-dom", page.as_uri()], "dump the DOM")
    return Rendered(screenshot=screenshot, dom=dom)


def _run(command: list[str], what: str) -> str:
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=TIMEOUT_SECONDS, check=False
        )
    except subprocess.TimeoutExpired as err:
        raise ChromiumUnavailable(f"chromium did not {what} within {TIMEOUT_SECONDS} s") from err
    if done.returncode != 0:
        raise ChromiumUnavailable(
            f"chromium could not {what} (exit {done.returncode}): {done.stderr.strip()[-800:]}"
        )
    return done.stdout
