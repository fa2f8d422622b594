"""The aggregate family: metrics per group of any key columns, over each user's bounded records
(quantiles.py: the quantiles per group, chosen privately from histograms over public candidates)."""
