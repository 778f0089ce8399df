"""gRPC adapters of the storage node: the StorageService servicer and its proto converters."""
