"""gRPC adapters of the metadata service: the servicer and its proto converters."""
