"""Identity proofs redeemed against moto, the local run's account.

moto answers GetCallerIdentity for whatever access key a request names and checks no
signature, and a presigned URL cannot be sent to it over the network here. So this verifier
does what STS would: the same checks `decide` makes before sending (`checked_request`), then the
SigV4 signature recomputed with the secret moto holds for the access key (an IAM user's key or
an assumed role's), over the request with the binding header `decide` expects, and the caller
as moto's STS names it. A proof signed by a key moto does not know is refused.
"""

from __future__ import annotations

import hmac
import urllib.parse
from typing import Any

from botocore.auth import SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from sdc_remediation.lambdas.adapters.identity import checked_request, principal_from, proof_id
from sdc_remediation.lambdas.models.approvals import BINDING_HEADER, Principal
from sdc_remediation.lambdas.models.errors import IdentityRefused


class MotoIdentityVerifier:
    def __init__(self, account_id: str = "123456789012") -> None:
        self.account_id = account_id

    def redeem(self, proof: str, binding: str) -> Principal:
        url, query = checked_request(proof)
        access_key, _, region, service, _ = (query["X-Amz-Credential"].split("/") + [""] * 5)[:5]
        secret = self._secret(access_key)
        if secret is None:
            raise IdentityRefused("STS refused the identity proof: unknown access key")
        expected = _signature(url, query, binding, access_key, secret, region, service)
        if not hmac.compare_digest(expected, query["X-Amz-Signature"]):
            raise IdentityRefused("STS refused the identity proof: the signature does not match")
        user_id, arn, account = self._sts().get_caller_identity(access_key, region)
        return principal_from({"Arn": arn, "UserId": user_id, "Account": account}, proof_id(query))

    def _sts(self) -> Any:
        from moto.sts.models import sts_backends

        return sts_backends[self.account_id]["aws"]

    def _secret(self, access_key: str) -> str | None:
        from moto.iam.models import iam_backends

        assumed = self._sts().get_assumed_role_from_access_key(access_key)
        if assumed is not None:
            return str(assumed.secret_access_key)
        iam = iam_backends[self.account_id]["aws"]
        user = iam.get_user_from_access_key_id(access_key)
        if user is None:
            return None
        for key in iam.list_access_keys(user.name):
            if key.access_key_id == access_key:
                return str(key.secret_access_key)
        return None


def _signature(
    url: str,
    query: dict[str, str],
    binding: str,
    access_key: str,
    secret: str,
    region: str,
    service: str,
) -> str:
    """The SigV4 query signature of `url` (its own X-Amz-Signature left out) with the binding
    header, as STS computes it to compare."""
    parts = urllib.parse.urlsplit(url)
    unsigned = [
        (k, v)
        for k, v in urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
        if k != "X-Amz-Signature"
    ]
    request = AWSRequest(
        method="GET",
        url=urllib.parse.urlunsplit(
            (parts.scheme, parts.netloc, parts.path or "/", urllib.parse.urlencode(unsigned), "")
        ),
        headers={BINDING_HEADER: binding},
    )
    request.context["timestamp"] = query.get("X-Amz-Date", "")
    auth = SigV4QueryAuth(
        Credentials(access_key, secret, query.get("X-Amz-Security-Token")),
        service,
        region,
        expires=int(query["X-Amz-Expires"]),
    )
    canonical = auth.canonical_request(request)
    return str(auth.signature(auth.string_to_sign(request, canonical), request))
