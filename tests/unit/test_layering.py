"""The import-linter contracts in pyproject.toml cover every module of every service: each
top-level module or package of `services/<name>/` is an adapter (`rpc/`, `peers/`, `app.py`,
`__main__.py`) or is listed in the domain contract (no grpc, no riverlog.v1), and every one but
`__main__` has a place in its service's layers contract. A new domain module that is not
listed would escape the check, so this test fails until it is."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SERVICES = sorted(p.name for p in (ROOT / "services").iterdir() if (p / "__init__.py").exists())
ADAPTERS = {"rpc", "peers", "app", "__main__"}


def contracts() -> list[dict]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return config["tool"]["importlinter"]["contracts"]


def top_level(service: str) -> set[str]:
    folder = ROOT / "services" / service
    modules = {p.stem for p in folder.glob("*.py") if p.stem != "__init__"}
    packages = {p.name for p in folder.iterdir() if (p / "__init__.py").exists()}
    return modules | packages


@pytest.mark.parametrize("service", SERVICES)
def test_every_domain_module_is_in_the_domain_contract(service: str) -> None:
    (domain,) = [c for c in contracts() if c["name"].startswith("Domain code imports neither")]
    assert set(domain["forbidden_modules"]) == {"grpc", "riverlog.v1"}
    prefix = f"riverlog.services.{service}."
    listed = {m.removeprefix(prefix) for m in domain["source_modules"] if m.startswith(prefix)}
    assert listed == top_level(service) - ADAPTERS


@pytest.mark.parametrize("service", SERVICES)
def test_every_module_has_a_layer(service: str) -> None:
    (layers,) = [c for c in contracts() if c["name"] == f"{service} layers"]
    assert layers["containers"] == [f"riverlog.services.{service}"]
    placed = {name for layer in layers["layers"] for name in re.split(r"[|:]", layer)}
    assert {name.strip() for name in placed} == top_level(service) - {"__main__"}
