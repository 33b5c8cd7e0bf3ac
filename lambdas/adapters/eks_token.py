"""The bearer token an EKS cluster's API accepts: `k8s-aws-v1.` + base64url (no padding) of a
presigned STS GetCallerIdentity URL whose signed headers include `x-k8s-aws-id: <cluster>`.

The API server hands the URL to STS, which answers with the caller (the function's role); the
cluster's access entry for that role maps it to Kubernetes groups. The signed header binds a
token to one cluster. Tokens live 15 minutes; they are cached per cluster for less.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Callable
from typing import Any

from sdc_remediation.lambdas.adapters._aws import ClientFactory, LazyClient

TOKEN_PREFIX = "k8s-aws-v1."
CLUSTER_HEADER = "x-k8s-aws-id"
URL_EXPIRES_SECONDS = 60
CACHE_SECONDS = 10 * 60
"""Under the 15-minute lifetime the API server allows, with room for a slow call."""


def encode_token(presigned_url: str) -> str:
    encoded = base64.urlsafe_b64encode(presigned_url.encode()).decode().rstrip("=")
    return TOKEN_PREFIX + encoded


def decode_token(token: str) -> str:
    """The presigned URL inside a token; ValueError when it is not one."""
    if not token.startswith(TOKEN_PREFIX):
        raise ValueError(f"not a {TOKEN_PREFIX} token")
    body = token[len(TOKEN_PREFIX) :]
    try:
        return base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)).decode()
    except (ValueError, UnicodeDecodeError) as err:
        raise ValueError(f"the token body is not base64url text: {err}") from err


class EksTokens:
    """Tokens per EKS cluster, from an STS client (regional endpoint) of the function's role."""

    def __init__(
        self,
        sts_factory: ClientFactory,
        *,
        clock: Callable[[], float] = time.monotonic,
        cache_seconds: float = CACHE_SECONDS,
    ) -> None:
        self._sts = LazyClient(sts_factory)
        self._clock = clock
        self._cache_seconds = cache_seconds
        self._cache: dict[str, tuple[float, str]] = {}

    def token(self, eks_cluster: str) -> str:
        cached = self._cache.get(eks_cluster)
        if cached is not None and self._clock() < cached[0]:
            return cached[1]
        token = encode_token(self._presign(eks_cluster))
        self._cache[eks_cluster] = (self._clock() + self._cache_seconds, token)
        return token

    def forget(self, eks_cluster: str) -> None:
        """Drop the cached token (the API server refused it)."""
        self._cache.pop(eks_cluster, None)

    def _presign(self, eks_cluster: str) -> str:
        client: Any = self._sts.get()

        def add_cluster_header(request: Any, **_: Any) -> None:
            request.headers[CLUSTER_HEADER] = eks_cluster

        event = "before-sign.sts.GetCallerIdentity"
        client.meta.events.register(event, add_cluster_header)
        try:
            return str(
                client.generate_presigned_url(
                    "get_caller_identity",
                    Params={},
                    ExpiresIn=URL_EXPIRES_SECONDS,
                    HttpMethod="GET",
                )
            )
        finally:
            client.meta.events.unregister(event, add_cluster_header)


def sts_factory(session: Any) -> ClientFactory:
    """An STS client on the region's own endpoint (`sts.<region>.amazonaws.com`), which EKS
    expects in the token."""

    def build() -> Any:
        region = session.region_name or "us-east-1"
        return session.client(
            "sts", region_name=region, endpoint_url=f"https://sts.{region}.amazonaws.com"
        )

    return build
