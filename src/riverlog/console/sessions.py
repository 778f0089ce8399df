"""Signed-in users: each session holds one user's SDK client, built from the credentials typed
into the login form (the SDK's sasl.username / sasl.password or sasl.oauthbearer.token), so
every call the console makes for that user is authenticated and authorized by the gateway as
that user. The console itself has no credentials: no shared superuser.

Sessions live in this process only, under a random id sent as an HttpOnly, SameSite=Strict
cookie; the password never leaves the server (a signed cookie would carry it to the browser).
A session unused for `idle_timeout_s` is closed with its client and sampler; at most
`max_sessions` are kept (the least recently used goes first).
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from riverlog.client import AdminClient, AdminConfig, ConsumerConfig
from riverlog.common.quota.entity import ANONYMOUS

from .sampler import Sampler

CLIENT_ID = "riverlog-console"
DEFAULT_API_TIMEOUT_MS = 15_000  # a page waits this long at most for a retried call (SDK: 60 s)
CREDENTIAL_KEYS = frozenset({"sasl.username", "sasl.password", "sasl.oauthbearer.token"})


@dataclass
class Session:
    sid: str
    principal: str
    conf: dict[str, object]  # SDK config with this user's credentials (for consumers too)
    admin: AdminClient
    sampler: Sampler
    last_seen: float = field(default_factory=time.monotonic)
    flashes: list[tuple[str, str]] = field(default_factory=list)  # (kind, message)

    def flash(self, kind: str, message: str) -> None:
        """A message for the next page this session renders (`ok` or `error`)."""
        self.flashes.append((kind, message))

    def take_flashes(self) -> list[tuple[str, str]]:
        out, self.flashes = self.flashes, []
        return out

    def close(self) -> None:
        self.sampler.stop()
        self.admin.close()


def credentials_conf(user: str, password: str, token: str) -> dict[str, object]:
    """The SDK's credential keys for what the login form was given (none: ANONYMOUS)."""
    if user:
        return {"sasl.username": user, "sasl.password": password}
    if token:
        return {"sasl.oauthbearer.token": token}
    return {}


class SessionStore:
    def __init__(
        self,
        bootstrap: str,
        client_conf: Mapping[str, object] | None = None,
        *,
        sample_interval_s: float = 10.0,
        history: int = 360,
        idle_timeout_s: float = 3600.0,
        max_sessions: int = 64,
    ) -> None:
        extra = dict(client_conf or {})
        shared = CREDENTIAL_KEYS & set(extra)
        if shared:
            raise ValueError(
                f"{', '.join(sorted(shared))}: the console takes credentials only from the "
                "login form, so that each user acts as themselves"
            )
        self.base_conf: dict[str, object] = {
            "bootstrap.servers": bootstrap,
            "client.id": CLIENT_ID,
            "default.api.timeout.ms": DEFAULT_API_TIMEOUT_MS,
            **extra,
        }
        # the admin client and the message browser's consumer share these settings: a key
        # either one does not know, or a bad value, fails at start (ConfigError)
        AdminConfig.from_kafka(self.base_conf)
        ConsumerConfig.from_kafka(self.base_conf)
        self.sample_interval_s = sample_interval_s
        self.history = history
        self.idle_timeout_s = idle_timeout_s
        self.max_sessions = max_sessions
        self._lock = threading.Lock()
        self._sessions: dict[str, Session] = {}

    def login(self, user: str, password: str, token: str) -> Session:
        """A session for these credentials once the gateway accepted them (a RiverlogError,
        e.g. SASL_AUTHENTICATION_FAILED, otherwise). Listing topics is the probe: every
        principal may call it (the gateway shows only what it may describe)."""
        conf = {**self.base_conf, **credentials_conf(user, password, token)}
        admin = AdminClient(conf)
        try:
            admin.list_topics()
        except BaseException:
            admin.close()
            raise
        principal = user or ("(token)" if token else ANONYMOUS)
        sampler = Sampler(admin, self.sample_interval_s, self.history)
        session = Session(secrets.token_urlsafe(32), principal, conf, admin, sampler)
        sampler.start()
        evicted: list[Session] = []
        with self._lock:
            self._sessions[session.sid] = session
            while len(self._sessions) > self.max_sessions:
                oldest = min(self._sessions.values(), key=lambda s: s.last_seen)
                evicted.append(self._sessions.pop(oldest.sid))
        for old in evicted:
            old.close()
        return session

    def get(self, sid: str | None) -> Session | None:
        """The live session of this id (its idle clock restarts), None if unknown or idle."""
        now = time.monotonic()
        expired: list[Session] = []
        with self._lock:
            for key, s in list(self._sessions.items()):
                if now - s.last_seen > self.idle_timeout_s:
                    expired.append(self._sessions.pop(key))
            session = self._sessions.get(sid) if sid else None
            if session is not None:
                session.last_seen = now
        for old in expired:
            old.close()
        return session

    def logout(self, sid: str | None) -> None:
        with self._lock:
            session = self._sessions.pop(sid, None) if sid else None
        if session is not None:
            session.close()

    def close(self) -> None:
        with self._lock:
            sessions, self._sessions = list(self._sessions.values()), {}
        for session in sessions:
            session.close()
