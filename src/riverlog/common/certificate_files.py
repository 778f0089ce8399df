"""The PEM files a process serves TLS with: its certificate, its key and the CA its peers are
verified against. One type for the internal listener's (`rpc.tls.InternalTls.files`), the
`/metrics` endpoint's and the launcher's etcd."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class CertificateFiles:
    """A process's own certificate, its key and the CA its peers are verified against (PEM
    paths)."""

    certificate: str
    key: str
    ca: str
