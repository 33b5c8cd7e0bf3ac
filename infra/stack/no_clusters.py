"""A stack that would act on no cluster is refused at deploy time, not deployed without a word.

With `sdc:clusters` empty, outside dry run and without `sdc:acknowledgeNoClusters`, the template
gets a parameter, `AcknowledgeNoClusters` (default `no`), and a CloudFormation rule that holds
only when it is `yes`: CloudFormation refuses to create or update the stack, before touching any
resource, with the rule's description. `cdk synth` still works (tests, reviews, the drill), and
says the same as a warning. The way out is named in both: clusters, dry run, the key, or the
parameter at deploy time (`cdk deploy --parameters AcknowledgeNoClusters=yes`).
"""

from __future__ import annotations

from typing import Final

from aws_cdk import Annotations, CfnParameter, CfnRule, CfnRuleAssertion, Fn, Stack

PARAMETER: Final = "AcknowledgeNoClusters"
RULE: Final = "ClustersOrAcknowledgement"
ACKNOWLEDGED: Final = "yes"

MESSAGE: Final = (
    "sdc:clusters is empty: this stack would act on no cluster (its functions get no SageMaker "
    'permission), so it is not deployed. Name the clusters (-c \'sdc:clusters={"<name>": '
    '"<cluster id or ARN>"}\'), or deploy in dry run (-c sdc:dryRun=true), or acknowledge it '
    "(-c sdc:acknowledgeNoClusters=true, or cdk deploy --parameters AcknowledgeNoClusters=yes)."
)


def refuse_deploying_without_clusters(stack: Stack) -> None:
    """Add the parameter and the rule that refuse the deployment, and the synth-time warning."""
    acknowledged = CfnParameter(
        stack,
        PARAMETER,
        type="String",
        default="no",
        allowed_values=["no", ACKNOWLEDGED],
        description="sdc:clusters is empty: yes deploys a stack that acts on no cluster",
    )
    CfnRule(
        stack,
        RULE,
        assertions=[
            CfnRuleAssertion(
                assert_=Fn.condition_equals(acknowledged.value_as_string, ACKNOWLEDGED),
                assert_description=MESSAGE,
            )
        ],
    )
    Annotations.of(stack).add_warning_v2("sdc:no-clusters", MESSAGE)
