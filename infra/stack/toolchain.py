"""What synthesizing needs on this machine besides Python: Node.js (the CDK's jsii runtime and its
CLI run on it) and npm (it installs the pinned CLI, `package.json`). Checked up front, so a
missing or old one is one line that says what to install, not a jsii traceback or `make: npm: No
such file or directory`.

Standard library only: `make` runs it with the system Python before `.venv` exists,

    python3 -m sdc_remediation.infra.stack.toolchain          # Node.js
    python3 -m sdc_remediation.infra.stack.toolchain --npm    # Node.js and npm

and exits 1 with the one line on stderr when something is missing.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from typing import Final

NODE_MAJOR: Final = 20
"""The oldest Node.js major release the pinned CDK (jsii, the CLI) runs on, as README.md says."""

INSTALL_HINT: Final = "install it (Debian: apt-get install nodejs npm; otherwise nodejs.org)"

Which = Callable[[str], str | None]
Version = Callable[[str], str]


def _node_version(node: str) -> str:
    done = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30)
    return done.stdout.strip()


def node_problem(which: Which = shutil.which, version: Version = _node_version) -> str | None:
    """Why Node.js cannot run the CDK here (missing, unreadable or too old), or None."""
    node = which("node")
    if node is None:
        return (
            f"Node.js {NODE_MAJOR} or newer is needed (the CDK runs on it) and `node` is not "
            f"on PATH: {INSTALL_HINT}"
        )
    try:
        found = version(node)
    except (OSError, subprocess.SubprocessError) as err:
        return f"Node.js {NODE_MAJOR} or newer is needed; `{node} --version` failed: {err}"
    match = re.match(r"^v?(\d+)\.", found)
    if match is None:
        return f"Node.js {NODE_MAJOR} or newer is needed; `{node} --version` said {found!r}"
    if int(match.group(1)) < NODE_MAJOR:
        return f"Node.js {NODE_MAJOR} or newer is needed; {node} is {found}: {INSTALL_HINT}"
    return None


def npm_problem(which: Which = shutil.which) -> str | None:
    """Why npm (and its `npx`) cannot install and run the pinned CDK CLI here, or None."""
    missing = [tool for tool in ("npm", "npx") if which(tool) is None]
    if not missing:
        return None
    return (
        f"npm is needed (it installs and runs the CDK CLI pinned in package.json) and "
        f"{' and '.join(f'`{tool}`' for tool in missing)} "
        f"{'is' if len(missing) == 1 else 'are'} not on PATH: {INSTALL_HINT}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python3 -m sdc_remediation.infra.stack.toolchain",
        description="Check that Node.js (and with --npm, npm) can run the CDK here.",
    )
    parser.add_argument("--npm", action="store_true", help="check npm and npx too")
    parser.add_argument("--for", dest="purpose", default="make", help="who asks (the message)")
    args = parser.parse_args(argv)
    problem = node_problem() or (npm_problem() if args.npm else None)
    if problem is None:
        return 0
    print(f"{args.purpose}: {problem}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
