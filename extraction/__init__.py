"""extraction package."""
