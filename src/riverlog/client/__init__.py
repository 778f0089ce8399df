"""The Python SDK: Producer, Consumer and AdminClient over the gateway API."""
