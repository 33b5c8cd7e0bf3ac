"""The CDK app: props from context, the Lambda asset, the stack. Nothing else: a thin user of
the `SdcRemediation` construct (infra/construct.py), which applies cdk-nag to itself.

Run by the CDK CLI through cdk.json (`python3 -m infra.stack.app`, from the repository root).
"""

from __future__ import annotations

from aws_cdk import App

from infra.stack.asset import LambdaAsset, build_lambda_asset
from infra.stack.stack import SdcRemediationProps, SdcRemediationStack


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


if __name__ == "__main__":
    build_app().synth()
