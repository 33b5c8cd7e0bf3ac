"""The CDK app: settings from context, the Lambda asset, the stack, cdk-nag. Nothing else.

Run by the CDK CLI through cdk.json (`python3 -m infra.stack.app`, from the repository root).
There a bad `sdc:*` setting is one line on stderr naming the key, and exit status 1, never a
traceback: the CDK CLI then adds only that the app failed.
"""

from __future__ import annotations

import sys

from aws_cdk import App

from infra.stack.asset import LambdaAsset, build_lambda_asset
from infra.stack.nag import add_checks
from infra.stack.settings import Settings
from infra.stack.stack import SdcRemediationStack
from lambdas.models.errors import SettingsError


def build_app(app: App | None = None, *, code_asset: LambdaAsset | None = None) -> App:
    """Add the (env-agnostic) stack and the AwsSolutions checks to `app` (a new App by default).

    `code_asset` lets callers that synthesize often (tests) build the asset once."""
    app = app or App()
    settings = Settings.from_context(app.node.get_all_context())
    SdcRemediationStack(
        app,
        settings.stack_name,
        settings=settings,
        code_asset=code_asset or build_lambda_asset(),
    )
    add_checks(app)
    return app


def main() -> int:
    """The app as the CDK CLI runs it: synthesize, or say in one line which setting is wrong."""
    try:
        build_app().synth()
    except SettingsError as err:
        print(f"sdc settings: {' '.join(str(err).split())}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
