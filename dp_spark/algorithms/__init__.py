"""The papers' algorithms, composed from bounding, aggregates and publishers."""
