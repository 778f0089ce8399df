"""The gateway's TLS listener credentials from its ssl.* settings (Kafka's names).

gRPC verifies a client certificate against ssl.ca.location during the handshake and then
reports its subject's common name in the call's auth context (`x509_common_name`), which the
servicer hands to the authenticator; `ssl.client.auth=required` refuses a handshake without a
verified certificate; with `none` gRPC does not ask for one (so calls have no common name).
"""

from __future__ import annotations

from pathlib import Path

import grpc

from ..config import GatewayConfig


def server_credentials(config: GatewayConfig) -> grpc.ServerCredentials | None:
    """TLS server credentials, or None for plaintext (no ssl.certificate.location). OSError when
    a file cannot be read."""
    if not config.tls:
        return None
    key = Path(config.ssl_key_location).read_bytes()
    chain = Path(config.ssl_certificate_location).read_bytes()
    ca = Path(config.ssl_ca_location).read_bytes() if config.ssl_ca_location else None
    return grpc.ssl_server_credentials(
        [(key, chain)],
        root_certificates=ca,
        require_client_auth=config.ssl_client_auth == "required",
    )
