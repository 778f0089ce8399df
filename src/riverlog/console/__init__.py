"""The web console (`riverlog console`): cluster, topics, a message browser, consumer groups
with lag over time, throughput, quotas, users and ACLs in a browser, served over HTTP by
Starlette and uvicorn and talking to a gateway only through the SDK (decision 0034).

Every page is rendered with the signed-in user's own credentials (`sessions.py`), so the
gateway's authentication and authorization apply to what the console shows and changes; the
console holds no credentials of its own. Pure parts: `decode.py` (a record's bytes as text,
JSON or hex) and `series.py` (bounded lag and throughput series).
"""
