"""The release kernel every family runs on: the family interface and its registry's contract
(family.py), the engine that runs a release (engine.py), the guards, the private choices that
families share (of a per-user bound, of a clipping range, of the keys), HPA's popularity-first
bounding, the estimate of what bounding removed, the executors' release and the publishers'
accuracy. Nothing here belongs to one family; a family package imports from here, never from
another family (docs/architecture.md).
"""
