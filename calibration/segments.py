"""Segments of a stratum: one form version x one extractor version, each on its own labels.

An approval automates a stratum above its threshold, but the evidence that
a model change or a new form is as good as what was certified can only come
from that segment's own labels. :func:`segment_checks` certifies every
segment above the threshold exactly as :func:`fieldtrust.calibration.stability.version_checks`
certifies a form version (the same bound, on the segment's share of each
audited week): a segment that certifies is *covered*, any other goes to a
human. A new extractor version is a new segment, so an approval made before
it existed never covers it.

A store that counts a lake source has no extractor version in its counts
(only its sampled rows come home): its segments are its form versions,
with the extractor version :data:`ANY_EXTRACTOR` ("every extractor"), and
the docs say so.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb
from fieldtrust.calibration.population import load_strata, segment_parts
from fieldtrust.calibration.stability import VersionCheck, version_checks
from fieldtrust.store.bar import Bar
from fieldtrust.store.rollup import counts_a_lake
from fieldtrust.store.scope import Scope

#: The extractor version of a segment that pools every extractor (a lake store's).
ANY_EXTRACTOR = "*"


@dataclass(frozen=True)
class SegmentCheck:
    """One segment's own evidence above the threshold (the fields of a VersionCheck)."""

    form_version: str
    extractor_version: str
    n_population_above: int
    share_above: float  # of the stratum's extractions above the threshold
    labels_above: int  # the segment's design-based labels above the threshold
    accuracy: float
    accuracy_low: float  # 1 - the upper (1 - delta) bound on its error rate there
    covered: bool  # certified on its own labels: may be automated

    @classmethod
    def of(cls, check: VersionCheck, extractor_version: str | None = None) -> SegmentCheck:
        """A form-version check of segment-keyed data (or of a form version, for ``*``)."""
        form_version, extractor = (
            segment_parts(check.form_version) if extractor_version is None
            else (check.form_version, extractor_version)
        )
        return cls(form_version, extractor, check.n_population_above, check.share_above,
                   check.labels_above, check.accuracy, check.accuracy_low, check.covered)

    @property
    def key(self) -> tuple[str, str]:
        return self.form_version, self.extractor_version


def segment_checks(
    con: duckdb.DuckDBPyConnection, scope: Scope, threshold: float, bar: Bar
) -> tuple[SegmentCheck, ...]:
    """Every segment of the one stratum ``scope`` names, certified on its own labels.

    ``scope`` is the certification's (its window, one doc_type and field).
    Sorted by form version, then extractor version.
    """
    if counts_a_lake(con):
        strata = load_strata(con, scope)
        return tuple(SegmentCheck.of(c, ANY_EXTRACTOR)
                     for s in strata for c in version_checks(s, threshold, bar))
    strata = load_strata(con, scope, segments=True)
    return tuple(SegmentCheck.of(c) for s in strata for c in version_checks(s, threshold, bar))
