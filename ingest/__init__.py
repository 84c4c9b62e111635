"""Ingest: extraction files and rows into the store, and extraction logs read where they live.

* :mod:`~fieldtrust.ingest.extractions`: the columns of an extraction and the
  pipeline that checks a file (or rows) and stores it whole or not at all.
* :mod:`~fieldtrust.ingest.readers`: CSV, Parquet and JSON Lines read into a
  DuckDB temp table exactly as written.
* :mod:`~fieldtrust.ingest.rules`: the SQL rules staged rows are held to,
  reported row by row; :mod:`~fieldtrust.ingest.location_rules` those of a
  value's document location.
* :mod:`~fieldtrust.ingest.query_progress`: rows done of a long step.
* :mod:`~fieldtrust.ingest.sources`: a Parquet or Delta lake, or Spark, as the
  extraction source: only counts and sampled rows come home.
"""
