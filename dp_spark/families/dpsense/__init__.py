"""The DPSense family: item counts over rows limited to a privately chosen theta (family.py: the
run; theta.py: the qualities, the choice of theta and the noise; columns.py: the Spark sums)."""
