"""`/metrics` over HTTPS (decision 0035, addendum), the real server on loopback with
certificates of a throwaway CA: a scraper that trusts the CA reads it, plain HTTP is refused,
a connection that never sends a byte does not hold up other scrapes (the handshake runs in the
connection's own thread), a connection that trickles bytes is cut off at its deadline, one past
the connection cap is closed at once, and with `ssl.client.auth=required` only a scraper holding a
certificate of the CA gets an answer."""

from __future__ import annotations

import contextlib
import http.client
import select
import socket
import ssl
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from riverlog.cluster.certs import KeyPair, issue, new_ca
from riverlog.common.certificate_files import CertificateFiles
from riverlog.common.metrics import endpoint, server
from riverlog.common.metrics.settings import MetricsTls, PrometheusSettings

pytestmark = pytest.mark.timeout(60)
# What a plain-HTTP request to an HTTPS endpoint gets: the connection closed, or bytes that are
# not HTTP.
REFUSED = (OSError, http.client.HTTPException)


def _write(directory: Path, name: str, pair: KeyPair) -> tuple[str, str]:
    cert, key = directory / f"{name}.pem", directory / f"{name}.key"
    cert.write_bytes(pair.certificate)
    key.write_bytes(pair.key)
    return str(cert), str(key)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    directory = tmp_path_factory.mktemp("pki")
    ca = new_ca()
    (directory / "ca.pem").write_bytes(ca.certificate)
    node = _write(directory, "storage-1", issue(ca, "storage-1", ["127.0.0.1"]))
    scraper = _write(directory, "prometheus", issue(ca, "prometheus", ["127.0.0.1"]))
    rogue = _write(directory, "rogue", issue(new_ca(), "rogue", ["127.0.0.1"]))
    return {
        "ca": str(directory / "ca.pem"),
        "cert": node[0],
        "key": node[1],
        "scraper_cert": scraper[0],
        "scraper_key": scraper[1],
        "rogue_cert": rogue[0],
        "rogue_key": rogue[1],
    }


def _serve(pki: dict[str, str], client_auth_required: bool) -> Iterator[str]:
    files = CertificateFiles(pki["cert"], pki["key"], pki["ca"])
    endpoint.configure(PrometheusSettings(port=0, tls=MetricsTls(files, client_auth_required)))
    address = endpoint.start("127.0.0.1")
    assert address is not None and endpoint.scheme() == "https"
    try:
        yield address
    finally:
        endpoint.stop()
        endpoint.configure(None)


@pytest.fixture
def https(pki: dict[str, str]) -> Iterator[str]:
    yield from _serve(pki, client_auth_required=False)


@pytest.fixture
def mutual(pki: dict[str, str]) -> Iterator[str]:
    yield from _serve(pki, client_auth_required=True)


def scrape(url: str, context: ssl.SSLContext | None = None) -> str:
    with urllib.request.urlopen(url, timeout=10, context=context) as response:
        assert response.status == 200
        return str(response.read().decode())


def trusting(pki: dict[str, str], client: str | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=pki["ca"])
    if client is not None:
        context.load_cert_chain(pki[f"{client}_cert"], pki[f"{client}_key"])
    return context


def test_https_with_the_nodes_certificate_and_no_plain_http(
    https: str, pki: dict[str, str]
) -> None:
    assert "python_info" in scrape(f"https://{https}/metrics", trusting(pki))
    with pytest.raises(REFUSED):  # the TLS handshake fails: the connection is closed
        scrape(f"http://{https}/metrics")
    with pytest.raises(OSError):  # a scraper that does not trust the cluster CA
        scrape(f"https://{https}/metrics", ssl.create_default_context())


def test_a_silent_connection_does_not_hold_up_a_scrape(https: str, pki: dict[str, str]) -> None:
    host, _, port = https.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=10):  # connects, says nothing
        assert "python_info" in scrape(f"https://{https}/metrics", trusting(pki))


def test_client_auth_required_wants_a_certificate_of_the_ca(
    mutual: str, pki: dict[str, str]
) -> None:
    url = f"https://{mutual}/metrics"
    assert "python_info" in scrape(url, trusting(pki, "scraper"))
    for context in (trusting(pki), trusting(pki, "rogue")):
        with pytest.raises(OSError):
            scrape(url, context)


# A TLS record header announcing a 512-byte handshake message: the server waits for the body.
RECORD_HEADER = b"\x16\x03\x01\x02\x00"


def _closed_by_server(sock: socket.socket, within_s: float) -> bool:
    """Whether the server ends `sock` within `within_s`, the client sending one byte of an
    unfinished ClientHello every 0.1 s meanwhile (each read well inside the socket timeout)."""
    sock.sendall(RECORD_HEADER)
    give_up = time.monotonic() + within_s
    while time.monotonic() < give_up:
        readable, _, _ = select.select([sock], [], [], 0.1)
        try:
            if readable and sock.recv(1) == b"":
                return True
            sock.sendall(b"\x00")
        except OSError:  # reset: the server closed it
            return True
    return False


@contextlib.contextmanager
def _served(pki: dict[str, str], monkeypatch: pytest.MonkeyPatch, **limits: float) -> Iterator[str]:
    """An HTTPS endpoint with `server`'s limits (CONNECTION_DEADLINE_S, MAX_CONNECTIONS) set."""
    for name, value in limits.items():
        monkeypatch.setattr(server, name, value)
    yield from _serve(pki, client_auth_required=False)


def _connect(address: str) -> socket.socket:
    host, _, port = address.rpartition(":")
    return socket.create_connection((host, int(port)), timeout=10)


def test_a_trickling_connection_is_cut_off_at_its_deadline(
    pki: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    with _served(pki, monkeypatch, CONNECTION_DEADLINE_S=1.0) as address:
        with _connect(address) as trickler:
            assert _closed_by_server(trickler, within_s=30)  # 1 s, generously
        assert "python_info" in scrape(f"https://{address}/metrics", trusting(pki))


def test_a_connection_past_the_cap_is_closed(
    pki: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    with _served(pki, monkeypatch, MAX_CONNECTIONS=2) as address:
        silent = [_connect(address) for _ in range(2)]
        with _connect(address) as third:
            assert third.recv(1) == b""  # accepted after the two silent ones, and closed
        silent.pop().close()  # frees a slot once the server has seen it go
        give_up = time.monotonic() + 30
        while True:
            try:
                assert "python_info" in scrape(f"https://{address}/metrics", trusting(pki))
                break
            except OSError:  # refused while the slot is not yet back
                if time.monotonic() > give_up:
                    raise
        for sock in silent:
            sock.close()
