"""The pipeline as a construct library: put `SdcRemediation` into a stack of your own CDK app.

    from aws_cdk import App, Stack
    from sdc_remediation import SdcRemediation, SdcRemediationProps

    app = App()
    stack = Stack(app, "MlPlatform")
    SdcRemediation(
        stack,
        "Sdc",
        props=SdcRemediationProps(clusters={"ml-cluster-1": "ab12cd34ef56"}, dry_run=True),
    )
    app.synth()

`sdc_remediation` is the name a team's app imports it by (an app's own `infra/` package cannot
shadow it; docs/deploy.md, "Installing it into your app"); one stack holds one construct.

Every `sdc:*` context key is a field of `SdcRemediationProps` (docs/deploy.md, "Settings"),
checked when the props are made with the key's own message. The construct runs cdk-nag's
AwsSolutions checks on its own resources at synth; the rest of the app is yours. `cdk.json`'s
app (`sdc_remediation.infra.stack.app`) is a thin user of it: one stack holding the construct.
"""

from sdc_remediation.infra.stack.stack import CONTEXT_FIELDS, SdcRemediation, SdcRemediationProps

__all__ = ["CONTEXT_FIELDS", "SdcRemediation", "SdcRemediationProps"]
