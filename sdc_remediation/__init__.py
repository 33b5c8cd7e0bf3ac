"""SDC remediation: the pipeline's import name, one that a team's own app cannot shadow.

    from sdc_remediation import SdcRemediation, SdcRemediationProps

CDK apps very often have an `infra/` (or `lambdas/`) package of their own, so the pipeline's
code is imported under this name: `sdc_remediation.infra` (the CDK app and construct, the `sdc`
CLI, the local run) and `sdc_remediation.lambdas` (the functions). In the repository the two are
links to the top-level `infra/` and `lambdas/` folders; a wheel and the Lambda asset hold them
here as folders. `trainer_emitter` keeps its own top-level name: training code imports it, and
its own distribution ships it alone.

Importing this package loads nothing else: the construct (and with it the CDK) is loaded when
first asked for, so the functions and the CLI import their part of it without the CDK.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sdc_remediation.infra.construct import (
        CONTEXT_FIELDS,
        SdcRemediation,
        SdcRemediationProps,
    )

__all__ = ["CONTEXT_FIELDS", "SdcRemediation", "SdcRemediationProps"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from sdc_remediation.infra import construct

        return getattr(construct, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
