"""Calibration: how far stated confidence can be trusted, per stratum, and where to automate.

Every figure is computed from design-based labels (audit samples and
declared random samples) and held to one :class:`fieldtrust.store.bar.Bar`,
passed whole (STATS.md sections 1-7, 10, 11). Modules, from the arithmetic up:

* ``arrays``: the numpy array types the modules pass to each other;
* ``survey``: interval and bound arithmetic, the one place for it: exact
  (Clopper-Pearson) bounds, Wilson and Jeffreys intervals, Korn-Graubard,
  the label counts a bound implies, Hajek and stratified estimates;
* ``figures``: how an estimated share is written for people, with its n and
  interval, or a note when the interval says nothing;
* ``design``: the population of a stratum in blocks and audit cells
  (``Blocks``), its labels (``Labels``) and the upper bound on the error rate
  above a threshold that is valid under the audit design;
* ``population``: reads the store into per-stratum arrays (``StratumData``);
* ``table``, ``bins``, ``metrics``: the calibration table, reliability bins,
  ECE and Brier score (with bootstrap intervals);
* ``histogram``: how stated confidence is spread over all extractions;
* ``thresholds``: point and certified thresholds (Learn-then-Test);
* ``stability``: the weekly and per-form-version checks a certified
  threshold must pass;
* ``candidates``: which strata are automation candidates, and why not;
* ``segments``: each form version x extractor version certified on its own labels;
* ``report``: everything above for every stratum (``fieldtrust calibrate``);
* ``recalibrate``, ``maps``: confidence recalibration maps, fitted and stored;
* ``monitoring``, ``run_length``: after approval, a weekly CUSUM per approved
  segment and the alarm threshold for a stated false-alarm rate.

See docs/calibration.md.
"""
