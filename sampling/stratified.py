"""Design-based estimates of accuracy from a stratified sample (STATS.md sections 2 and 3).

The arithmetic lives in :mod:`fieldtrust.calibration.survey`, the one
survey-statistics module every report uses; these names are kept for the
sampling package's callers. Within a cell the labelled PRN prefix (STATS.md
section 10) is a simple random sample of its ``N_h`` items, weight
``N_h / prefix_h``; a domain is estimated by the Hajek ratio with its
linearised stratified variance and a Korn-Graubard interval whose effective
size is capped at the label count.
"""

from __future__ import annotations

from fieldtrust.calibration.survey import (
    LONELY_VARIANCE,
    ProportionEstimate,
    clopper_pearson,
    domain_estimates,
    effective_size,
    stratified_proportion,
)

__all__ = [
    "LONELY_VARIANCE",
    "ProportionEstimate",
    "clopper_pearson",
    "domain_estimates",
    "effective_size",
    "stratified_proportion",
]
