"""Extraction with Claude: documents in, one row per field with a stated confidence out.

Modules, in the order a document meets them: ``documents`` (files to content
blocks), ``schemas`` and ``prompts`` (what the model is asked), ``conversation``
(one document's attempts, judged by stop reason), ``validate`` (format rules
and conflicts, computed by code), ``loop`` (synchronous runs) and ``batch`` /
``manifest`` (Message Batches, resumable), ``results`` (structured outcomes),
``to_rows``, ``log`` and ``sink`` (into the store). See docs/extraction.md.
"""
