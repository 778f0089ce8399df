"""Metrics for Prometheus (decision 0033): every service process can serve `/metrics` over
HTTP from a background thread (`endpoint`), with names from one catalog (`catalog`) that says
which Kafka JMX metric each one stands for. Counters on hot paths are plain integers read at
scrape time (`traffic`, `rpc`); state the event loop owns is read on the loop (`endpoint.
LoopCollector`). Nothing here runs unless `metrics.prometheus.port` is set."""
