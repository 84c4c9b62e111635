"""sampling package."""
