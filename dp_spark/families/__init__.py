"""The algorithm families, one package each, and their registry (registry.py). A family package
holds what is its alone: its parameters, private choices, math, tables, report and run; what
families share is in dp_spark.release. Families never import each other (docs/architecture.md).
"""
