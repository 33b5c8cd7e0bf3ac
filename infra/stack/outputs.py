"""The output every `SdcRemediation` construct publishes its addresses under, for `sdc`.

Inside a team's stack CDK gives each `CfnOutput` a key that carries a hash of the construct's
path (`SdcIncidentsTableName7ABD01B1`); this one sets its key, so it is the same in every stack:
its value is every address of the construct (output name → value) as one JSON object. A stack
holds one construct, so the stack's name finds it. Standard library only: the operator CLI
imports it without the CDK.
"""

from __future__ import annotations

from typing import Final

DEPLOYMENT_OUTPUT: Final = "SdcDeployment"
