"""Riverlog for PySpark: the `riverlog` Python data source."""
