"""Mutual TLS between Riverlog's services (decision 0035): the settings, by Kafka's names, and
the one process-wide installation every internal channel and server reads.

A process has one identity towards the rest of the cluster (its certificate), as a Kafka
broker has one inter-broker listener, so the settings are installed once at start-up (as
tracing is) and every `aio_channel` and every internal `RpcServer` of the process uses them;
no call site threads them through. The settings are the same in every service:

    security.inter.broker.protocol=SSL                 (PLAINTEXT, the default, or SSL)
    listener.name.internal.ssl.certificate.location=F  (PEM chain: this process's certificate)
    listener.name.internal.ssl.key.location=F          (PEM private key of that certificate)
    listener.name.internal.ssl.ca.location=F           (PEM cluster CA: peers are verified)
    listener.name.internal.ssl.client.auth=required    (the only choice under SSL)

They are Kafka's per-listener overrides (`listener.name.<listener>.ssl.*`) of a listener named
INTERNAL, so a gateway's plain `ssl.*` keys stay those of its client-facing listener. Under SSL
a server of an internal API refuses a handshake without a client certificate signed by the
cluster CA, and a client verifies the server's certificate (its address must be among the
certificate's subject alternative names) against the same CA.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import grpc

from riverlog.common.certificate_files import CertificateFiles
from riverlog.common.errors import ErrorCode, RiverlogError

PROTOCOL_KEY: Final = "security.inter.broker.protocol"
PREFIX: Final = "listener.name.internal."
CERTIFICATE_KEY: Final = PREFIX + "ssl.certificate.location"
KEY_KEY: Final = PREFIX + "ssl.key.location"
CA_KEY: Final = PREFIX + "ssl.ca.location"
CLIENT_AUTH_KEY: Final = PREFIX + "ssl.client.auth"
KEYS: Final = (PROTOCOL_KEY, CERTIFICATE_KEY, KEY_KEY, CA_KEY, CLIENT_AUTH_KEY)
PROTOCOLS: Final = ("PLAINTEXT", "SSL")


@dataclass(frozen=True, slots=True)
class InternalTls:
    """How this process talks to the other services. Lifecycle: parsed once at start-up,
    installed with `install`, read-only afterwards."""

    protocol: str = "PLAINTEXT"
    certificate_location: str = ""
    key_location: str = ""
    ca_location: str = ""
    client_auth: str = "required"

    @property
    def enabled(self) -> bool:
        return self.protocol == "SSL"

    @property
    def files(self) -> CertificateFiles:
        """The three PEM files as the type `/metrics` and the launcher's etcd take."""
        return CertificateFiles(self.certificate_location, self.key_location, self.ca_location)

    def to_overrides(self) -> dict[str, str]:
        """The `--config` settings that give back this value (what a launcher passes)."""
        if not self.enabled:
            return {}
        return {
            PROTOCOL_KEY: self.protocol,
            CERTIFICATE_KEY: self.certificate_location,
            KEY_KEY: self.key_location,
            CA_KEY: self.ca_location,
            CLIENT_AUTH_KEY: self.client_auth,
        }


PLAINTEXT: Final = InternalTls()


def _invalid(message: str) -> RiverlogError:
    return RiverlogError(message, ErrorCode.INVALID_CONFIG)


def split_overrides(overrides: Mapping[str, str]) -> tuple[InternalTls, dict[str, str]]:
    """The internal TLS settings among a process's `--config` overrides, and the others (for
    the service's own config). RiverlogError(INVALID_CONFIG) naming the key for an unknown
    `listener.name.internal.*` key, an unknown protocol, a missing file setting under SSL, a
    file setting without SSL, or a client.auth other than required. Pure: files are read when
    credentials are built."""
    rest = {k: v for k, v in overrides.items() if k not in KEYS}
    unknown = sorted(k for k in rest if k.startswith(PREFIX))
    if unknown:
        raise _invalid(
            f"unknown internal listener setting {unknown[0]!r} (one of {', '.join(KEYS)})"
        )
    protocol = overrides.get(PROTOCOL_KEY, "PLAINTEXT").strip().upper()
    if protocol not in PROTOCOLS:
        raise _invalid(
            f"invalid value {overrides[PROTOCOL_KEY]!r} for {PROTOCOL_KEY}: one of"
            f" {', '.join(PROTOCOLS)}"
        )
    files = {k: overrides.get(k, "").strip() for k in (CERTIFICATE_KEY, KEY_KEY, CA_KEY)}
    client_auth = overrides.get(CLIENT_AUTH_KEY, "required").strip().lower()
    if protocol == "PLAINTEXT":
        given = [k for k in (*files, CLIENT_AUTH_KEY) if k in overrides]
        if given:
            raise _invalid(f"{given[0]} is set but {PROTOCOL_KEY} is PLAINTEXT (set it to SSL)")
        return PLAINTEXT, rest
    missing = [k for k, v in files.items() if not v]
    if missing:
        raise _invalid(f"{PROTOCOL_KEY}=SSL needs {', '.join(missing)}")
    if client_auth != "required":
        raise _invalid(
            f"invalid value {overrides[CLIENT_AUTH_KEY]!r} for {CLIENT_AUTH_KEY}: internal"
            " servers always require a client certificate signed by the cluster CA (required)"
        )
    tls = InternalTls(protocol, files[CERTIFICATE_KEY], files[KEY_KEY], files[CA_KEY], client_auth)
    return tls, rest


@dataclass(frozen=True, slots=True)
class _Installed:
    config: InternalTls
    channel: grpc.ChannelCredentials | None
    server: tuple[bytes, bytes, bytes] | None  # (key, chain, ca)


_lock = threading.Lock()
_installed = _Installed(PLAINTEXT, None, None)


def install(config: InternalTls) -> None:
    """Make `config` this process's internal transport (reads the PEM files now, so a missing
    file fails start-up: RiverlogError(INVALID_CONFIG) naming it)."""
    global _installed
    if not config.enabled:
        installed = _Installed(config, None, None)
    else:
        key = _read(KEY_KEY, config.key_location)
        chain = _read(CERTIFICATE_KEY, config.certificate_location)
        ca = _read(CA_KEY, config.ca_location)
        channel = grpc.ssl_channel_credentials(
            root_certificates=ca, private_key=key, certificate_chain=chain
        )
        installed = _Installed(config, channel, (key, chain, ca))
    with _lock:
        _installed = installed


def _read(key: str, path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise _invalid(f"cannot read {key} {path!r}: {exc.strerror or exc}") from None


def current() -> InternalTls:
    """The installed settings (PLAINTEXT until `install`)."""
    return _installed.config


def channel_credentials() -> grpc.ChannelCredentials | None:
    """Credentials for a channel to another service: the process's certificate as the client
    certificate and the cluster CA as the only trust root; None for plaintext."""
    return _installed.channel


def server_credentials() -> grpc.ServerCredentials | None:
    """Credentials of an internal server: the process's certificate, and a required client
    certificate verified against the cluster CA; None for plaintext."""
    material = _installed.server
    if material is None:
        return None
    key, chain, ca = material
    return grpc.ssl_server_credentials(
        [(key, chain)], root_certificates=ca, require_client_auth=True
    )


def zero_copy_listener(requested_port: int) -> bool:
    """Whether a storage node opens its zero-copy fetch listener. The zero-copy channel is a
    plaintext TCP protocol whose point is `sendfile` from the segment files to the socket, which
    TLS rules out (the bytes must pass through the cipher, as Kafka copies under TLS), so under
    SSL it is off: the node advertises no zero-copy port and gateways and followers fetch over
    TLS gRPC, which copies. A zero-copy port asked for explicitly (`--zero-copy-port N`, N > 0)
    under SSL is refused with RiverlogError(INVALID_CONFIG) rather than silently ignored."""
    if not current().enabled:
        return True
    if requested_port > 0:
        raise _invalid(
            f"--zero-copy-port {requested_port}: the zero-copy fetch channel is plaintext TCP"
            f" (sendfile) and cannot run under {PROTOCOL_KEY}=SSL; leave the port out (0): the"
            " node then serves fetches over TLS gRPC only"
        )
    return False
