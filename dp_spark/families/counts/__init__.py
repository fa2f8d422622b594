"""The counts family: SRA, HPA and the baselines LPA, DFT and GS over items and item x attribute
cells (family.py: parameters, run, report; sampling.py: the bounded counts and their noise)."""
