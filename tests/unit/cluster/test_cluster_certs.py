"""The throwaway CA and process certificates of `riverlog cluster up --tls` (cluster/certs.py):
what each certificate says (CA constraints, common name, subject alternative names, key usage),
that it is signed by the cluster CA, and how `ClusterCertificates` lays them out and keeps the
CA across restarts; and how LocalCluster passes them to each process and to its etcd."""

from __future__ import annotations

import datetime
import ipaddress
import ssl
import stat
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from riverlog.cluster import LocalCluster
from riverlog.cluster.certs import ClusterCertificates, issue, new_ca
from riverlog.cluster.etcd import etcd_spec
from riverlog.cluster.process import ManagedProcess, ProcessSpec
from riverlog.cluster.readiness import etcd_client_context, etcd_tls_files
from riverlog.common.metrics.settings import take_prometheus_settings
from riverlog.common.rpc import tls
from riverlog.services.metadata.config import MetadataConfig


def _cert(pem: bytes) -> x509.Certificate:
    return x509.load_pem_x509_certificate(pem)


def test_the_ca_is_a_self_signed_ca_for_leaf_certificates_only() -> None:
    ca = _cert(new_ca("test-ca").certificate)
    constraints = ca.extensions.get_extension_for_class(x509.BasicConstraints).value
    assert constraints.ca and constraints.path_length == 0
    assert ca.issuer == ca.subject
    assert ca.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "test-ca"
    ca.verify_directly_issued_by(ca)


def test_a_process_certificate_names_the_process_and_its_hosts_and_serves_both_ends() -> None:
    ca = new_ca()
    pair = issue(ca, "storage-2", ["127.0.0.1", "localhost", "127.0.0.1", "10.0.0.7"])
    cert = _cert(pair.certificate)
    assert pair.common_name == "storage-2"
    cert.verify_directly_issued_by(_cert(ca.certificate))
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.IPAddress) == [
        ipaddress.ip_address("127.0.0.1"),
        ipaddress.ip_address("10.0.0.7"),
    ]
    assert san.get_values_for_type(x509.DNSName) == ["localhost"]
    usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert set(usages) == {ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH}
    assert not cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert isinstance(cert.public_key(), ec.EllipticCurvePublicKey)


def test_a_certificate_does_not_outlive_its_ca_and_another_ca_did_not_sign_it() -> None:
    now = datetime.datetime(2030, 1, 1, tzinfo=datetime.UTC)
    ca = new_ca(days=10, now=now)
    cert = _cert(issue(ca, "gateway-1", ["127.0.0.1"], days=365, now=now).certificate)
    assert cert.not_valid_after_utc == _cert(ca.certificate).not_valid_after_utc
    with pytest.raises(InvalidSignature):  # same CA name, another key
        cert.verify_directly_issued_by(_cert(new_ca().certificate))


def test_a_certificate_needs_a_host() -> None:
    with pytest.raises(ValueError, match="at least one host"):
        issue(new_ca(), "quota-1", [])


def test_cluster_certificates_are_laid_out_once_with_private_keys(tmp_path: Path) -> None:
    certs = ClusterCertificates(tmp_path)
    paths = certs.for_process("metadata-1", ["127.0.0.1"])
    ca_pem = certs.ca_path.read_bytes()
    assert paths.ca == certs.ca_path == tmp_path / "tls" / "ca.pem"
    assert stat.S_IMODE(paths.key.stat().st_mode) == 0o600
    _cert(paths.certificate.read_bytes()).verify_directly_issued_by(_cert(ca_pem))
    # Again (a restart): the same CA and the same certificate, not new ones.
    first = paths.certificate.read_bytes()
    again = ClusterCertificates(tmp_path).for_process("metadata-1", ["127.0.0.1"])
    assert again.certificate.read_bytes() == first
    assert certs.ca_path.read_bytes() == ca_pem
    other = certs.for_process("storage-1", ["127.0.0.1"])
    _cert(other.certificate.read_bytes()).verify_directly_issued_by(_cert(ca_pem))


def test_a_tls_local_cluster_gives_each_process_its_own_certificate(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path / "c", etcd_url="http://127.0.0.1:1", tls=True)
    args = cluster.service_spec("metadata", 2).args
    settings = dict(a.split("=", 1) for a in args[1:] if "=" in a and not a.startswith("-"))
    parsed, rest = tls.split_overrides(settings)
    assert set(rest) <= {"metrics.prometheus.port"}  # the launcher's other per-process setting
    assert parsed.enabled
    assert Path(parsed.certificate_location).name == "metadata-2.pem"
    assert Path(parsed.key_location).name == "metadata-2.key"
    assert parsed.ca_location == str(cluster.certificates.ca_path)
    assert (
        _cert(Path(parsed.certificate_location).read_bytes())
        .subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0]
        .value
        == "metadata-2"
    )
    assert cluster.client_tls_config == {
        "security.protocol": "SSL",
        "ssl.ca.location": str(cluster.certificates.ca_path),
    }
    cluster.save_state()
    assert LocalCluster.attach(cluster.data_dir).layout.tls
    plain = LocalCluster(tmp_path / "p", etcd_url="http://127.0.0.1:1")
    assert not any("security.inter.broker" in a for a in plain.service_spec("metadata", 1).args)
    assert plain.client_tls_config == {}


def test_a_tls_clusters_etcd_requires_client_certificates_and_metadata_presents_one(
    tmp_path: Path,
) -> None:
    """Under `tls` the cluster's own etcd serves clients over https:// with its certificate and
    --client-cert-auth; the launcher's /health probe finds the files in that command line; each
    metadata instance gets its own certificate as etcd client certificate, settings its config
    accepts. Plaintext clusters keep http:// and no TLS flag (decision 0035, addendum)."""
    cluster = LocalCluster(tmp_path / "c", tls=True)
    spec = etcd_spec(tmp_path / "etcd", tmp_path / "etcd.log", tls=cluster._etcd_tls())
    files = etcd_tls_files(spec.args)
    assert files is not None
    assert Path(files.certificate).name == "etcd.pem" and Path(files.key).name == "etcd.key"
    assert files.ca == str(cluster.certificates.ca_path)
    assert "--client-cert-auth" in spec.args
    assert spec.health_url is not None and spec.health_url.startswith("https://127.0.0.1:")
    assert any(a.startswith("--listen-client-urls=https://") for a in spec.args)
    assert etcd_client_context(files).verify_mode == ssl.CERT_REQUIRED

    cluster._etcd_url = spec.health_url.rsplit("/", 1)[0]  # as _start_etcd sets it
    args = cluster.service_spec("metadata", 1).args
    assert args[args.index("--etcd") + 1].startswith("https://")
    settings = dict(a.split("=", 1) for a in args[1:] if "=" in a and not a.startswith("-"))
    _, rest = tls.split_overrides(settings)
    take_prometheus_settings(rest)
    config = MetadataConfig.from_args(1, "127.0.0.1", 0, args[args.index("--etcd") + 1], rest)
    assert config.etcd_tls
    assert Path(config.etcd_ssl_certificate_location).name == "metadata-1.pem"
    assert config.etcd_ssl_ca_location == str(cluster.certificates.ca_path)

    plain = etcd_spec(tmp_path / "etcd2", tmp_path / "etcd2.log")
    assert etcd_tls_files(plain.args) is None
    assert plain.health_url is not None and plain.health_url.startswith("http://")
    assert not any(a.startswith("--cert-file") for a in plain.args)
    # An external etcd (`--etcd URL`) is the user's to configure: no etcd settings are added.
    external = LocalCluster(tmp_path / "x", etcd_url="http://127.0.0.1:1", tls=True)
    assert not any("metadata.etcd.ssl" in a for a in external.service_spec("metadata", 1).args)


def test_a_processes_metrics_url_says_https_when_its_ready_file_does(tmp_path: Path) -> None:
    spec = ProcessSpec("storage-1", "storage", 1, ("python",), tmp_path / "log")
    assert ManagedProcess(spec, info={"metrics_address": "h:1"}).metrics_url == "http://h:1/metrics"
    tls_info = {"metrics_address": "h:1", "metrics_scheme": "https"}
    assert ManagedProcess(spec, info=tls_info).metrics_url == "https://h:1/metrics"
    assert ManagedProcess(spec).metrics_url is None
