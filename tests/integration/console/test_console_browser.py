"""The web console in a real headless browser (Debian's chromium and chromedriver, driven by
selenium) against the module's real cluster (with a group coordinator): `riverlog console`
runs as its own process on 127.0.0.1 and is stopped by PID. A user signs in with their own
password (a wrong one is refused), every page loads, a topic is created and deleted from the
page (a bad config line is refused and changes nothing), a produced record shows up decoded as
JSON and as hex, its bytes in the partition's size on the topic page, and a group's lag is shown
and falls to zero as the group consumes.

Set RIVERLOG_CONSOLE_SCREENSHOTS=DIR to save a screenshot of each page the test saw there
(docs/console/ is made by scripts/console_screenshots.py, on a cluster with more to show).
Skipped, saying why, where chromium or chromedriver is not installed (`make browser-tools`).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlparse

import pytest

from riverlog.client import AdminClient, Consumer, Producer
from riverlog.cluster import LocalCluster, unique_topic_name

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")

pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.timeout(120),
    pytest.mark.skipif(
        CHROMIUM is None or CHROMEDRIVER is None,
        reason="needs Debian's chromium and chromium-driver "
        "(apt-get install -y chromium chromium-driver, or `make browser-tools` as root)",
    ),
]

webdriver = pytest.importorskip("selenium.webdriver")
from selenium.common.exceptions import StaleElementReferenceException  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.remote.webdriver import WebDriver  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402

PASSWORD = "console-pw"
ADMIN = "console-admin"
VIEWER = "console-viewer"
WAIT_S = 30.0
SCREENSHOTS = os.environ.get("RIVERLOG_CONSOLE_SCREENSHOTS", "")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _wait_http(url: str, proc: subprocess.Popen[bytes], deadline_s: float = 30.0) -> None:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"riverlog console exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=1) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"{url} did not answer within {deadline_s} s")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """The module's own cluster, as tests/integration/acls': the last test's ACL turns
    enforcement on, which on the shared session cluster would restrict every later test."""
    with LocalCluster(
        tmp_path_factory.mktemp("console-cluster"),
        storage_nodes=3,
        metadata_nodes=1,
        gateways=1,
        coordinators=1,
        extra_config={
            # as tests/integration/acls: ANONYMOUS for the fixtures' helpers; the console's
            # admin user is a super user, so the ACL test's first binding locks nobody out
            "gateway": {"super.users": f"User:ANONYMOUS;User:{ADMIN}"},
            "metadata": {"offsets.topic.num.partitions": "3"},
            "coordinator": {"group.initial.rebalance.delay.ms": "0"},
        },
    ) as local:
        yield local


@pytest.fixture
def new_topic(cluster: LocalCluster) -> Callable[[int], str]:
    def create(partitions: int = 1) -> str:
        name = unique_topic_name("console")
        cluster.create_topic(name, partitions, 1)
        return name

    return create


@pytest.fixture(scope="module")
def console_url(cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = _free_port()
    log = tmp_path_factory.mktemp("console") / "console.log"
    command = [
        sys.executable, "-m", "riverlog.cli.main", "console",
        "--bootstrap", cluster.gateway_address,
        "--host", "127.0.0.1", "--port", str(port),
        "--sample-interval", "1",
    ]  # fmt: skip
    with log.open("wb") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}"
        _wait_http(f"{url}/healthz", proc)
        yield url
    finally:
        proc.terminate()  # by PID
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    # uvicorn exits by re-raising SIGTERM once its graceful shutdown (the lifespan closing every
    # session) is done
    assert proc.returncode in (0, -signal.SIGTERM), log.read_text()[-2000:]
    assert "Application shutdown complete" in log.read_text()


@pytest.fixture(scope="module")
def user(cluster: LocalCluster) -> str:
    """The user most tests sign in as: a super user of the module's gateways."""
    with AdminClient({"bootstrap.servers": cluster.gateway_address}) as admin:
        admin.upsert_user(ADMIN, PASSWORD)
    return ADMIN


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = str(CHROMIUM)
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                "--disable-gpu", "--window-size=1400,1000"):  # fmt: skip
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def _wait(browser: WebDriver, condition, what: str):  # type: ignore[no-untyped-def]
    # a page being replaced (a form's redirect, an htmx swap) leaves stale elements: look again
    return WebDriverWait(
        browser, WAIT_S, poll_frequency=0.2, ignored_exceptions=(StaleElementReferenceException,)
    ).until(lambda d: condition(d), message=f"waiting for {what}")


def _wait_path(browser: WebDriver, path: str) -> None:
    """Until the browser shows the page at `path` (not /login?next=<path>), loaded."""
    _wait(
        browser,
        lambda d: (
            urlparse(d.current_url).path == path
            and d.execute_script("return document.readyState") == "complete"
        ),
        f"the page {path}",
    )


def _text(browser: WebDriver, css: str) -> str:
    return str(browser.find_element(By.CSS_SELECTOR, css).text)


def _shot(browser: WebDriver, name: str) -> None:
    if SCREENSHOTS:  # a look at what the test saw (docs/console comes from the script)
        Path(SCREENSHOTS).mkdir(parents=True, exist_ok=True)
        browser.save_screenshot(str(Path(SCREENSHOTS) / f"{name}.png"))


def _sign_in(browser: WebDriver, url: str, user: str, password: str) -> None:
    browser.delete_all_cookies()
    browser.get(f"{url}/cluster")
    _wait(browser, lambda d: "/login" in d.current_url, "the login page")
    browser.find_element(By.NAME, "username").send_keys(user)
    browser.find_element(By.NAME, "password").send_keys(password)
    browser.find_element(By.ID, "sign-in").click()


@pytest.fixture
def signed_in(browser: WebDriver, console_url: str, user: str) -> WebDriver:
    _sign_in(browser, console_url, user, PASSWORD)
    _wait_path(browser, "/cluster")
    return browser


def test_a_wrong_password_is_refused_and_the_right_one_signs_in_as_the_user(
    browser: WebDriver, console_url: str, user: str
) -> None:
    _sign_in(browser, console_url, user, "not-the-password")
    error = _wait(browser, lambda d: d.find_elements(By.ID, "login-error"), "the login error")
    assert "SASL_AUTHENTICATION_FAILED" in error[0].text
    _shot(browser, "login")
    _sign_in(browser, console_url, user, PASSWORD)
    _wait_path(browser, "/cluster")
    assert _text(browser, "#principal") == user
    browser.find_element(By.CSS_SELECTOR, "nav form button").click()  # sign out
    _wait(browser, lambda d: "/login" in d.current_url, "the login page")
    browser.get(f"{console_url}/topics")
    assert "/login" in browser.current_url  # the session is gone


def test_every_call_carries_the_users_own_credentials(
    browser: WebDriver, console_url: str, cluster: LocalCluster
) -> None:
    """Deleting the signed-in user makes the next page fail authentication at the gateway:
    the console calls as that user on every page, not only at sign-in."""
    doomed = unique_topic_name("console-doomed")
    with AdminClient({"bootstrap.servers": cluster.gateway_address}) as admin:
        admin.upsert_user(doomed, PASSWORD)
        _sign_in(browser, console_url, doomed, PASSWORD)
        _wait_path(browser, "/cluster")
        assert _text(browser, "#principal") == doomed
        admin.delete_user(doomed)

    def refused(d: WebDriver) -> bool:
        d.get(f"{console_url}/topics")
        return bool(d.find_elements(By.ID, "error-message"))

    _wait(browser, refused, "the gateway to refuse the deleted user")
    assert "SASL_AUTHENTICATION_FAILED" in browser.find_element(By.TAG_NAME, "h2").text


def test_every_page_loads(signed_in: WebDriver, console_url: str, cluster: LocalCluster) -> None:
    browser = signed_in
    with AdminClient({"bootstrap.servers": cluster.gateway_address}) as admin:
        described = admin.describe_cluster()
    assert _text(browser, "#controller") == str(described.controller_id)
    assert _text(browser, "#controller-epoch") == str(described.controller_epoch)
    rows = browser.find_elements(By.CSS_SELECTOR, "#nodes tbody tr")
    storage = [r for r in rows if r.text.startswith("storage")]
    assert len(storage) == sum(n.kind == "storage" for n in described.nodes) == 3
    _shot(browser, "cluster")
    for path, table in [("/topics", "#topics"), ("/groups", "#groups"),
                        ("/quotas", "#quotas"), ("/users", "#users")]:  # fmt: skip
        browser.get(f"{console_url}{path}")
        assert browser.find_elements(By.CSS_SELECTOR, table), path
        _shot(browser, path.strip("/"))
    assert _text(browser, "#principal") in _text(browser, "#users")


def test_quotas_and_users_are_changed_from_their_pages(
    signed_in: WebDriver, console_url: str, cluster: LocalCluster, user: str
) -> None:
    browser = signed_in
    newcomer = unique_topic_name("console-newcomer")
    with AdminClient({"bootstrap.servers": cluster.gateway_address}) as admin:
        browser.get(f"{console_url}/quotas")
        form = browser.find_element(By.ID, "set-quota")
        form.find_element(By.NAME, "user").send_keys(user)
        Select(form.find_element(By.NAME, "key")).select_by_visible_text("producer_byte_rate")
        form.find_element(By.NAME, "value").send_keys("1048576")
        form.find_element(By.CSS_SELECTOR, "button").click()
        _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".flash-ok"), "the change")
        assert "1,048,576" in _text(browser, "#quotas")
        assert list(admin.describe_client_quotas(user=user).values()) == [
            {"producer_byte_rate": 1048576.0}
        ]
        form = browser.find_element(By.ID, "set-quota")  # a bad value: refused, nothing changed
        form.find_element(By.NAME, "user").send_keys(user)
        form.find_element(By.NAME, "value").send_keys("fast")
        form.find_element(By.CSS_SELECTOR, "button").click()
        flash = _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".flash-error"), "error")
        assert "INVALID_CONFIG" in flash[0].text
        assert len(admin.describe_client_quotas(user=user)) == 1
        form = browser.find_element(By.ID, "set-quota")  # empty: removed
        form.find_element(By.NAME, "user").send_keys(user)
        Select(form.find_element(By.NAME, "key")).select_by_visible_text("producer_byte_rate")
        form.find_element(By.CSS_SELECTOR, "button").click()
        _wait(browser, lambda d: not admin.describe_client_quotas(user=user), "the removal")

        browser.get(f"{console_url}/users")
        form = browser.find_element(By.ID, "add-user")
        form.find_element(By.NAME, "name").send_keys(newcomer)
        form.find_element(By.NAME, "password").send_keys("newcomer-pw")
        form.find_element(By.CSS_SELECTOR, "button").click()
        _wait(browser, lambda d: newcomer in _text(d, "#users"), "the new user")
        assert newcomer in admin.list_users()
    # the new user's password works: sign in as them
    _sign_in(browser, console_url, newcomer, "newcomer-pw")
    _wait_path(browser, "/cluster")
    assert _text(browser, "#principal") == newcomer


def test_a_topic_is_created_altered_and_deleted_from_the_page(
    signed_in: WebDriver, console_url: str, cluster: LocalCluster, topic_name: str
) -> None:
    browser = signed_in
    browser.get(f"{console_url}/topics")
    form = browser.find_element(By.ID, "create-topic")
    form.find_element(By.NAME, "name").send_keys(topic_name)
    form.find_element(By.NAME, "partitions").send_keys("2")
    form.find_element(By.NAME, "replication_factor").send_keys("1")
    form.find_element(By.NAME, "configs").send_keys("retention.ms=3600000")
    form.find_element(By.CSS_SELECTOR, "button").click()
    _wait(browser, lambda d: d.find_elements(By.ID, "topic-name"), "the topic page")
    assert _text(browser, "#topic-name") == topic_name
    assert len(browser.find_elements(By.CSS_SELECTOR, "#partitions tbody tr")) == 2
    with AdminClient({"bootstrap.servers": cluster.gateway_address}) as admin:
        topic = admin.describe_topics([topic_name])[topic_name]
        assert len(topic.partitions) == 2
        assert topic.configs.get("retention.ms") == "3600000"
        # a bad config line is refused with Kafka's code and changes nothing
        form = browser.find_element(By.ID, "alter-configs")
        form.find_element(By.NAME, "set").send_keys("cleanup.policy")
        form.find_element(By.CSS_SELECTOR, "button").click()
        flash = _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".flash-error"), "error")
        assert "INVALID_CONFIG" in flash[0].text
        assert admin.describe_topics([topic_name])[topic_name].configs == topic.configs
        form = browser.find_element(By.ID, "alter-configs")
        form.find_element(By.NAME, "set").send_keys("retention.ms=7200000")
        form.find_element(By.CSS_SELECTOR, "button").click()
        _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".flash-ok"), "the change")
        assert admin.describe_topics([topic_name])[topic_name].configs["retention.ms"] == "7200000"
        row = browser.find_element(By.CSS_SELECTOR, "#configs tr[data-config='retention.ms']")
        assert "7200000" in row.text
        _shot(browser, "topic")
        form = browser.find_element(By.ID, "delete-topic")
        form.find_element(By.NAME, "confirm").send_keys(topic_name)
        form.find_element(By.CSS_SELECTOR, "button").click()
        _wait_path(browser, "/topics")
        assert topic_name not in admin.list_topics()
    assert not browser.find_elements(By.CSS_SELECTOR, f"#topics tr[data-topic='{topic_name}']")


def _throughput(browser: WebDriver, url: str, topic: str) -> list[list[float]]:
    """The topic's sampled records per second, as the page's graph fetches them."""
    browser.get(f"{url}/topics/{topic}/throughput.json")
    points: list[list[float]] = json.loads(browser.find_element(By.TAG_NAME, "body").text)["points"]
    return points


def test_a_produced_record_shows_up_in_the_throughput_graph_and_decoded(
    signed_in: WebDriver, console_url: str, cluster: LocalCluster, new_topic: Callable[[int], str]
) -> None:
    browser = signed_in
    topic = new_topic(1)
    browser.get(f"{console_url}/topics/{topic}")  # the console starts sampling its throughput
    _wait(browser, lambda d: len(_throughput(d, console_url, topic)) >= 1, "a throughput point")
    value = json.dumps({"order": 42, "item": "kayak"}).encode()
    with Producer({"bootstrap.servers": cluster.gateway_address}) as producer:
        producer.send(topic, value, key=b"user-7", headers=[("trace", b"\x00\xff")]).result(30)
    _wait(
        browser,
        lambda d: any(rate > 0 for _, rate in _throughput(d, console_url, topic)),
        "the record in the throughput graph",
    )

    def sizes(d: WebDriver) -> tuple[int, int] | None:
        """(partition 0's size, the topic's total) once the page shows the record's bytes."""
        d.get(f"{console_url}/topics/{topic}")
        cell = d.find_element(By.CSS_SELECTOR, "#partitions td.size").get_attribute("data-bytes")
        total = d.find_element(By.ID, "topic-size").get_attribute("data-bytes")
        return (int(cell), int(total)) if cell and int(cell) >= len(value) else None

    partition_size, total = _wait(browser, sizes, "the partition's size on the topic page")
    assert total == partition_size  # one partition, not tiered: all of it local
    assert _text(browser, "#topic-remote-size") == "0 B"
    assert "B" in _text(browser, "#partitions td.size")  # human-readable: "N B" / "x.y KiB"
    _shot(browser, "topic")
    browser.get(f"{console_url}/topics/{topic}/messages?partition=0&format=auto")
    row = _wait(
        browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#records tr[data-offset='0']"), "row"
    )[0]
    assert row.find_element(By.CSS_SELECTOR, "td.key").text.startswith("user-7")
    cell = row.find_element(By.CSS_SELECTOR, "td.value")
    assert cell.get_attribute("data-format") == "json"
    assert '"item": "kayak"' in cell.text
    assert "00 ff" in row.find_element(By.CSS_SELECTOR, "td.headers").text  # not UTF-8: hex
    _shot(browser, "messages")
    Select(browser.find_element(By.NAME, "format")).select_by_visible_text("hex")
    browser.find_element(By.CSS_SELECTOR, "#browse-form button").click()
    cell = _wait(
        browser,
        lambda d: d.find_elements(By.CSS_SELECTOR, "#records td.value[data-format='hex']"),
        "the hex value",
    )[0]
    assert value[:4].hex(" ") in cell.text  # 7b 22 6f 72: {"or
    # by time: a timestamp after the record finds nothing, one before it finds it
    browser.get(f"{console_url}/topics/{topic}/messages?partition=0&mode=timestamp&timestamp=0")
    assert browser.find_elements(By.CSS_SELECTOR, "#records tr[data-offset='0']")
    browser.get(f"{console_url}/topics/{topic}/messages?partition=7")  # bad input: an error
    assert "has partitions 0 to 0, not 7" in _text(browser, "#error-message")
    later = int(time.time() * 1000) + 3_600_000
    browser.get(f"{console_url}/topics/{topic}/messages?mode=timestamp&timestamp={later}")
    assert not browser.find_elements(By.CSS_SELECTOR, "#records tr[data-offset]")


def test_a_groups_lag_is_shown_and_falls_to_zero_as_it_consumes(
    signed_in: WebDriver, console_url: str, cluster: LocalCluster, new_topic: Callable[[int], str]
) -> None:
    browser = signed_in
    topic = new_topic(1)
    group = "billing/" + unique_topic_name("console-group")  # a "/" in the id, as Kafka allows
    with Producer({"bootstrap.servers": cluster.gateway_address}) as producer:
        producer.send_many(topic, [f"record-{i}".encode() for i in range(20)])
        producer.flush(30)
    conf = {
        "bootstrap.servers": cluster.gateway_address,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    }
    with Consumer(conf) as consumer:
        consumer.subscribe([topic])

        def consume(count: int) -> None:
            got = 0
            deadline = time.monotonic() + WAIT_S
            while got < count and time.monotonic() < deadline:
                got += sum(map(len, consumer.poll(500, max_records=count - got).values()))
            assert got == count
            consumer.commit_sync()

        consume(5)
        browser.get(f"{console_url}/groups/{group}")
        _wait(browser, lambda d: _text(d, "#total-lag") == "15", "lag 15")
        cell = f"#lag-table tr[data-tp='{topic}-0'] td.lag"  # (inside the part htmx swaps)
        _wait(browser, lambda d: _text(d, cell) == "15", "lag 15 on partition 0")
        assert _text(browser, "#group-state") == "Stable"
        _wait(
            browser,
            lambda d: (
                int(d.find_element(By.ID, "lag-chart").get_attribute("data-points") or 0) >= 1
            ),
            "a point on the lag graph",
        )
        consume(15)
        _wait(browser, lambda d: _text(d, "#total-lag") == "0", "lag 0")  # refreshed by htmx
        _wait(
            browser,
            lambda d: (
                int(d.find_element(By.ID, "lag-chart").get_attribute("data-points") or 0) >= 2
            ),
            "more points on the lag graph",
        )
        _shot(browser, "group")
        browser.get(f"{console_url}/groups")
        row = f"#groups tr[data-group='{group}']"
        _wait(browser, lambda d: _text(d, f"{row} td.lag") == "0", "the group's lag in the list")


def test_acls_are_shown_and_the_gateway_authorizes_each_user_as_themselves(
    signed_in: WebDriver, console_url: str, cluster: LocalCluster
) -> None:
    """Last in the module: its binding turns enforcement on. A viewer with READ on a prefix
    sees only those topics, is refused the others, ACLs and topic creation, with Kafka's
    codes, while the super user sees the binding on the ACLs page."""
    from riverlog.common.acl.model import (
        AccessControlEntry,
        AclBinding,
        AclOperation,
        AclPermission,
        PatternType,
        ResourcePattern,
        ResourceType,
    )

    browser = signed_in
    prefix = unique_topic_name("console-open")
    shown, hidden = f"{prefix}-a", unique_topic_name("console-hidden")
    for topic in (shown, hidden):
        cluster.create_topic(topic, 1, 1)
    binding = AclBinding(
        ResourcePattern(ResourceType.TOPIC, prefix, PatternType.PREFIXED),
        AccessControlEntry(f"User:{VIEWER}", "*", AclOperation.READ, AclPermission.ALLOW),
    )
    with AdminClient({"bootstrap.servers": cluster.gateway_address}) as admin:
        admin.upsert_user(VIEWER, PASSWORD)
        browser.find_element(By.CSS_SELECTOR, "nav a[href='/acls']").click()  # describe_acls
        _wait_path(browser, "/acls")
        form = browser.find_element(By.ID, "add-acl")  # the ACL, added from the page
        form.find_element(By.NAME, "principal").send_keys(VIEWER)
        Select(form.find_element(By.NAME, "operation")).select_by_visible_text("READ")
        Select(form.find_element(By.NAME, "pattern_type")).select_by_visible_text("PREFIXED")
        form.find_element(By.NAME, "resource").send_keys(prefix)
        form.find_element(By.CSS_SELECTOR, "button").click()
        _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".flash-ok"), "the ACL")
        assert admin.describe_acls() == [binding]
        row = _text(browser, "#acls tbody")
        assert all(word in row for word in ("READ", "ALLOW", "TOPIC", "PREFIXED", prefix))
        _shot(browser, "acls")
        # and one to remove from the page again: a bad one first, refused, nothing added
        form = browser.find_element(By.ID, "add-acl")
        form.find_element(By.NAME, "principal").send_keys("Group:nobody")
        form.find_element(By.NAME, "resource").send_keys("x")
        form.find_element(By.CSS_SELECTOR, "button").click()
        flash = _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".flash-error"), "error")
        assert "INVALID_REQUEST" in flash[0].text and "invalid principal" in flash[0].text
        form = browser.find_element(By.ID, "add-acl")
        form.find_element(By.NAME, "principal").send_keys(VIEWER)
        Select(form.find_element(By.NAME, "operation")).select_by_visible_text("WRITE")
        form.find_element(By.NAME, "resource").send_keys(shown)
        form.find_element(By.CSS_SELECTOR, "button").click()
        _wait(browser, lambda d: len(admin.describe_acls()) == 2, "the second ACL")
        _wait_path(browser, "/acls")
        rows = browser.find_elements(By.CSS_SELECTOR, "#acls tbody tr")
        [write] = [r for r in rows if "WRITE" in r.text]
        write.find_element(By.CSS_SELECTOR, "button").click()
        _wait(browser, lambda d: admin.describe_acls() == [binding], "the removal")

    _sign_in(browser, console_url, VIEWER, PASSWORD)
    _wait_path(browser, "/cluster")

    def lists_only_the_prefix(d: WebDriver) -> bool:
        d.get(f"{console_url}/topics")
        rows = d.find_elements(By.CSS_SELECTOR, "#topics tr[data-topic]")
        return [r.get_attribute("data-topic") for r in rows] == [shown]

    _wait(browser, lists_only_the_prefix, "the viewer's topics: the prefix's only")
    browser.get(f"{console_url}/topics/{shown}")  # READ implies DESCRIBE, not DESCRIBE_CONFIGS
    assert _text(browser, "#topic-name") == shown
    assert _text(browser, "#configs-error").startswith("TOPIC_AUTHORIZATION_FAILED")
    # sizes need DESCRIBE on the cluster (DescribeLogDirs): said in their place
    assert "CLUSTER_AUTHORIZATION_FAILED" in _text(browser, "#sizes-error")
    browser.get(f"{console_url}/topics/{shown}/messages")  # READ: the browser reads
    assert "0 record(s) shown" in _text(browser, "p.note")
    browser.get(f"{console_url}/topics/{hidden}")
    assert _text(browser, "h2") == "TOPIC_AUTHORIZATION_FAILED"
    browser.get(f"{console_url}/acls")
    assert _text(browser, "h2") == "CLUSTER_AUTHORIZATION_FAILED"
    browser.get(f"{console_url}/topics")
    form = browser.find_element(By.ID, "create-topic")
    form.find_element(By.NAME, "name").send_keys(f"{prefix}-new")
    form.find_element(By.CSS_SELECTOR, "button").click()
    flash = _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".flash-error"), "refusal")
    assert "AUTHORIZATION_FAILED" in flash[0].text
    with AdminClient({"bootstrap.servers": cluster.gateway_address}) as admin:
        assert f"{prefix}-new" not in admin.list_topics()
