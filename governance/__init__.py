"""Governance: deciding which strata are automated, on which evidence.

Modules (every act takes the store connection first and the acting user's
name, whose role is checked in :mod:`fieldtrust.store.access`):

* ``acts``: the acts, ``approve``, ``reject`` and ``revoke``, and ``resume``
  of a suspended segment, used by the CLI and the dashboard alike;
* ``certification``: ``certify``, the one computation approving rests on,
  at the bar ``fieldtrust.store.bar.resolve_bar`` resolves;
* ``evidence``: the typed, frozen evidence and its canonical JSON;
* ``decisions``: the decision history and the current policy;
* ``revocation``: approved strata that later audits show failing;
* ``monitoring_plan``, ``monitoring``: each approved segment's chart, frozen at
  approval, run from the approval's week on; an alarm suspends the segment;
* ``policy``: the policy file production pipelines read;
* ``bar_admin``: the admin's one act on the bar, ``set_policy_settings``.

See docs/governance.md.
"""
