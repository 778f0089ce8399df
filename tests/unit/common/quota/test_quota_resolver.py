"""Kafka's order of precedence over the eight levels, who shares a quota (metric entities),
ANONYMOUS, per-kind look-ups, and Kafka's own precedence scenario replayed on a QuotaManager."""

from __future__ import annotations

from typing import NamedTuple

import pytest
from hypothesis import given
from hypothesis import strategies as st

from riverlog.common.clock import ManualClock
from riverlog.common.quota import (
    ANONYMOUS,
    DEFAULT,
    ConfigLevel,
    MetricEntity,
    QuotaEntity,
    QuotaManager,
    QuotaResolver,
    QuotaType,
)

PRODUCE = QuotaType.PRODUCE

# One entry per level for (alice, c1), bound = 1000 x level, plus noise that never applies.
ALL_LEVELS = {
    "/config/users/alice/clients/c1": 1000,
    "/config/users/alice/clients/<default>": 2000,
    "/config/users/alice": 3000,
    "/config/users/<default>/clients/c1": 4000,
    "/config/users/<default>/clients/<default>": 5000,
    "/config/users/<default>": 6000,
    "/config/clients/c1": 7000,
    "/config/clients/<default>": 8000,
}
NOISE = {
    "/config/users/bob/clients/c1": 1,
    "/config/users/bob": 2,
    "/config/users/alice/clients/c2": 3,
    "/config/clients/c2": 4,
}
EXPECTED_ENTITY = {
    1: MetricEntity("alice", "c1"),
    2: MetricEntity("alice", "c1"),
    3: MetricEntity("alice", None),
    4: MetricEntity("alice", "c1"),
    5: MetricEntity("alice", "c1"),
    6: MetricEntity("alice", None),
    7: MetricEntity(None, "c1"),
    8: MetricEntity(None, "c1"),
}


def resolver(paths: dict[str, float], key: str = "producer_byte_rate") -> QuotaResolver:
    return QuotaResolver.from_paths({path: {key: value} for path, value in paths.items()})


@pytest.mark.parametrize("level", range(1, 9))
def test_the_most_specific_configured_level_wins(level):
    """Levels above `level` removed: `level` applies, with Kafka's metric tags."""
    configured = {p: v for p, v in ALL_LEVELS.items() if v >= 1000 * level}
    r = resolver({**configured, **NOISE})
    resolved = r.resolve(PRODUCE, "alice", "c1")
    assert resolved is not None
    assert resolved.level == ConfigLevel(level)
    assert resolved.bound == 1000.0 * level
    assert resolved.config.path == next(p for p, v in ALL_LEVELS.items() if v == 1000 * level)
    assert resolved.entity == EXPECTED_ENTITY[level]
    assert r.bound_for(PRODUCE, resolved.entity) == resolved.bound


@pytest.mark.parametrize("level", range(1, 9))
def test_each_level_alone_applies(level):
    path = next(p for p, v in ALL_LEVELS.items() if v == 1000 * level)
    resolved = resolver({path: 42}).resolve(PRODUCE, "alice", "c1")
    assert resolved is not None
    assert (resolved.level, resolved.bound, resolved.entity) == (
        ConfigLevel(level),
        42.0,
        EXPECTED_ENTITY[level],
    )


@pytest.mark.parametrize(
    ("user", "client_id", "level", "entity"),
    [
        ("alice", "c1", 1, MetricEntity("alice", "c1")),
        ("alice", "c9", 2, MetricEntity("alice", "c9")),  # alice's per-client default
        ("carol", "c1", 4, MetricEntity("carol", "c1")),  # any user with client c1
        ("carol", "c9", 5, MetricEntity("carol", "c9")),  # the default (user, client) pair
        (None, "c9", 5, MetricEntity(ANONYMOUS, "c9")),
    ],
)
def test_defaults_apply_to_unnamed_users_and_clients(user, client_id, level, entity):
    resolved = resolver(ALL_LEVELS).resolve(PRODUCE, user, client_id)
    assert resolved is not None
    assert (resolved.level, resolved.entity) == (ConfigLevel(level), entity)


def test_nothing_configured_for_a_kind_means_unlimited():
    r = resolver({"/config/users/alice": 100}, key="consumer_byte_rate")
    assert r.enabled(QuotaType.FETCH)
    assert not r.enabled(PRODUCE)
    assert r.resolve(PRODUCE, "alice", "c1") is None
    assert r.resolve(QuotaType.FETCH, "bob", "c1") is None  # bob has no level at all
    assert r.bound_for(PRODUCE, MetricEntity("alice", None)) is None
    assert QuotaResolver().resolve(PRODUCE, "alice", "c1") is None


def test_levels_are_looked_up_per_kind():
    """An entry that sets only consumer_byte_rate does not hide a lower producer quota."""
    r = QuotaResolver.from_paths(
        {
            "/config/users/alice": {"consumer_byte_rate": 500},
            "/config/clients/c1": {"producer_byte_rate": 700, "request_percentage": 20},
        }
    )
    produce = r.resolve(PRODUCE, "alice", "c1")
    fetch = r.resolve(QuotaType.FETCH, "alice", "c1")
    request = r.resolve(QuotaType.REQUEST, "alice", "c1")
    assert produce is not None and fetch is not None and request is not None
    assert (produce.level, produce.bound) == (ConfigLevel.CLIENT, 700.0)
    assert (fetch.level, fetch.bound) == (ConfigLevel.USER, 500.0)
    assert (request.level, request.bound) == (ConfigLevel.CLIENT, 20.0)


def test_anonymous_gets_user_quotas_only_by_its_name_or_the_user_defaults():
    named = resolver({"/config/users/alice": 10, "/config/clients/<default>": 80})
    by_client = named.resolve(PRODUCE, None, "c1")
    assert by_client is not None
    assert (by_client.level, by_client.entity) == (
        ConfigLevel.DEFAULT_CLIENT,
        MetricEntity(None, "c1"),
    )

    own = resolver({"/config/users/ANONYMOUS": 30, "/config/users/alice": 10})
    anonymous = own.resolve(PRODUCE, None, "c1")
    assert anonymous is not None
    assert (anonymous.bound, anonymous.entity) == (30.0, MetricEntity(ANONYMOUS, None))
    assert own.resolve(PRODUCE, "", "c1") == anonymous  # no principal at all is ANONYMOUS too

    defaults = resolver({"/config/users/<default>": 60})
    anon = defaults.resolve(PRODUCE, None, "c1")
    alice = defaults.resolve(PRODUCE, "alice", "c1")
    assert anon is not None and alice is not None
    assert anon.entity == MetricEntity(ANONYMOUS, None)
    assert alice.entity == MetricEntity("alice", None)  # the default is per user, not shared


def test_a_missing_client_id_matches_only_default_client_levels():
    r = resolver(
        {
            "/config/users/alice/clients/c1": 1,
            "/config/clients/c1": 7,
            "/config/clients/<default>": 8,
        }
    )
    for client_id in (None, ""):
        resolved = r.resolve(PRODUCE, "alice", client_id)
        assert resolved is not None
        assert (resolved.level, resolved.entity) == (
            ConfigLevel.DEFAULT_CLIENT,
            MetricEntity(None, ""),
        )
        assert r.bound_for(PRODUCE, resolved.entity) == 8.0
    with_user_default = resolver(
        {"/config/users/alice/clients/<default>": 2, "/config/users/alice": 3}
    )
    resolved = with_user_default.resolve(PRODUCE, "alice", None)
    assert resolved is not None
    # kept apart from the user-level group (Kafka would collapse both onto "alice" + "")
    assert (resolved.level, resolved.entity) == (
        ConfigLevel.USER_DEFAULT_CLIENT,
        MetricEntity("alice", ""),
    )


NAMES = ["alice", "bob", DEFAULT]
CLIENTS = ["c1", "c2", DEFAULT]


@st.composite
def configs(draw: st.DrawFn) -> dict[QuotaEntity, dict[QuotaType, float]]:
    entities = [QuotaEntity(u, c) for u in [*NAMES, None] for c in [*CLIENTS, None] if u or c]
    chosen = draw(st.lists(st.sampled_from(entities), unique=True))
    return {e: {PRODUCE: float(draw(st.integers(1, 10_000)))} for e in chosen}


def matches(entry: QuotaEntity, user: str, client_id: str) -> bool:
    user_ok = entry.user is None or entry.user in (DEFAULT, user)
    client_ok = entry.client_id is None or entry.client_id in (DEFAULT, client_id)
    return user_ok and client_ok


@given(configs(), st.sampled_from(["alice", "bob", "zed"]), st.sampled_from(["c1", "c2", "c9"]))
def test_resolution_is_the_best_matching_entry_and_its_group_has_the_same_bound(
    quotas, user, client_id
):
    """Oracle: of all entries matching the connection, the one with the best level."""
    r = QuotaResolver(quotas)
    resolved = r.resolve(PRODUCE, user, client_id)
    matching = [e for e in quotas if matches(e, user, client_id)]
    if not matching:
        assert resolved is None
        return
    best = min(matching, key=lambda e: e.level)
    assert resolved is not None
    assert resolved.config == best
    assert resolved.bound == quotas[best][PRODUCE]
    assert r.bound_for(PRODUCE, resolved.entity) == resolved.bound


# Kafka's ClientQuotaManagerTest.testQuotaConfigPrecedence, replayed: time never moves, each
# check records value x 11 and asserts the bound, the fetch cap and whether it throttles.
class Check(NamedTuple):
    user: str
    client_id: str
    bound: int
    value: int
    throttled: bool


class Change(NamedTuple):
    path: str
    bound: int | None  # None: remove


PRECEDENCE_CONFIG = {
    "/config/users/<default>": 1000,
    "/config/clients/<default>": 2000,
    "/config/users/<default>/clients/<default>": 3000,
    "/config/users/userA": 4000,
    "/config/users/userA/clients/client1": 5000,
    "/config/users/userB": 6000,
    "/config/users/userB/clients/client1": 7000,
    "/config/users/userB/clients/<default>": 8000,
    "/config/users/userC": 10000,
    "/config/clients/client1": 9000,
}
PRECEDENCE_STEPS: list[Check | Change] = [
    Check("userA", "client1", 5000, 4500, False),  # <user, client> over <user>
    Check("userA", "client2", 4000, 4500, True),  # <user> over <client> and defaults
    Check("userA", "client3", 4000, 0, True),  # <user> shared across the user's clients
    Check("userA", "client1", 5000, 0, False),  # <user, client> is exclusive
    Check("userB", "client1", 7000, 8000, True),
    Check("userB", "client2", 8000, 7000, False),  # per-client default, exclusive per client
    Check("userB", "client3", 8000, 7000, False),
    Check("userD", "client1", 3000, 3500, True),  # default <user, client>
    Check("userD", "client2", 3000, 2500, False),
    Check("userE", "client1", 3000, 2500, False),
    Change("/config/users/<default>/clients/<default>", None),
    Check("userD", "client1", 1000, 0, False),  # new group, fresh window
    Check("userE", "client4", 1000, 1500, True),
    Check("userF", "client4", 1000, 800, False),  # default <user> shared across the user's clients
    Check("userF", "client5", 1000, 800, True),
    Change("/config/users/<default>", None),
    Check("userF", "client4", 2000, 0, False),
    Check("userF", "client5", 2000, 0, False),
    Check("userF", "client5", 2000, 2500, True),
    Check("userG", "client5", 2000, 0, True),  # default <client-id> shared across users
    Change("/config/users/userA", 8000),
    Change("/config/users/userA/clients/client1", 10000),
    Check("userA", "client2", 8000, 0, False),
    Check("userA", "client2", 8000, 4500, True),  # earlier usage counts under the new bound
    Check("userA", "client1", 10000, 0, False),
    Check("userA", "client1", 10000, 6000, True),
    Change("/config/users/userA/clients/client1", None),
    Check("userA", "client6", 8000, 0, True),  # shared user quota
    Change("/config/users/userA/clients/client6", 11000),
    Check("userA", "client6", 11000, 8500, False),
    Change("/config/users/userA/clients/<default>", 12000),
    Change("/config/users/userA/clients/client6", None),
    Check("userA", "client6", 12000, 4000, True),  # same tags, so the sum of old and new
]


def test_kafkas_precedence_scenario():
    config = dict(PRECEDENCE_CONFIG)
    manager = QuotaManager(PRODUCE, resolver(config), ManualClock())
    for step in PRECEDENCE_STEPS:
        if isinstance(step, Change):
            if step.bound is None:
                del config[step.path]
            else:
                config[step.path] = step.bound
            manager.update_resolver(resolver(config))
            continue
        resolved = manager.resolver.resolve(PRODUCE, step.user, step.client_id)
        assert resolved is not None, step
        assert resolved.bound == step.bound, step
        assert manager.max_value_in_quota_window(resolved.entity) == 10 * step.bound, step
        throttle = manager.record_and_get_throttle_time_ms(resolved.entity, step.value * 11)
        assert (throttle > 0) is step.throttled, (step, throttle)
