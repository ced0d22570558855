"""attnphase: positional vs semantic learning in a solvable model of dot-product attention."""

from attnphase.problem import Problem
from attnphase.setting import APPENDIX_A, STUDY, STUDY_A, Setting, check_alpha

__version__ = "0.1.0"
__all__ = ["Setting", "Problem", "STUDY", "STUDY_A", "APPENDIX_A", "check_alpha", "__version__"]
