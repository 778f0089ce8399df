"""Offline checks of deploy/ (no Docker engine, no cluster): every YAML parses, every container
command names a Riverlog module that exists and passes that service's own argument parser,
the Kubernetes objects are of known kinds with gRPC probes on the serving port, compose starts
etcd first and the tiers in the local launcher's order, the addresses the processes are
given are ones the files define, and scaling a StatefulSet maps onto the cluster's steps (the
README's commands parse, storage drops the claims of pods scaled away), and monitoring: every
process serves /metrics on the port Prometheus scrapes, and the Grafana dashboard uses only
metric names the code serves."""

from __future__ import annotations

import importlib.util
import json
import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from riverlog.cli.main import build_parser
from riverlog.common.metrics import endpoint as metrics_endpoint
from riverlog.common.metrics.catalog import CATALOG, family_of
from riverlog.common.metrics.settings import take_prometheus_settings
from riverlog.common.node import parse_node_args, parse_service_overrides
from riverlog.common.service import parse_overrides
from riverlog.services.coordinator.app import parse_args as coordinator_args
from riverlog.services.gateway.app import parse_args as gateway_args
from riverlog.services.metadata.app import arg_parser as metadata_parser
from riverlog.services.metadata.config import MetadataConfig
from riverlog.services.quota.config import QuotaConfig
from riverlog.services.storage.app import config_from_args as storage_args

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
K8S = DEPLOY / "k8s"
MODULE = re.compile(r"^riverlog\.services\.(\w+)$")
# The local launcher's start order (riverlog.cluster.local.START_ORDER), etcd first.
RANK = {
    "etcd": 0,
    "metadata": 1,
    "storage": 2,
    "quota": 3,
    "coordinator": 3,
    "gateway": 4,
    "console": 5,
}
CONSOLE_COMMAND = ["riverlog.cli.main", "console"]  # after the image's `python -m`
K8S_KINDS = {
    ("v1", "Service"),
    ("apps/v1", "StatefulSet"),
    ("apps/v1", "Deployment"),
    ("kustomize.config.k8s.io/v1beta1", "Kustomization"),
    ("networking.k8s.io/v1", "NetworkPolicy"),
}


@pytest.fixture(autouse=True)
def _no_metrics_endpoint_left_configured() -> Iterator[None]:
    """The services' parsers configure this process's /metrics endpoint (decision 0033):
    leave none configured for the tests that run after these."""
    yield
    metrics_endpoint.configure(None)


def _compose() -> dict[str, Any]:
    data = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    assert isinstance(data, dict)
    return data


def _k8s_docs() -> list[tuple[str, dict[str, Any]]]:
    docs = []
    for path in sorted(K8S.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc is not None:
                docs.append((path.name, doc))
    return docs


def _compose_env(arg: str) -> str:
    """${VAR:-default} → default, ${VAR} → a sample value."""
    arg = re.sub(r"\$\{\w+:-([^}]*)\}", r"\1", arg)
    return re.sub(r"\$\{\w+\}", "sample", arg)


def _k8s_env(arg: str, pod: str) -> str:
    return arg.replace("$(POD_INDEX)", "0").replace("$(POD_NAME)", pod)


def _flag(args: list[str], name: str) -> str:
    for i, arg in enumerate(args):
        if arg.startswith(f"{name}="):
            return arg.split("=", 1)[1]
        if arg == name:
            return args[i + 1]
    raise AssertionError(f"{name} missing from {args}")


def _parse(role: str, args: list[str]) -> None:
    """Run the service's own command-line parsing (and config validation) on `args`."""
    try:
        if role == "metadata":
            ns = metadata_parser().parse_args(args)
            overrides = parse_service_overrides(ns.config)  # as the service's main() does
            MetadataConfig.from_args(ns.instance_id, ns.host, ns.port, ns.etcd, overrides)
        elif role == "storage":
            storage_args(args)
        elif role == "gateway":
            gateway_args(args)
        elif role == "coordinator":
            coordinator_args(args)
        elif role == "quota":
            parse_node_args("quota", QuotaConfig.from_overrides, args, node_id_help="id")
        else:
            raise AssertionError(f"no parser known for {role}")
    except SystemExit as exc:
        pytest.fail(f"{role} rejects {args}: exit {exc.code}")


def _role(module: str) -> str:
    match = MODULE.match(module)
    assert match, f"not a Riverlog service module: {module}"
    assert importlib.util.find_spec(module) is not None, f"{module} does not exist"
    assert importlib.util.find_spec(f"{module}.__main__") is not None, f"{module} not runnable"
    return match.group(1)


# -- Dockerfile ----------------------------------------------------------------------------


def test_dockerfile_is_one_non_root_image_with_python_m_entrypoint() -> None:
    text = (DEPLOY / "Dockerfile").read_text()
    assert re.search(r"^FROM python:3\.11-slim\b", text, re.M)
    users = re.findall(r"^USER (\S+)", text, re.M)
    assert users and users[-1] not in {"root", "0"}
    assert '\nENTRYPOINT ["python", "-m"]\n' in text
    repo = DEPLOY.parent
    for line in re.findall(r"^COPY (?!--from)(.+)$", text, re.M):
        for source in line.split()[:-1]:
            assert (repo / source).exists(), f"COPY source {source} missing"


def test_healthcheck_script_usage() -> None:
    spec = importlib.util.spec_from_file_location("rl_healthcheck", DEPLOY / "healthcheck.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main([]) == 2
    assert module.main(["not-a-port"]) == 2


# -- compose -------------------------------------------------------------------------------


def _compose_roles() -> dict[str, str]:
    roles = {}
    for name, service in _compose()["services"].items():
        command = service.get("command") or []
        if str(service.get("image", "")).find("etcd") >= 0 and command[:1] == ["etcd"]:
            roles[name] = "etcd"
        elif command[:2] == CONSOLE_COMMAND:
            roles[name] = "console"
        else:
            roles[name] = _role(command[0])
    return roles


def test_compose_has_the_expected_processes() -> None:
    counts: dict[str, int] = {}
    for role in _compose_roles().values():
        counts[role] = counts.get(role, 0) + 1
    expected = {"etcd": 1, "metadata": 3, "storage": 3, "coordinator": 2, "quota": 1}
    assert counts == {**expected, "gateway": 1, "console": 1}


def test_compose_commands_pass_the_service_parsers() -> None:
    services = _compose()["services"]
    roles = _compose_roles()
    for name, role in roles.items():
        if role in ("etcd", "console"):  # the console: test_compose_console_*
            continue
        args = [_compose_env(str(a)) for a in services[name]["command"][1:]]
        _parse(role, args)
        assert _flag(args, "--host") == "0.0.0.0"
        assert _flag(args, "--advertised-host") == name  # reachable by its service name
        if role == "metadata":
            etcd_host = _flag(args, "--etcd").split("//", 1)[1].split(":")[0]
            assert roles.get(etcd_host) == "etcd"
        else:
            for address in _flag(args, "--metadata").split(","):
                assert roles.get(address.split(":")[0]) == "metadata", address
        if role == "storage":
            mounts = [v.split(":")[1] for v in services[name]["volumes"]]
            assert _flag(args, "--log-dirs") in mounts


def test_compose_node_ids_are_unique_per_kind() -> None:
    services = _compose()["services"]
    seen: set[tuple[str, str]] = set()
    for name, role in _compose_roles().items():
        if role in ("etcd", "console"):
            continue
        args = services[name]["command"][1:]
        key = (role, _flag(args, "--instance-id" if role == "metadata" else "--node-id"))
        assert key not in seen, key
        seen.add(key)


def test_compose_starts_etcd_first_then_the_launcher_order() -> None:
    services = _compose()["services"]
    roles = _compose_roles()
    assert "depends_on" not in services["etcd"]

    def ancestors(name: str, path: tuple[str, ...] = ()) -> set[str]:
        assert name not in path, f"dependency cycle through {name}"
        deps = services[name].get("depends_on") or {}
        found = set(deps)
        for dep in deps:
            found |= ancestors(dep, (*path, name))
        return found

    for name, service in services.items():
        deps = service.get("depends_on") or {}
        for dep, condition in deps.items():
            assert dep in services, f"{name} depends on unknown {dep}"
            assert RANK[roles[dep]] < RANK[roles[name]], f"{name} waits for {dep}"
            assert condition == {"condition": "service_healthy"}
            assert "healthcheck" in services[dep], f"{dep} has no healthcheck"
        if roles[name] != "etcd":
            assert "etcd" in ancestors(name), f"{name} may start before etcd"


def test_compose_gateway_is_published() -> None:
    services = _compose()["services"]
    gateways = [n for n, r in _compose_roles().items() if r == "gateway"]
    for name in gateways:
        ports = [_compose_env(str(p)) for p in services[name].get("ports", [])]
        assert any(p.endswith(":9090") for p in ports)


def _console_args(argv: list[str]) -> Any:
    """The `riverlog console` arguments, parsed by the CLI's own parser."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:
        pytest.fail(f"riverlog rejects {argv}: exit {exc.code}")
    assert args.command == "console"
    return args


def test_compose_console_parses_reaches_the_gateway_and_holds_no_credentials() -> None:
    services = _compose()["services"]
    roles = _compose_roles()
    [name] = [n for n, r in roles.items() if r == "console"]
    command = [_compose_env(str(a)) for a in services[name]["command"]]
    args = _console_args(command[1:])
    assert args.host == "0.0.0.0"
    gateway_host = args.bootstrap.split(":")[0]
    assert roles.get(gateway_host) == "gateway"
    assert not args.client_config  # no -X sasl.*: people sign in as themselves
    assert set(services[name]["depends_on"]) == {gateway_host}
    ports = [_compose_env(str(p)) for p in services[name]["ports"]]
    assert ports == [f"127.0.0.1:8080:{args.port}"]  # the host's loopback only
    assert f":{args.port}/healthz" in " ".join(services[name]["healthcheck"]["test"])


# -- Kubernetes ----------------------------------------------------------------------------


def test_k8s_kinds_and_api_versions() -> None:
    docs = _k8s_docs()
    assert docs
    for filename, doc in docs:
        assert (doc.get("apiVersion"), doc.get("kind")) in K8S_KINDS, filename
    kustomizations = [doc for _, doc in docs if doc["kind"] == "Kustomization"]
    assert len(kustomizations) == 1
    listed = set(kustomizations[0]["resources"])
    on_disk = {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml"}
    assert listed == on_disk


def _workloads() -> list[dict[str, Any]]:
    return [doc for _, doc in _k8s_docs() if doc["kind"] in {"StatefulSet", "Deployment"}]


def _services() -> dict[str, dict[str, Any]]:
    return {doc["metadata"]["name"]: doc for _, doc in _k8s_docs() if doc["kind"] == "Service"}


def _riverlog_containers() -> list[tuple[dict[str, Any], dict[str, Any], str]]:
    out = []
    for workload in _workloads():
        for container in workload["spec"]["template"]["spec"]["containers"]:
            command = container.get("command") or []
            if command[:2] == ["python", "-m"]:
                out.append((workload, container, _role(command[2])))
    return out


def _metadata_hosts() -> set[str]:
    """The stable DNS names of the metadata StatefulSet's pods (`pod.service`)."""
    hosts = set()
    for workload, _, role in _riverlog_containers():
        if role == "metadata":
            name, spec = workload["metadata"]["name"], workload["spec"]
            hosts |= {f"{name}-{i}.{spec['serviceName']}" for i in range(spec["replicas"])}
    return hosts


def test_k8s_commands_pass_the_service_parsers() -> None:
    roles = set()
    services = _services()
    metadata_hosts = _metadata_hosts()
    for workload, container, role in _riverlog_containers():
        roles.add(role)
        assert workload["kind"] == "StatefulSet", "node ids come from StatefulSet ordinals"
        pod = f"{workload['metadata']['name']}-0"
        args = [_k8s_env(str(a), pod) for a in container["args"]]
        _parse(role, args)
        assert _flag(args, "--host") == "0.0.0.0"
        host, _, domain = _flag(args, "--advertised-host").partition(".")
        assert host == pod
        assert domain == workload["spec"]["serviceName"]
        assert services[domain]["spec"].get("clusterIP") == "None"
        if role != "metadata":
            assert set(_flag(args, "--metadata").split(",")) <= {
                f"{h}:9093" for h in metadata_hosts
            }
        id_flag = "--instance-id" if role == "metadata" else "--node-id"
        assert _flag(container["args"], id_flag) == "$(POD_INDEX)"
        env = {e["name"]: e for e in container["env"]}
        assert "pod-index" in env["POD_INDEX"]["valueFrom"]["fieldRef"]["fieldPath"]
    assert roles == {"metadata", "storage", "coordinator", "quota", "gateway"}


def test_k8s_probes_use_grpc_health_on_the_serving_port() -> None:
    for _, container, role in _riverlog_containers():
        port = int(_flag(container["args"], "--port"))
        assert port in {p["containerPort"] for p in container["ports"]}
        for probe in ("readinessProbe", "livenessProbe"):
            assert container[probe]["grpc"]["port"] == port, (role, probe)
        if "startupProbe" in container:
            assert container["startupProbe"]["grpc"]["port"] == port


def test_k8s_storage_keeps_its_log_dirs_on_a_claim() -> None:
    for workload, container, role in _riverlog_containers():
        if role != "storage":
            continue
        claims = {c["metadata"]["name"] for c in workload["spec"]["volumeClaimTemplates"]}
        mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
        log_dir = _flag(container["args"], "--log-dirs")
        assert mounts.get(log_dir) in claims


def test_k8s_services_select_existing_pods() -> None:
    pod_labels = [w["spec"]["template"]["metadata"]["labels"] for w in _workloads()]
    for name, service in _services().items():
        selector = service["spec"]["selector"]
        assert any(selector.items() <= labels.items() for labels in pod_labels), name
    for workload in _workloads():
        if workload["kind"] == "StatefulSet":
            assert workload["spec"]["serviceName"] in _services()
    gateway = _services()["riverlog-gateway"]
    assert gateway["spec"].get("clusterIP") != "None"


def test_k8s_console_parses_reaches_the_gateway_service_and_probes_http() -> None:
    [workload] = [w for w in _workloads() if w["metadata"]["name"] == "riverlog-console"]
    assert workload["kind"] == "Deployment" and workload["spec"]["replicas"] == 1
    [container] = workload["spec"]["template"]["spec"]["containers"]
    assert container["command"] == ["riverlog", "console"]
    args = _console_args(["console", *container["args"]])
    assert args.host == "0.0.0.0" and not args.client_config
    gateway, _, port = args.bootstrap.partition(":")
    service = _services()[gateway]
    assert service["spec"].get("clusterIP") != "None"
    assert int(port) in {p["port"] for p in service["spec"]["ports"]}
    assert args.port in {p["containerPort"] for p in container["ports"]}
    for probe in ("readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"] == {"path": "/healthz", "port": args.port}
    console = _services()["riverlog-console"]
    assert console["spec"]["ports"][0]["port"] == args.port


# -- direct data access (decision 0047) ------------------------------------------------------

KEY_SETTING = "direct.access.secret.key.file"


def _key_file(args: list[str]) -> str:
    for arg in args:
        if arg.startswith(f"--config={KEY_SETTING}="):
            return arg.split("=", 2)[2]
    raise AssertionError(f"no {KEY_SETTING} in {args}")


def test_compose_gives_gateways_and_storage_the_direct_access_secret() -> None:
    data = _compose()
    [(name, secret)] = data["secrets"].items()
    assert secret["file"] == "./direct-access.key"
    assert "deploy/direct-access.key" in (DEPLOY.parent / ".gitignore").read_text()
    for service, role in _compose_roles().items():
        if role not in ("storage", "gateway"):
            continue
        spec = data["services"][service]
        assert name in spec["secrets"], service
        args = [str(a) for a in spec["command"]]
        assert _key_file(args) == f"/run/secrets/{name}"
        if role == "storage":
            assert int(_flag(args, "--direct-port")) > 0


def test_k8s_mounts_the_generated_direct_access_secret() -> None:
    [kustomization] = [d for _, d in _k8s_docs() if d["kind"] == "Kustomization"]
    [generator] = kustomization["secretGenerator"]
    assert "deploy/k8s/direct-access.key" in (DEPLOY.parent / ".gitignore").read_text()
    [key_name] = generator["files"]
    for workload, container, role in _riverlog_containers():
        if role not in ("storage", "gateway"):
            continue
        volumes = {v["name"]: v for v in workload["spec"]["template"]["spec"].get("volumes", [])}
        mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
        path = Path(_key_file(container["args"]))
        assert path.name == key_name
        volume = volumes[mounts[str(path.parent)]]
        assert volume["secret"]["secretName"] == generator["name"], role
        if role == "storage":
            port = int(_flag(container["args"], "--direct-port"))
            assert port in {p["containerPort"] for p in container["ports"]}
            assert port in {p["port"] for p in _services()["riverlog-storage"]["spec"]["ports"]}


def test_k8s_storage_internal_ports_admit_only_riverlog_pods() -> None:
    """Decision 0047: a storage node's gRPC and zero-copy ports trust their callers, so only
    the Riverlog processes (not the console, a client) reach them; its direct port and
    /metrics are open. The policy selects the storage pods and covers every port they serve."""
    [policy] = [d for _, d in _k8s_docs() if d["kind"] == "NetworkPolicy"]
    [storage] = [w for w, _, role in _riverlog_containers() if role == "storage"]
    pod_labels = storage["spec"]["template"]["metadata"]["labels"]
    selector = policy["spec"]["podSelector"]["matchLabels"]
    assert selector.items() <= pod_labels.items()
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    rules: dict[int, list[dict[str, Any]] | None] = {}
    for rule in policy["spec"]["ingress"]:
        for port in rule["ports"]:
            rules[port["port"]] = rule.get("from")
    [container] = storage["spec"]["template"]["spec"]["containers"]
    served = {p["containerPort"] for p in container["ports"]}
    assert set(rules) == served == {9092, 9094, 9097, 9404}
    assert rules[9097] is None and rules[9404] is None  # from anywhere
    labels_of = {
        w["metadata"]["name"]: w["spec"]["template"]["metadata"]["labels"] for w in _workloads()
    }
    for port in (9092, 9094):
        [peer] = rules[port] or []
        match = peer["podSelector"]["matchLabels"]
        excluded = {
            v
            for e in peer["podSelector"].get("matchExpressions", [])
            if e["operator"] == "NotIn"
            for v in e["values"]
        }
        admitted = {
            name
            for name, labels in labels_of.items()
            if match.items() <= labels.items()
            and labels.get("app.kubernetes.io/name") not in excluded
        }
        assert {"riverlog-storage", "riverlog-gateway", "riverlog-metadata"} <= admitted
        assert "riverlog-console" not in admitted


# -- scaling (deploy/README.md, "Scaling") -------------------------------------------------


def _scaling_commands() -> list[list[str]]:
    """The `riverlog ...` commands of the README's Scaling section, up to a pipe or redirect."""
    text = (DEPLOY / "README.md").read_text()
    section = text.split("## Scaling", 1)[1].split("\n## ", 1)[0]
    commands = []
    for line in section.splitlines():
        line = line.strip()
        if line.startswith("riverlog "):
            commands.append(shlex.split(re.split(r"\s[|>]\s", line)[0])[1:])
    return commands


def test_scaling_commands_parse_with_the_cli() -> None:
    commands = _scaling_commands()
    assert {tuple(c[:2]) for c in commands} >= {
        ("partitions", "drain"),
        ("partitions", "reassign"),
    }
    parser = build_parser()
    for argv in commands:
        try:
            args = parser.parse_args(argv)
        except SystemExit as exc:
            pytest.fail(f"riverlog rejects {argv}: exit {exc.code}")
        assert callable(args.func)


def test_scaling_storage_down_drops_the_claims_of_pods_scaled_away() -> None:
    [storage] = [w for w, _, role in _riverlog_containers() if role == "storage"]
    policy = storage["spec"]["persistentVolumeClaimRetentionPolicy"]
    # a scaled-away ordinal that comes back joins empty, never with stale partitions
    assert policy == {"whenScaled": "Delete", "whenDeleted": "Retain"}
    for workload, _, role in _riverlog_containers():
        if role != "storage":
            assert "persistentVolumeClaimRetentionPolicy" not in workload["spec"], role


def test_scaling_metadata_down_keeps_every_process_able_to_start() -> None:
    metadata = [w for w, _, role in _riverlog_containers() if role == "metadata"]
    [name] = [w["metadata"]["name"] for w in metadata]
    first = f"{name}-0.{metadata[0]['spec']['serviceName']}:9093"
    for _, container, role in _riverlog_containers():
        if role != "metadata":  # ordinal 0 is never scaled away; the rest come from Watch
            assert first in _flag(container["args"], "--metadata").split(","), role


def test_scaling_stateless_tiers_get_time_for_a_clean_stop() -> None:
    for workload, _, role in _riverlog_containers():
        grace = workload["spec"]["template"]["spec"].get("terminationGracePeriodSeconds", 30)
        # a quota instance hands its windows over, a coordinator unregisters, a storage node
        # closes its logs: each needs more than the gRPC grace plus one handover call
        assert grace >= 15, role


# -- monitoring (deploy/prometheus, deploy/grafana; decision 0033) ----------------------------

METRICS_PORT = 9404
METRIC_NAME = re.compile(r"\briverlog_[a-z0-9_]+")


def _metrics_port(args: list[str]) -> int:
    overrides = parse_overrides([a.split("=", 1)[1] for a in args if a.startswith("--config=")])
    settings = take_prometheus_settings(overrides)
    assert settings is not None, f"no metrics.prometheus.port in {args}"
    return settings.port


def _yaml(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text())
    assert isinstance(data, dict)
    return data


def test_compose_processes_are_the_prometheus_targets() -> None:
    services = _compose()["services"]
    expected = set()
    for name, role in _compose_roles().items():
        if role not in ("etcd", "console"):  # the console is a client: no /metrics
            assert _metrics_port([str(a) for a in services[name]["command"][1:]]) == METRICS_PORT
            expected.add((f"riverlog-{role}", f"{name}:{METRICS_PORT}"))
    config = _yaml(DEPLOY / "prometheus" / "prometheus.yml")
    targets = {
        (job["job_name"], target)
        for job in config["scrape_configs"]
        for static in job["static_configs"]
        for target in static["targets"]
    }
    assert targets == expected


def test_k8s_pods_are_annotated_for_the_prometheus_config() -> None:
    for workload, container, role in _riverlog_containers():
        port = _metrics_port([str(a) for a in container["args"]])
        assert port == METRICS_PORT
        assert port in {p["containerPort"] for p in container["ports"]}
        template = workload["spec"]["template"]["metadata"]
        annotations = template["annotations"]
        assert annotations["prometheus.io/scrape"] == "true"
        assert annotations["prometheus.io/port"] == str(port)
        assert annotations["prometheus.io/path"] == "/metrics"
        assert template["labels"]["app.kubernetes.io/name"] == f"riverlog-{role}"
        assert template["labels"]["app.kubernetes.io/part-of"] == "riverlog"
    config = _yaml(DEPLOY / "prometheus" / "prometheus-k8s.yml")
    (job,) = config["scrape_configs"]
    sources = {tuple(r["source_labels"]) for r in job["relabel_configs"]}
    assert ("__meta_kubernetes_pod_annotation_prometheus_io_scrape",) in sources
    assert ("__meta_kubernetes_pod_label_app_kubernetes_io_name",) in sources


def test_monitoring_overlay_mounts_files_that_exist() -> None:
    overlay = _yaml(DEPLOY / "compose.monitoring.yaml")
    assert set(overlay["services"]) == {"prometheus", "grafana"}
    for service in overlay["services"].values():
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("./"):
                assert (DEPLOY / source).exists(), source
    datasource = _yaml(DEPLOY / "grafana" / "provisioning" / "datasources" / "prometheus.yaml")
    assert datasource["datasources"][0]["url"] == "http://prometheus:9090"


def _dashboard_queries(dashboard: dict[str, Any]) -> list[str]:
    queries = [
        target["expr"] for panel in dashboard["panels"] for target in panel.get("targets", [])
    ]
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            queries.append(variable["definition"])
    return queries


def test_grafana_dashboard_uses_only_served_metric_names() -> None:
    dashboard = json.loads((DEPLOY / "grafana" / "riverlog-dashboard.json").read_text())
    datasource = _yaml(DEPLOY / "grafana" / "provisioning" / "datasources" / "prometheus.yaml")
    uid = datasource["datasources"][0]["uid"]
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["current"]["value"] == uid
    used = set()
    for query in _dashboard_queries(dashboard):
        for name in METRIC_NAME.findall(query):
            family = family_of(name)
            assert family is not None, f"{name} (in {query!r}) is not a served metric"
            used.add(family)
    assert used == set(CATALOG), f"not on the dashboard: {set(CATALOG) - used}"
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dashboard["panels"]:
        if panel["type"] != "row":
            assert panel["targets"] and panel["datasource"]["uid"] == "${datasource}"
