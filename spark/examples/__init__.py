"""Example Spark pipelines on Riverlog; `pageviews` is the one `make pipeline` runs."""
