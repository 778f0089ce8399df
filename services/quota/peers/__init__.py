"""The quota service's clients of other processes: its peer quota instances (window handover)."""
