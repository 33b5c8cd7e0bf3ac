"""How an `sdc` command ends: its exit status, and the one line an error prints instead of a
traceback when the operator can act on it (credentials, region, access, an unknown id)."""

from __future__ import annotations

from typing import Final

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    NoCredentialsError,
    NoRegionError,
    PartialCredentialsError,
    ProfileNotFound,
)

from sdc_remediation.infra.cli.deployment import DeploymentError
from sdc_remediation.lambdas.models.errors import AwsError, SdcError

EXIT_OK: Final = 0
EXIT_FAILED: Final = 1
"""What was checked or asked for did not happen: a broken chain, a refused decision, a report
still pending."""
EXIT_ERROR: Final = 2
"""The command could not run: bad usage, no credentials, no stack, an unknown incident."""

NO_CREDENTIALS: Final = (
    "no AWS credentials found: configure them (aws configure, aws sso login, AWS_PROFILE) "
    "or pass --profile"
)
REFUSED_CREDENTIALS: Final = frozenset(
    {
        "ExpiredToken",
        "ExpiredTokenException",
        "InvalidClientTokenId",
        "UnrecognizedClientException",
        "InvalidSignatureException",
        "SignatureDoesNotMatch",
    }
)
ACCESS_DENIED: Final = frozenset({"AccessDenied", "AccessDeniedException"})


class CliError(Exception):
    """Stops the command with a one-line message and exit status 2."""


def error_message(err: BaseException) -> str | None:
    """The one line to print for an error the user can act on; None for a bug (traceback)."""
    if isinstance(err, (CliError, DeploymentError)):
        return str(err)
    # The adapters raise domain errors `from` botocore's; the cause says what went wrong.
    root = err.__cause__ if isinstance(err, AwsError) and err.__cause__ else err
    if isinstance(root, (NoCredentialsError, PartialCredentialsError)):
        return NO_CREDENTIALS
    if isinstance(root, ProfileNotFound):
        return f"{root}: pass an existing --profile"
    if isinstance(root, NoRegionError):
        return "no AWS region: pass --region, set AWS_REGION, or give the profile one"
    code = err.code if isinstance(err, AwsError) else None
    if isinstance(root, ClientError):
        code = str(root.response.get("Error", {}).get("Code", ""))
    if code in REFUSED_CREDENTIALS:
        return f"AWS refused the credentials ({code}): {err}"
    if code in ACCESS_DENIED:
        return f"access denied ({err}); docs/operate.md lists the permissions the CLI needs"
    if isinstance(err, (SdcError, ClientError, BotoCoreError)):
        return " ".join(str(err).split())
    return None
