"""A throwaway certificate authority and per-process certificates for a local TLS cluster
(`riverlog cluster up --tls`, decision 0035), made with the `cryptography` library.

Every certificate is an ECDSA P-256 key signed by the cluster CA, valid for both ends of a
connection (extended key usage serverAuth and clientAuth: each service is a server and a client
of the others), with the process's name as its common name (which is what a server records as
the caller, see `riverlog.common.rpc.peer_certificates`) and the hosts it is reached at as
subject alternative names (gRPC checks the address a client dialled against them). `new_ca` and
`issue` are pure apart from the randomness of the keys; `ClusterCertificates.write` lays them
out in `<data-dir>/tls/`: `ca.pem`, and `<name>.pem` and `<name>.key` per process (keys 0600).
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALID_DAYS: Final = 365
CA_COMMON_NAME: Final = "riverlog-local-cluster-ca"
TLS_DIR: Final = "tls"


@dataclass(frozen=True, slots=True)
class KeyPair:
    """A certificate and its private key, both PEM."""

    certificate: bytes
    key: bytes

    @property
    def common_name(self) -> str:
        cert = x509.load_pem_x509_certificate(self.certificate)
        return str(cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value)


def _name(common_name: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Riverlog"),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _validity(
    now: datetime.datetime | None, days: int
) -> tuple[datetime.datetime, datetime.datetime]:
    start = (now or datetime.datetime.now(datetime.UTC)) - datetime.timedelta(minutes=5)
    return start, start + datetime.timedelta(days=days)


def new_ca(
    common_name: str = CA_COMMON_NAME,
    *,
    days: int = VALID_DAYS,
    now: datetime.datetime | None = None,
) -> KeyPair:
    """A self-signed CA certificate (path length 0: it signs leaf certificates only)."""
    key = ec.generate_private_key(ec.SECP256R1())
    not_before, not_after = _validity(now, days)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(_name(common_name))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def _san(hosts: Iterable[str]) -> list[x509.GeneralName]:
    names: list[x509.GeneralName] = []
    for host in dict.fromkeys(hosts):  # unique, in order
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return names


def issue(
    ca: KeyPair,
    common_name: str,
    hosts: Iterable[str],
    *,
    days: int = VALID_DAYS,
    now: datetime.datetime | None = None,
) -> KeyPair:
    """A certificate for one process, signed by `ca`: `common_name` is its identity, `hosts`
    (IP addresses or DNS names) where it is reached. ValueError without any host."""
    san = _san(hosts)
    if not san:
        raise ValueError(f"a certificate for {common_name!r} needs at least one host")
    ca_cert = x509.load_pem_x509_certificate(ca.certificate)
    ca_key = serialization.load_pem_private_key(ca.key, password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise ValueError("the CA key is not an EC key")
    key = ec.generate_private_key(ec.SECP256R1())
    not_before, not_after = _validity(now, days)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(min(not_after, ca_cert.not_valid_after_utc))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName(san), critical=False)
        .add_extension(
            x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
            ),
            critical=False,
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


@dataclass(frozen=True, slots=True)
class Paths:
    """Where one process's certificate, key and the CA are on disk."""

    certificate: Path
    key: Path
    ca: Path


class ClusterCertificates:
    """The CA and process certificates of one local cluster, in `<data_dir>/tls/`.

    Lifecycle: `ensure()` makes the CA once (kept across restarts of the cluster, so processes
    restarted later trust the same root); `for_process(name, hosts)` issues the process's
    certificate when it has none yet and returns its paths.
    """

    def __init__(self, data_dir: Path) -> None:
        self.dir = data_dir / TLS_DIR
        self.ca_path = self.dir / "ca.pem"
        self._ca_key_path = self.dir / "ca.key"

    def ensure(self) -> KeyPair:
        if self.ca_path.exists() and self._ca_key_path.exists():
            return KeyPair(self.ca_path.read_bytes(), self._ca_key_path.read_bytes())
        ca = new_ca()
        _write(self.ca_path, ca.certificate, private=False)
        _write(self._ca_key_path, ca.key, private=True)
        return ca

    def for_process(self, name: str, hosts: Iterable[str]) -> Paths:
        paths = Paths(self.dir / f"{name}.pem", self.dir / f"{name}.key", self.ca_path)
        if not (paths.certificate.exists() and paths.key.exists()):
            pair = issue(self.ensure(), name, hosts)
            _write(paths.key, pair.key, private=True)
            _write(paths.certificate, pair.certificate, private=False)
        return paths


def _write(path: Path, data: bytes, *, private: bool) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)
