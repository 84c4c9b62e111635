"""Reviewers and governance: labels, assignment, agreement, decisions, policy.

Modules (every function takes the store connection first and, for anything
that writes, the acting user's name, whose role is checked here):

* ``roles``: roles, the permission table, grants (``users`` in the CLI);
* ``taxonomy``: the error types and corrected-value statuses;
* ``verdicts``: recording and superseding labels (append-only);
* ``assignment``: handing out sample items, skips, blind second review;
* ``agreement``: percent agreement, Cohen's kappa, adjudication;
* ``errors_report``: error types per (doc_type, field, form_version);
* ``decisions``, ``evidence``, ``approval``: automation decisions on frozen evidence;
* ``revocation``: approved strata that later audits show failing;
* ``policy``, ``export``: the policy file and the labels export.

See docs/review.md and docs/governance.md.
"""
