"""The metadata service: cluster membership, topics and their configs, partition assignment
and leadership, and the controller elected in etcd. Start it with
`python -m riverlog.services.metadata` (see `app.py`)."""
