"""The gateway's ssl.* settings: plaintext by default, TLS with a certificate and key, and the
combinations that cannot work refused at start-up with the key named."""

from __future__ import annotations

import pytest

from riverlog.common.errors import RiverlogError
from riverlog.services.gateway.config import GatewayConfig
from riverlog.services.gateway.rpc.tls import server_credentials


def test_plaintext_unless_a_certificate_is_configured() -> None:
    config = GatewayConfig.from_overrides({})
    assert not config.tls and config.ssl_client_auth == "none"
    assert server_credentials(config) is None
    tls = GatewayConfig.from_overrides(
        {"ssl.certificate.location": "/c.pem", "ssl.key.location": "/k.pem"}
    )
    assert tls.tls and tls.ssl_certificate_location == "/c.pem"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"ssl.certificate.location": "/c.pem"}, "go together"),
        ({"ssl.client.auth": "requested"}, "ssl.client.auth"),
        ({"ssl.client.auth": "required"}, "needs ssl.certificate.location"),
        (
            {
                "ssl.certificate.location": "/c",
                "ssl.key.location": "/k",
                "ssl.client.auth": "required",
            },
            "ssl.ca.location",
        ),
    ],
)
def test_impossible_tls_settings_are_refused(overrides: dict[str, str], message: str) -> None:
    with pytest.raises(RiverlogError, match=message):
        GatewayConfig.from_overrides(overrides)
