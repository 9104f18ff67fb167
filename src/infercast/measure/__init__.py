"""Measurement: backends × sensors × protocol. Energy sensors live in ``measure.sensors``."""
