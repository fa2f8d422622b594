"""The means family: per-cell counts, sums and means of a clipped value (family.py: the run;
params.py, choice.py: the parameters and their private choices; on_executors.py: the noise on the
executors (on the driver: release.sum_tables); report.py: the report and the accuracy)."""
