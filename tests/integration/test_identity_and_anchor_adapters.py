"""The identity proof (signed by `sdc`, redeemed by decide) and the audit anchor (CloudWatch
Logs) on moto."""

from __future__ import annotations

import base64
import io
import json
import urllib.error
from typing import Any

import boto3
import pytest

from sdc_remediation.infra.local.identity import MotoIdentityVerifier
from sdc_remediation.lambdas.adapters.audit_anchor import LogsAuditAnchor
from sdc_remediation.lambdas.adapters.identity import (
    PROOF_PREFIX,
    StsIdentityVerifier,
    decode_proof,
    encode_proof,
    sign_identity_proof,
)
from sdc_remediation.lambdas.logic.core.audit import GENESIS, seal
from sdc_remediation.lambdas.models.approvals import BINDING_HEADER
from sdc_remediation.lambdas.models.errors import IdentityRefused

REGION = "us-west-2"
BINDING = "arn:aws:states:us-west-2:123456789012:stateMachine:sdc-approval|sdc-1|approve"


def sts_of(session: boto3.session.Session) -> Any:
    return session.client("sts", endpoint_url=f"https://sts.{REGION}.amazonaws.com")


def user_session(name: str) -> boto3.session.Session:
    iam = boto3.client("iam")
    iam.create_user(UserName=name)
    key = iam.create_access_key(UserName=name)["AccessKey"]
    return boto3.session.Session(
        aws_access_key_id=key["AccessKeyId"],
        aws_secret_access_key=key["SecretAccessKey"],
        region_name=REGION,
    )


def test_a_proof_signed_by_a_user_redeems_to_that_user(aws_env):
    proof = sign_identity_proof(sts_of(user_session("alice")), BINDING)

    principal = MotoIdentityVerifier().redeem(proof, BINDING)

    assert principal.arn == "arn:aws:iam::123456789012:user/alice"
    assert principal.verified


def test_a_proof_signed_in_an_assumed_role_session_names_the_session(aws_env):
    boto3.client("iam").create_role(RoleName="sdc-approver", AssumeRolePolicyDocument="{}")
    credentials = boto3.client("sts").assume_role(
        RoleArn="arn:aws:iam::123456789012:role/sdc-approver", RoleSessionName="bob"
    )["Credentials"]
    session = boto3.session.Session(
        aws_access_key_id=credentials["AccessKeyId"],
        aws_secret_access_key=credentials["SecretAccessKey"],
        aws_session_token=credentials["SessionToken"],
        region_name=REGION,
    )

    principal = MotoIdentityVerifier().redeem(
        sign_identity_proof(sts_of(session), BINDING), BINDING
    )

    assert principal.arn == "arn:aws:sts::123456789012:assumed-role/sdc-approver/bob"
    assert (principal.session_name, principal.iam_arn) == (
        "bob",
        "arn:aws:iam::123456789012:role/sdc-approver",
    )


def test_a_proof_redeemed_for_another_decision_is_refused(aws_env):
    proof = sign_identity_proof(sts_of(user_session("alice")), BINDING)

    with pytest.raises(IdentityRefused, match="signature does not match"):
        MotoIdentityVerifier().redeem(proof, BINDING.replace("approve", "reject"))


def test_a_proof_whose_url_was_edited_is_refused(aws_env):
    url = decode_proof(sign_identity_proof(sts_of(user_session("alice")), BINDING))
    edited = encode_proof(url.replace("X-Amz-Expires=900", "X-Amz-Expires=899"))

    with pytest.raises(IdentityRefused, match="signature does not match"):
        MotoIdentityVerifier().redeem(edited, BINDING)


def test_a_proof_by_a_key_sts_does_not_know_is_refused(aws_env):
    proof = sign_identity_proof(sts_of(boto3.session.Session(region_name=REGION)), BINDING)

    with pytest.raises(IdentityRefused, match="unknown access key"):
        MotoIdentityVerifier().redeem(proof, BINDING)


class RecordingOpener:
    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.requests: list[Any] = []

    def __call__(self, request: Any, timeout: float) -> Any:
        self.requests.append(request)
        if isinstance(self.answer, Exception):
            raise self.answer
        return io.BytesIO(json.dumps(self.answer).encode())


def test_sts_redemption_sends_the_presigned_request_with_the_binding_header(aws_env):
    proof = sign_identity_proof(sts_of(user_session("alice")), BINDING)
    opener = RecordingOpener(
        {
            "GetCallerIdentityResponse": {
                "GetCallerIdentityResult": {
                    "Arn": "arn:aws:iam::123456789012:user/alice",
                    "UserId": "AIDA1",
                    "Account": "123456789012",
                }
            }
        }
    )

    principal = StsIdentityVerifier(opener).redeem(proof, BINDING)

    (sent,) = opener.requests
    assert sent.full_url == decode_proof(proof)
    assert sent.get_header(BINDING_HEADER.capitalize()) == BINDING
    assert principal.arn == "arn:aws:iam::123456789012:user/alice"


def test_a_proof_keeps_its_id_when_its_query_is_reordered_and_two_proofs_have_two(aws_env):
    sts = sts_of(user_session("alice"))
    proof = sign_identity_proof(sts, BINDING)
    url = decode_proof(proof)
    head, _, query = url.partition("?")
    reordered = encode_proof(head + "?" + "&".join(reversed(query.split("&"))))
    answer = {
        "GetCallerIdentityResponse": {
            "GetCallerIdentityResult": {"Arn": "arn:aws:iam::123456789012:user/alice"}
        }
    }

    ids = [
        StsIdentityVerifier(RecordingOpener(answer)).redeem(p, BINDING).proof_id
        for p in (proof, reordered, sign_identity_proof(sts, BINDING.replace("sdc-1", "sdc-2")))
    ]

    assert ids[0] == ids[1] != ids[2]
    assert ids[0] == MotoIdentityVerifier().redeem(proof, BINDING).proof_id


def test_sts_refusing_the_signature_refuses_the_proof(aws_env):
    proof = sign_identity_proof(sts_of(user_session("alice")), BINDING)
    denied = urllib.error.HTTPError("https://sts", 403, "SignatureDoesNotMatch", {}, None)  # type: ignore[arg-type]

    with pytest.raises(IdentityRefused, match="HTTP 403"):
        StsIdentityVerifier(RecordingOpener(denied)).redeem(proof, BINDING)


def test_a_proof_addressed_to_another_host_is_refused_before_anything_is_sent(aws_env):
    url = decode_proof(sign_identity_proof(sts_of(user_session("alice")), BINDING))
    forged = encode_proof(url.replace("sts.us-west-2.amazonaws.com", "sts.example.com"))
    opener = RecordingOpener({})

    with pytest.raises(IdentityRefused, match="not addressed to STS"):
        StsIdentityVerifier(opener).redeem(forged, BINDING)
    assert opener.requests == []


def test_a_token_that_is_not_a_proof_is_refused():
    body = base64.urlsafe_b64encode(b"https://sts.amazonaws.com/?Action=GetCallerIdentity")

    with pytest.raises(IdentityRefused, match="does not sign"):
        StsIdentityVerifier(RecordingOpener({})).redeem(PROOF_PREFIX + body.decode(), BINDING)


# -- the audit anchor --------------------------------------------------------------------------


def entry(subject: str, seq: int, prev: str = GENESIS) -> Any:
    return seal(
        incident_id=subject,
        seq=seq,
        at="2026-11-30T08:15:04+00:00",
        actor="t",
        action=f"a{seq}",
        details={},
        request_ids=[],
        prev_hash=prev,
    )


def test_anchored_entries_read_back_per_subject_and_in_all(aws_env):
    boto3.client("logs").create_log_group(logGroupName="/sdc/audit-anchor")
    anchor = LogsAuditAnchor("/sdc/audit-anchor")
    first = entry("sdc-1", 1)
    anchor.anchor(first)
    anchor.anchor(entry("sdc-1", 2, first.hash))
    anchor.anchor(entry("decision#arn:x", 1))

    mine = LogsAuditAnchor("/sdc/audit-anchor").records("sdc-1")

    assert [(r.subject, r.seq, r.hash) for r in mine][:1] == [("sdc-1", 1, first.hash)]
    assert [r.seq for r in mine] == [1, 2]
    assert {r.subject for r in anchor.records()} == {"sdc-1", "decision#arn:x"}
