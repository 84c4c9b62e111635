"""automation page (being written)."""

from __future__ import annotations

import streamlit as st

st.title("automation")
