"""The CDK app: settings from context, the Lambda asset, the stack, cdk-nag. Nothing else.

Run by the CDK CLI through cdk.json (`python3 -m infra.stack.app`, from the repository root).
"""

from __future__ import annotations

from aws_cdk import App

from infra.stack.asset import LambdaAsset, build_lambda_asset
from infra.stack.nag import add_checks
from infra.stack.settings import Settings
from infra.stack.stack import SdcRemediationStack


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


if __name__ == "__main__":
    build_app().synth()
