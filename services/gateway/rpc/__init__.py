"""The gRPC edge of the gateway: the Gateway servicer and its proto converters."""
