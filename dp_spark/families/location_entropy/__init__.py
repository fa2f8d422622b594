"""The location entropy family: per-location entropy of visits under M locations and C visits per
user (family.py: the run; entropy.py: the release; sensitivity.py: the sensitivities;
bounds_choice.py: the private choice of M and C; sums.py: the Spark sums)."""
