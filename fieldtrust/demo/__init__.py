"""The demo store: a realistic extraction log with a hidden truth (docs/demo.md)."""

from fieldtrust.demo.build import build_demo, build_demo_store, ensure_demo_store
from fieldtrust.demo.generator import DemoData, generate_demo
from fieldtrust.demo.reviewers import DEMO_DESIGN
from fieldtrust.demo.truth_summary import DemoSummary, StratumTruth, VersionTruth, truth_summary

__all__ = [
    "DEMO_DESIGN",
    "DemoData",
    "DemoSummary",
    "StratumTruth",
    "VersionTruth",
    "build_demo",
    "build_demo_store",
    "ensure_demo_store",
    "generate_demo",
    "truth_summary",
]
