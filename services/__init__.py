"""Riverlog services: one package per concern. Services never import each other."""
