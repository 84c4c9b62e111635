"""Governance: automation decisions, their frozen evidence, revocation and the policy file.

See docs/governance.md.
"""
