"""The Trainium hardware the emulator models: one record per generation (targets.py) and the
formulas that project device work onto it (projection.py). Standard library only: every layer,
the NKI simulator's numpy core included, may import it."""
from .targets import TARGETS, Target, by_name, from_spec, target_from_environment

__all__ = ["TARGETS", "Target", "by_name", "from_spec", "target_from_environment"]
