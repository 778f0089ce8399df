"""Who the SDK says it is and how it reaches the gateways: the SASL-style credentials sent as
call metadata and the TLS files of `security.protocol=SSL`, in one value the config builds.

A user and password travel as `riverlog-user` / `riverlog-password`, a token (what `riverlog
users add --token` printed) as `authorization: Bearer <token>`; the gateway takes the metadata
credentials first, then the common name of a verified client certificate, then ANONYMOUS.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import grpc

from riverlog.common.rpc.channel import tls_channel_credentials

USER_KEY: Final = "riverlog-user"
PASSWORD_KEY: Final = "riverlog-password"
AUTHORIZATION_KEY: Final = "authorization"


@dataclass(frozen=True, slots=True)
class Credentials:
    """Librdkafka's sasl.username / sasl.password / sasl.oauthbearer.token and the ssl.*
    locations (TLS when `tls`)."""

    user: str = ""
    password: str = ""
    token: str = ""
    tls: bool = False
    ca_location: str = ""
    certificate_location: str = ""
    key_location: str = ""

    def metadata(self) -> list[tuple[str, str]]:
        """The call metadata: the user and password when a user is set, else the token."""
        if self.user:
            return [(USER_KEY, self.user), (PASSWORD_KEY, self.password)]
        if self.token:
            return [(AUTHORIZATION_KEY, f"Bearer {self.token}")]
        return []

    def channel_credentials(self) -> grpc.ChannelCredentials | None:
        """TLS credentials from the files (OSError when one cannot be read); None: plaintext."""
        if not self.tls:
            return None
        return tls_channel_credentials(
            self.ca_location, self.certificate_location, self.key_location
        )
