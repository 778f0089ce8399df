"""etcd's client TLS in the metadata service's settings (decision 0035, addendum): https://
endpoints turn it on, `metadata.etcd.ssl.*.location` name the PEM files, and every combination
that would silently do something else is refused at start-up, naming the key. The store refuses
https:// without credentials and names an unreadable file."""

from __future__ import annotations

from pathlib import Path

import pytest

from riverlog.cluster.certs import issue, new_ca
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.services.metadata.app import etcd_credentials
from riverlog.services.metadata.config import MetadataConfig, etcd_scheme
from riverlog.services.metadata.store import EtcdCredentials, EtcdStore

CA = "metadata.etcd.ssl.ca.location"
CERT = "metadata.etcd.ssl.certificate.location"
KEY = "metadata.etcd.ssl.key.location"


def make(etcd: str, **overrides: str) -> MetadataConfig:
    return MetadataConfig.from_args(1, "127.0.0.1", 0, etcd, overrides)


def test_plaintext_stays_the_default() -> None:
    for etcd in ("http://127.0.0.1:2379", "127.0.0.1:2379", "HTTP://a:1,http://b:1"):
        config = make(etcd)
        assert not config.etcd_tls
        assert etcd_credentials(config) is None


def test_https_endpoints_with_a_ca_and_a_client_certificate() -> None:
    config = make("https://e1:2379,https://e2:2379", **{CA: "ca.pem", CERT: "m.pem", KEY: "m.key"})
    assert config.etcd_tls
    assert (config.etcd_ssl_ca_location, config.etcd_ssl_certificate_location) == (
        "ca.pem",
        "m.pem",
    )
    assert config.etcd_ssl_key_location == "m.key"
    assert make("https://e:1", **{CA: "ca.pem"}).etcd_tls  # verifying etcd only


def test_schemes() -> None:
    assert etcd_scheme("host:2379") == "http"
    assert etcd_scheme("HTTPS://host:2379") == "https"
    assert etcd_scheme("unix://x") == "unix"


@pytest.mark.parametrize(
    ("etcd", "overrides", "message"),
    [
        ("http://e:1", {CA: "ca.pem"}, f"{CA} is set but the --etcd endpoints are http://"),
        ("e:1", {CERT: "m.pem", KEY: "m.key"}, "use https://"),
        ("https://e:1", {}, f"https:// etcd endpoints need {CA}"),
        ("https://e:1", {CERT: "m.pem", KEY: "m.key"}, f"need {CA}"),
        ("https://e:1", {CA: "ca.pem", CERT: "m.pem"}, f"{CERT} needs {KEY}"),
        ("https://e:1", {CA: "ca.pem", KEY: "m.key"}, f"{KEY} needs {CERT}"),
        ("https://a:1,http://b:1", {CA: "ca.pem"}, "mix http:// and https://"),
        ("unix://a", {}, "unknown scheme 'unix'"),
    ],
)
def test_bad_combinations_are_refused(etcd: str, overrides: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError) as info:
        make(etcd, **overrides)
    assert message in str(info.value)


def test_credentials_read_the_files_once_and_name_a_missing_one(tmp_path: Path) -> None:
    ca = new_ca()
    pair = issue(ca, "metadata-1", ["127.0.0.1"])
    for name, data in (
        ("ca.pem", ca.certificate),
        ("m.pem", pair.certificate),
        ("m.key", pair.key),
    ):
        (tmp_path / name).write_bytes(data)
    files = {
        CA: str(tmp_path / "ca.pem"),
        CERT: str(tmp_path / "m.pem"),
        KEY: str(tmp_path / "m.key"),
    }
    credentials = etcd_credentials(make("https://127.0.0.1:1", **files))
    assert credentials is not None and credentials.channel is not None
    store = EtcdStore(["https://127.0.0.1:1"], "/riverlog/", 1.0, credentials)
    store.close()
    missing = {**files, KEY: str(tmp_path / "gone.key")}
    with pytest.raises(RiverlogError) as info:
        etcd_credentials(make("https://127.0.0.1:1", **missing))
    assert info.value.code == ErrorCode.INVALID_CONFIG
    assert "gone.key" in str(info.value)
    with pytest.raises(RiverlogError, match="no etcd TLS credentials"):
        EtcdStore(["https://127.0.0.1:1"], "/riverlog/")
    assert isinstance(credentials, EtcdCredentials)
