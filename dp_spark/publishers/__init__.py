"""Count-vector publishers: pure numpy, driver side, no Spark.

A publisher takes a count vector over a public domain, the L1 sensitivity one
user can cause after bounding, epsilon and a random source, and returns the
published vector with the ledger entries that pay for it.
"""
