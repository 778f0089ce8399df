"""Kafka's ACL model (`model.py`), its matcher (`authorizer.py`) and their protos (`convert.py`)."""
