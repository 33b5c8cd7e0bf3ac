"""Identity proofs: who approved, established by STS rather than by the approver's text.

An approver's `sdc approve` signs a GetCallerIdentity request with the approver's own
credentials and presigns it as a URL (as EKS tokens are built), with the signed header
`x-sdc-approval` carrying the decision it is for (`sdc_remediation.lambdas.logic.safety.decisions.approval_binding`; the header is `sdc_remediation.lambdas.models.approvals.BINDING_HEADER`).
The token (`sdc-approval-v1.` + base64url of the URL) goes into the approval execution's input.
`decide` redeems it: it checks that the URL is an STS GetCallerIdentity request bound to this
decision and not valid for longer than STS allows, sends it to STS with the binding header,
and takes the principal STS answers with. A token changed in any signed part (another
decision, another incident, a later expiry) no longer matches its signature: STS refuses it.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from sdc_remediation.lambdas.models.approvals import BINDING_HEADER, Principal, PrincipalSource
from sdc_remediation.lambdas.models.errors import IdentityRefused

PROOF_PREFIX = "sdc-approval-v1."
PROOF_EXPIRES_SECONDS = 900
"""How long a proof is valid after signing: the most STS allows a presigned request (as for
EKS tokens). Enough for an approval execution to start and reach `decide`."""
MAX_PROOF_LENGTH = 8192
_REGION = (
    r"(?:us|eu|ap|sa|ca|me|af|il|mx)-"
    r"(?:central|north|south|east|west|northeast|northwest|southeast|southwest)-[1-9]"
)
STS_HOST_RE = re.compile(
    rf"^sts\.amazonaws\.com$|^sts\.{_REGION}\.amazonaws\.com$"
    r"|^sts\.us-gov-(?:east|west)-1\.amazonaws\.com$"
    r"|^sts\.cn-(?:north|northwest)-1\.amazonaws\.com\.cn$"
)
"""The hosts a proof may name, exactly: STS's global endpoint, its regional endpoints in the
commercial partition (`sts.<region>.amazonaws.com`, regions named as AWS names them), GovCloud's
two and China's two. Any other host is refused before anything is sent: it would let the token's
author answer with an identity of their choice (`sts.evil.amazonaws.com` is no STS endpoint)."""
REDEEM_TIMEOUT_SECONDS = 5


def encode_proof(presigned_url: str) -> str:
    body = base64.urlsafe_b64encode(presigned_url.encode()).decode().rstrip("=")
    return PROOF_PREFIX + body


def decode_proof(proof: str) -> str:
    if len(proof) > MAX_PROOF_LENGTH:
        raise IdentityRefused(f"the identity proof is longer than {MAX_PROOF_LENGTH} characters")
    if not proof.startswith(PROOF_PREFIX):
        raise IdentityRefused(f"the identity proof is not a {PROOF_PREFIX} token")
    body = proof[len(PROOF_PREFIX) :]
    try:
        return base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)).decode()
    except (ValueError, UnicodeDecodeError) as err:
        raise IdentityRefused(f"the identity proof is not base64url text: {err}") from err


def sign_identity_proof(sts_client: Any, binding: str) -> str:
    """A proof of the caller `sts_client` signs for, bound to `binding` (the CLI's side)."""

    def add_binding(request: Any, **_: Any) -> None:
        request.headers[BINDING_HEADER] = binding

    event = "before-sign.sts.GetCallerIdentity"
    sts_client.meta.events.register(event, add_binding)
    try:
        url = sts_client.generate_presigned_url(
            "get_caller_identity",
            Params={},
            ExpiresIn=PROOF_EXPIRES_SECONDS,
            HttpMethod="GET",
        )
    finally:
        sts_client.meta.events.unregister(event, add_binding)
    return encode_proof(str(url))


def checked_request(proof: str) -> tuple[str, dict[str, str]]:
    """The proof's URL and its query, after the checks made before anything is sent: an https
    STS endpoint, GetCallerIdentity, signed with the binding header, within STS's limit."""
    url = decode_proof(proof)
    parts = urllib.parse.urlsplit(url)
    if parts.scheme != "https" or not STS_HOST_RE.match(parts.hostname or "") or parts.port:
        raise IdentityRefused(f"the identity proof is not addressed to STS: {parts.netloc!r}")
    if parts.path not in ("", "/"):
        raise IdentityRefused("the identity proof names a path STS does not serve")
    query = dict(urllib.parse.parse_qsl(parts.query, keep_blank_values=True))
    if query.get("Action") != "GetCallerIdentity":
        raise IdentityRefused("the identity proof is not a GetCallerIdentity request")
    signed = query.get("X-Amz-SignedHeaders", "").split(";")
    if BINDING_HEADER not in signed:
        raise IdentityRefused(f"the identity proof does not sign {BINDING_HEADER}")
    expires = query.get("X-Amz-Expires", "")
    if not expires.isdigit() or int(expires) > PROOF_EXPIRES_SECONDS:
        raise IdentityRefused(
            f"the identity proof's X-Amz-Expires is not 1..{PROOF_EXPIRES_SECONDS}"
        )
    if not query.get("X-Amz-Signature") or not query.get("X-Amz-Credential"):
        raise IdentityRefused("the identity proof is not signed")
    return url, query


def proof_id(query: Mapping[str, str]) -> str:
    """What makes a proof single-use: the digest of its SigV4 signature. The signature covers
    every signed part of the request (its query, host and binding header), so a proof re-encoded
    or with its query reordered keeps its id, and any other proof has another."""
    return hashlib.sha256(query.get("X-Amz-Signature", "").lower().encode()).hexdigest()


def principal_from(result: Mapping[str, Any], proof: str | None = None) -> Principal:
    arn = result.get("Arn")
    if not isinstance(arn, str) or not arn.startswith("arn:"):
        raise IdentityRefused("STS answered without the caller's ARN")
    return Principal(
        PrincipalSource.IDENTITY_PROOF,
        arn=arn,
        account=str(result.get("Account") or arn.split(":")[4]),
        user_id=str(result.get("UserId") or ""),
        proof_id=proof,
    )


Opener = Callable[..., Any]


class StsIdentityVerifier:
    """Redeems proofs at STS: the presigned request is sent as signed, with the binding header;
    STS answers with the caller (or refuses a signature that does not match)."""

    def __init__(self, opener: Opener | None = None) -> None:
        self._open = opener or urllib.request.urlopen

    def redeem(self, proof: str, binding: str) -> Principal:
        url, query = checked_request(proof)
        request = urllib.request.Request(
            url, headers={BINDING_HEADER: binding, "Accept": "application/json"}, method="GET"
        )
        try:
            with self._open(request, timeout=REDEEM_TIMEOUT_SECONDS) as response:
                body = json.loads(response.read().decode())
        except urllib.error.HTTPError as err:
            raise IdentityRefused(f"STS refused the identity proof: HTTP {err.code}") from err
        except (urllib.error.URLError, TimeoutError, ValueError) as err:
            raise IdentityRefused(
                f"the identity proof could not be redeemed at STS: {err}"
            ) from err
        result = body.get("GetCallerIdentityResponse", {}).get("GetCallerIdentityResult", {})
        return principal_from(result, proof_id(query))


if TYPE_CHECKING:
    from sdc_remediation.lambdas.logic.ports import IdentityVerifier

    _port: IdentityVerifier = StsIdentityVerifier()
