"""The means family: per-cell counts, sums and means of a clipped value (family.py: the run;
params.py, choice.py: the parameters and their private choices; publish.py and on_executors.py:
the noise on the driver and on the executors; report.py: the report and the accuracy)."""
