"""Baselines: placement agents built on `placement_gym` (the dependency never goes the other way).

The expert, partitioning, scheduling, search and learned agents arrive with the baseline issues.
"""
