"""The dashboard's pages, each a script run by ``st.navigation`` (see ``dashboard/app.py``)."""
