"""labels package."""
