"""dp-spark: differentially private statistics over user-contributed data.

The pipeline is bound -> aggregate -> publish (see DESIGN.md); every epsilon is
spent through :class:`dp_spark.core.privacy.Budget`.
"""

__version__ = "0.1.0"
