"""Labels: reviewers' verdicts, assignment, agreement, imports and exports.

Modules (every function takes the store connection first and, for anything
that writes, the acting user's name, whose role is checked in
:mod:`fieldtrust.store.access`):

* ``taxonomy``: the error types and corrected-value statuses;
* ``verdicts``: recording and superseding labels (append-only);
* ``corrections``: who may change a verdict and until when, and one's recent labels;
* ``label_import``: labels from a CSV or JSON Lines file, held to the verdict rules;
* ``assignment``: handing out sample items, skips, blind second review;
* ``agreement``: percent agreement, Cohen's kappa, adjudication;
* ``progress``: how far each audit sample is labelled;
* ``errors_report``: error types per (doc_type, field, form_version);
* ``export``: the labels export.

Decisions on automation are in :mod:`fieldtrust.governance`. See docs/review.md.
"""
