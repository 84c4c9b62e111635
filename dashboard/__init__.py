"""Streamlit dashboard (thin UI over the library)."""
