"""The FRAPP family: each record perturbed locally, then frequent itemsets mined with support
reconstruction (family.py: the run; perturbation.py: the schemes; mining.py: the Spark side)."""
