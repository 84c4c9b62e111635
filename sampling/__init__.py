"""Weekly stratified audit samples and what their labels say (STATS.md sections 2, 3, 8).

Modules: :mod:`~sampling.design` (the design file), :mod:`~sampling.cells`
and :mod:`~sampling.allocation` (cells and their sizes), :mod:`~sampling.prn`
(permanent random numbers), :mod:`~sampling.draw` (draw or find a week's
sample), :mod:`~sampling.stratified` (the estimator, on arrays),
:mod:`~sampling.estimates` (estimates from the store), :mod:`~sampling.alerts`,
:mod:`~sampling.report`, :mod:`~sampling.queue` (priority review queue),
:mod:`~sampling.planner` (sample sizes, design preview) and
:mod:`~sampling.export` (CSV for offline labelling). See docs/sampling.md.
"""
