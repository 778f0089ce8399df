"""Screenshots of every page of the web console for docs/console/*.png.

Starts a throwaway local cluster (3 storage nodes on 3 racks, 3 metadata instances, a
coordinator), users, topics with records flowing, a consumer group that lags and catches up,
quotas and ACLs (the signed-in user is a super user); runs `riverlog console` as a process on
a free loopback port; signs in through the login page with headless chromium (Debian's
chromium and chromium-driver, driven by selenium) and saves one full-page PNG per page. Every
process it started is stopped by PID at the end.

    python scripts/console_screenshots.py [--out docs/console]
"""

from __future__ import annotations

import argparse
import json
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

from riverlog.client import AdminClient, Consumer, NewTopic, Producer
from riverlog.cluster import LocalCluster
from riverlog.common.acl.model import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermission,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from riverlog.common.quota.entity import DEFAULT, QuotaEntity

USER, PASSWORD = "alice", "alice-secret"
WIDTH = 1400


def _acl(
    principal: str,
    resource_type: ResourceType,
    name: str,
    pattern: PatternType,
    operation: str,
    permission: AclPermission = AclPermission.ALLOW,
) -> AclBinding:
    return AclBinding(
        ResourcePattern(resource_type, name, pattern),
        AccessControlEntry(principal, "*", AclOperation[operation], permission),
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _wait_http(url: str, deadline_s: float = 30.0) -> None:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=1):
                return
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"{url} did not answer")


def _browser() -> WebDriver:
    options = Options()
    options.binary_location = shutil.which("chromium") or "chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                f"--window-size={WIDTH},900", "--hide-scrollbars"):  # fmt: skip
        options.add_argument(arg)
    return webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)


def _shot(browser: WebDriver, out: Path, name: str) -> None:
    for _ in range(2):  # the page reflows at the new size: measure again
        height = browser.execute_script("return document.documentElement.scrollHeight")
        browser.set_window_size(WIDTH, max(int(height) + 120, 600))
        time.sleep(0.5)  # let the charts redraw at the new size
    browser.save_screenshot(str(out / f"{name}.png"))
    browser.set_window_size(WIDTH, 900)
    print(f"  {out / name}.png")


def _produce(bootstrap: str, stop: threading.Event) -> None:
    """Orders at a varying rate (so the throughput graph has a shape), with headers."""
    with Producer({"bootstrap.servers": bootstrap, "linger.ms": 20}) as producer:
        n = 0
        while not stop.is_set():
            burst = 20 + 15 * (n // 200 % 3)
            for _ in range(burst):
                order = {"order": n, "customer": f"c-{n % 50}", "total": round(9.5 + n % 40, 2)}
                producer.send(
                    "orders",
                    json.dumps(order).encode(),
                    key=f"c-{n % 50}".encode(),
                    headers=[("source", b"web"), ("trace", n.to_bytes(4, "big"))],
                )
                n += 1
            producer.send("clicks", f"/page/{n % 9}".encode())
            stop.wait(0.25)


def _consume(bootstrap: str, stop: threading.Event, start: threading.Event) -> None:
    """The group 'billing': falls behind, then catches up."""
    conf = {"bootstrap.servers": bootstrap, "group.id": "billing", "auto.offset.reset": "earliest",
            "client.id": "billing-worker"}  # fmt: skip
    with Consumer(conf) as consumer:
        consumer.subscribe(["orders"])
        start.wait()
        while not stop.is_set():
            consumer.poll(500, max_records=400)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="docs/console", type=Path)
    parser.add_argument("--settle", type=float, default=20.0, help="seconds of graphs to collect")
    args = parser.parse_args()
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    stop, catch_up = threading.Event(), threading.Event()
    with (
        tempfile.TemporaryDirectory(prefix="console-shots-") as tmp,
        LocalCluster(
            Path(tmp) / "cluster",
            storage_nodes=3,
            metadata_nodes=3,
            racks=["rack-a", "rack-b", "rack-c"],
            coordinators=1,
            extra_config={
                "coordinator": {"group.initial.rebalance.delay.ms": "0"},
                "gateway": {"super.users": f"User:{USER};User:ANONYMOUS"},  # the ACLs below
            },
        ) as cluster,
    ):
        bootstrap = cluster.gateway_address
        with AdminClient({"bootstrap.servers": bootstrap}) as admin:
            admin.create_topics(
                [
                    NewTopic("orders", 6, 3, {"retention.ms": "604800000"}),
                    NewTopic("clicks", 3, 2, {"cleanup.policy": "delete"}),
                    NewTopic("customers", 3, 3, {"cleanup.policy": "compact"}),
                ]
            )
            admin.upsert_user(USER, PASSWORD)
            admin.upsert_user("bob", "bob-secret")
            admin.alter_client_quotas(
                [
                    (QuotaEntity(USER, None), {"producer_byte_rate": 1048576.0}),
                    (QuotaEntity(DEFAULT, None), {"consumer_byte_rate": 4194304.0}),
                    (QuotaEntity(None, "batch-jobs"), {"request_percentage": 50.0}),
                ]
            )
            admin.create_acls(
                [
                    _acl("User:bob", ResourceType.TOPIC, "orders", PatternType.LITERAL, "READ"),
                    _acl("User:bob", ResourceType.GROUP, "billing", PatternType.LITERAL, "READ"),
                    _acl("User:*", ResourceType.TOPIC, "click", PatternType.PREFIXED, "DESCRIBE"),
                    _acl(
                        "User:bob",
                        ResourceType.TOPIC,
                        "customers",
                        PatternType.LITERAL,
                        "WRITE",
                        AclPermission.DENY,
                    ),
                ]
            )
        threads = [
            threading.Thread(target=_produce, args=(bootstrap, stop), daemon=True),
            threading.Thread(target=_consume, args=(bootstrap, stop, catch_up), daemon=True),
        ]
        for t in threads:
            t.start()
        port = _free_port()
        log = (Path(tmp) / "console.log").open("wb")
        console = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "riverlog.cli.main",
                "console",
                "--bootstrap",
                bootstrap,
                "--port",
                str(port),
                "--sample-interval",
                "1",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        browser = _browser()
        try:
            url = f"http://127.0.0.1:{port}"
            _wait_http(f"{url}/healthz")
            browser.get(f"{url}/login")
            browser.find_element(By.NAME, "username").send_keys(USER)
            _shot(browser, out, "login")
            browser.find_element(By.NAME, "password").send_keys(PASSWORD)
            browser.find_element(By.ID, "sign-in").click()
            WebDriverWait(browser, 30).until(lambda d: d.current_url.endswith("/cluster"))
            # open the graphed pages once so the console samples them while the data flows
            browser.get(f"{url}/topics/orders")
            browser.get(f"{url}/groups/billing")
            time.sleep(args.settle / 2)
            catch_up.set()
            time.sleep(args.settle / 2)
            for name, path in [
                ("cluster", "/cluster"),
                ("topics", "/topics"),
                ("topic", "/topics/orders"),
                ("messages", "/topics/orders/messages?partition=1&limit=8"),
                ("messages-hex", "/topics/orders/messages?partition=1&limit=3&format=hex"),
                ("groups", "/groups"),
                ("group", "/groups/billing"),
                ("quotas", "/quotas"),
                ("users", "/users"),
                ("acls", "/acls"),
            ]:
                browser.get(f"{url}{path}")
                time.sleep(2.5)  # the graphs' first fetch
                _shot(browser, out, name)
        finally:
            browser.quit()
            stop.set()
            console.terminate()
            console.wait(15)
            for t in threads:
                t.join(10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
