"""Test certificates made at test time with the openssl command line: a CA, a server certificate
for 127.0.0.1 (IP SAN) and client certificates by common name, all signed by the CA."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


@dataclass(frozen=True)
class TestCertificates:
    directory: Path

    @property
    def ca(self) -> str:
        return str(self.directory / "ca.pem")

    @property
    def server_cert(self) -> str:
        return str(self.directory / "server.pem")

    @property
    def server_key(self) -> str:
        return str(self.directory / "server.key")

    def client(self, cn: str) -> tuple[str, str]:
        """(certificate, key) paths of a client certificate with subject CN=`cn`."""
        cert, key = self.directory / f"{cn}.pem", self.directory / f"{cn}.key"
        if not cert.exists():
            self._sign(cn, cn, None)
        return str(cert), str(key)

    def _sign(self, name: str, cn: str, ext: str | None) -> None:
        d = self.directory
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key",
                 "-subj", f"/CN={cn}", "-out", f"{name}.csr", cwd=d)  # fmt: skip
        extra = ["-extfile", f"{name}.ext"] if ext else []
        if ext:
            (d / f"{name}.ext").write_text(ext)
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                 "-CAcreateserial", "-days", "2", "-out", f"{name}.pem", *extra, cwd=d)  # fmt: skip


def make_certificates(directory: Path) -> TestCertificates:
    """A CA and a server certificate for 127.0.0.1 in `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_args = ["-subj", "/CN=riverlog-test-ca", "-days", "2", "-out", "ca.pem"]
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", *ca_args,
             cwd=directory)  # fmt: skip
    certs = TestCertificates(directory)
    certs._sign("server", "127.0.0.1", "subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    return certs
