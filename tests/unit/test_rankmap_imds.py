"""Instance metadata as the last source of a rank's instance id, served by a local stand-in."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from sdc_remediation.infra.local.serving import serving
from trainer_emitter.rankmap import instance_id_from_imds, local_rank_info


class _Imds(BaseHTTPRequestHandler):
    instance_id = "i-0dd00000000000004"

    def do_PUT(self):
        assert self.path == "/latest/api/token"
        self._reply(b"token-123")

    def do_GET(self):
        if self.headers.get("X-aws-ec2-metadata-token") != "token-123":
            self.send_response(401)
            self.end_headers()
            return
        self._reply(self.instance_id.encode())

    def _reply(self, body: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def imds() -> Iterator[str]:
    with serving(HTTPServer(("127.0.0.1", 0), _Imds), "imds") as url:
        yield url


def test_with_imds_enabled_an_ip_named_node_learns_its_instance_from_metadata(imds):
    info = local_rank_info(
        3,
        environ={"NODE_NAME": "ip-10-0-0-1.ec2.internal", "SDC_USE_IMDS": "1"},
        imds_endpoint=imds,
    )

    assert info.instance_id == "i-0dd00000000000004"


def test_imds_is_not_asked_unless_enabled(imds):
    info = local_rank_info(3, environ={"NODE_NAME": "ip-10-0-0-1.ec2.internal"}, imds_endpoint=imds)

    assert info.instance_id is None


def test_unreachable_metadata_leaves_the_rank_unmapped():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{s.getsockname()[1]}"

    assert instance_id_from_imds(closed, timeout=0.2) is None
