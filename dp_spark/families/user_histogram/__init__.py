"""The user histogram family: how many users have each quantity of records (family.py: the run;
histogram.py: the bins and the noise; quantities.py: the Spark aggregation)."""
