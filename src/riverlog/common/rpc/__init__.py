"""gRPC plumbing shared by every service: server bootstrap, error mapping, channels."""
