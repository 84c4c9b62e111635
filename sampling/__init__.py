"""Weekly stratified audit samples and what their labels say (STATS.md sections 2, 3, 8).

Modules: :mod:`~fieldtrust.sampling.design` (the design file),
:mod:`~fieldtrust.sampling.cells` and :mod:`~fieldtrust.sampling.allocation` (cells and
their sizes), :mod:`~fieldtrust.sampling.prn` (permanent random numbers),
:mod:`~fieldtrust.sampling.draw` (draw or find a week's sample: the one door, on the
store's rows or, through :mod:`~fieldtrust.sampling.lake_draw`, a lake's),
:mod:`~fieldtrust.sampling.samples` (the samples a store holds),
:mod:`~fieldtrust.sampling.stratified` (the estimator, on arrays),
:mod:`~fieldtrust.sampling.estimates` (estimates from the store),
:mod:`~fieldtrust.sampling.alerts`, :mod:`~fieldtrust.sampling.audit_report`,
:mod:`~fieldtrust.sampling.queue` (priority review queue; a lake's through
:mod:`~fieldtrust.sampling.lake_queue`),
:mod:`~fieldtrust.sampling.planner` (sample sizes, design preview) and
:mod:`~fieldtrust.sampling.items_csv` (CSV for offline labelling). See docs/sampling.md.
"""
