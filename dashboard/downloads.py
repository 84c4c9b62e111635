"""Show a table with CSV and Parquet downloads beside it (every table the dashboard shows).

CSV files open in spreadsheets, which execute cells starting with ``=``,
``+``, ``-``, ``@``, tab or carriage return as formulas (CSV injection, OWASP).
Extracted values come from documents anyone can write, so text cells that look
like formulas (or start with a quote) get a leading single quote, the one
reversible escape of :mod:`fieldtrust.store.spreadsheet`. Parquet keeps the
exact values.
"""

from __future__ import annotations

import io
from typing import Any, Literal

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import streamlit as st
from fieldtrust.dashboard import state
from fieldtrust.store.spreadsheet import escape_cell


def as_frame(table: pa.Table | pd.DataFrame | list[dict[str, Any]]) -> pd.DataFrame:
    """A pandas frame of a small result (Arrow table, frame or list of rows)."""
    if isinstance(table, pd.DataFrame):
        return table
    if isinstance(table, pa.Table):
        return table.to_pandas()
    return pd.DataFrame(table)


def escape_formula(value: Any) -> Any:
    """Prefix a text cell that a spreadsheet would run as a formula with ``'``."""
    return escape_cell(value)


def csv_bytes(frame: pd.DataFrame) -> bytes:
    """The frame as UTF-8 CSV, formula-looking text cells escaped."""
    safe = frame.copy()
    for column in safe.columns:
        if safe[column].dtype == object or pd.api.types.is_string_dtype(safe[column]):
            safe[column] = safe[column].map(escape_formula)
    safe.columns = [escape_formula(str(c)) for c in safe.columns]
    return str(safe.to_csv(index=False)).encode("utf-8")


def parquet_bytes(frame: pd.DataFrame) -> bytes:
    """The frame as a Parquet file (values exactly as shown)."""
    buffer = io.BytesIO()
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), buffer)
    return buffer.getvalue()


def download_buttons(name: str, frame: pd.DataFrame) -> None:
    """CSV and Parquet download buttons for ``frame``, files named ``name``."""
    row = st.container(horizontal=True)
    row.download_button(
        "CSV", data=lambda: csv_bytes(frame), file_name=f"{name}.csv", mime="text/csv",
        key=state.download_key(name, "csv"), icon=":material/download:", on_click="ignore",
    )
    row.download_button(
        "Parquet", data=lambda: parquet_bytes(frame), file_name=f"{name}.parquet",
        mime="application/vnd.apache.parquet", key=state.download_key(name, "parquet"),
        icon=":material/download:", on_click="ignore",
    )


def show_table(
    name: str,
    table: pa.Table | pd.DataFrame | list[dict[str, Any]],
    *,
    column_config: dict[str, Any] | None = None,
    height: int | Literal["auto"] = "auto",
) -> pd.DataFrame:
    """``st.dataframe`` of a small result, with its downloads underneath; returns the frame."""
    frame = as_frame(table)
    config = {**_percent_columns(frame), **(column_config or {})}
    st.dataframe(
        frame, width="stretch", hide_index=True, column_config=config,
        height=height,
    )
    download_buttons(name, frame)
    return frame


#: Columns holding shares in [0, 1], shown as percentages (the files keep the numbers).
_PERCENT_WORDS = ("accuracy", "coverage", "share", "estimate", "lower", "upper", "unweighted",
                  "inclusion_prob", "percent_agreement", "stated confidence", "upper end")


def _percent_columns(frame: pd.DataFrame) -> dict[str, Any]:
    config: dict[str, Any] = {}
    for column in frame.columns:
        if not pd.api.types.is_float_dtype(frame[column]):
            continue
        name = str(column)
        if name.startswith("p_value"):  # tiny p-values need an exponent
            config[name] = st.column_config.NumberColumn(format="%.2e")
        elif any(word in name for word in _PERCENT_WORDS):
            config[name] = st.column_config.NumberColumn(format="percent")
    return config
