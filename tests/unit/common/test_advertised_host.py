"""`--advertised-host`: a process in a container binds 0.0.0.0 but registers the hostname its
peers and clients reach it at; without the flag the bind host is registered, as before."""

from __future__ import annotations

from riverlog.common.node import parse_node_args
from riverlog.common.service import base_arg_parser
from riverlog.services.coordinator.config import CoordinatorConfig
from riverlog.services.metadata.app import arg_parser as metadata_arg_parser
from riverlog.services.storage.app import config_from_args as storage_config


def test_base_parser_defaults_to_no_advertised_host() -> None:
    args = base_arg_parser("gateway").parse_args([])
    assert args.advertised_host is None
    args = base_arg_parser("gateway").parse_args(["--advertised-host", "gw-0.riverlog"])
    assert args.advertised_host == "gw-0.riverlog"


def test_node_options_advertise_the_bind_host_by_default() -> None:
    options, _ = parse_node_args(
        "coordinator",
        CoordinatorConfig.from_overrides,
        ["--node-id", "1", "--host", "10.0.0.5"],
        node_id_help="id",
    )
    assert options.host == "10.0.0.5"
    assert options.advertised_host == "10.0.0.5"


def test_node_options_advertise_the_given_host() -> None:
    argv = ["--node-id", "2", "--host", "0.0.0.0", "--advertised-host", "coordinator-2"]
    options, _ = parse_node_args(
        "coordinator", CoordinatorConfig.from_overrides, argv, node_id_help="id"
    )
    assert options.host == "0.0.0.0"
    assert options.advertised_host == "coordinator-2"


def test_storage_config_carries_the_advertised_host() -> None:
    base = ["--node-id", "1", "--log-dirs", "/tmp/rl-adv", "--metadata", "m:9093"]
    config, _ = storage_config([*base, "--host", "0.0.0.0", "--advertised-host", "storage-1"])
    assert (config.host, config.advertised_host) == ("0.0.0.0", "storage-1")
    config, _ = storage_config([*base, "--host", "127.0.0.1"])
    assert config.advertised_host == "127.0.0.1"


def test_metadata_parser_accepts_the_advertised_host() -> None:
    args = metadata_arg_parser().parse_args(
        ["--instance-id", "1", "--host", "0.0.0.0", "--advertised-host", "metadata-1"]
    )
    assert (args.host, args.advertised_host) == ("0.0.0.0", "metadata-1")
