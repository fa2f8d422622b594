"""The algorithm families: one module each, the registry and the engine (docs/architecture.md)."""
