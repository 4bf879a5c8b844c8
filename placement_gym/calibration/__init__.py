"""The cost model against published measurements: the rows (`published`), the comparison and its
page (`compare`). ``placement-gym fidelity --published`` regenerates docs/calibration.md."""

from placement_gym.calibration.compare import RowResult, compare_published
from placement_gym.calibration.published import PUBLISHED, PublishedRow

__all__ = ["PUBLISHED", "PublishedRow", "RowResult", "compare_published"]
