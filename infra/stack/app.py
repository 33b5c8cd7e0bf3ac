"""The CDK app: props from context, the Lambda asset, the stack. Nothing else: a thin user of
the `SdcRemediation` construct (infra/construct.py), which applies cdk-nag to itself.

Run by the CDK CLI through cdk.json (`python3 -m sdc_remediation.infra.stack.app`, from the repository root).
There a bad `sdc:*` setting is one line on stderr naming the key, and exit status 1, never a
traceback: the CDK CLI then adds only that the app failed.
"""

from __future__ import annotations

import sys

from aws_cdk import App

from sdc_remediation.infra.stack.asset import LambdaAsset, build_lambda_asset
from sdc_remediation.infra.stack.stack import SdcRemediationProps, SdcRemediationStack
from sdc_remediation.lambdas.models.errors import SettingsError


def build_app(app: App | None = None, *, code_asset: LambdaAsset | None = None) -> App:
    """Add the (env-agnostic) stack to `app` (a new App by default): the `SdcRemediation`
    construct with props from the context's `sdc:*` keys; the construct runs the AwsSolutions
    checks on itself.

    `code_asset` lets callers that synthesize often (tests) build the asset once."""
    app = app or App()
    props = SdcRemediationProps.from_context(
        app.node.get_all_context(), code_asset=code_asset or build_lambda_asset()
    )
    SdcRemediationStack(app, props.settings.stack_name, props=props)
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
