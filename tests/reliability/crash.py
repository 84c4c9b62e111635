"""Helpers of the crash tests: a big Parquet file, and a child process killed mid-work.

The child prints a line after each step (and after each commit); the parent
waits for a marker line, sleeps, sends SIGKILL and returns what the child had
printed, so a test can check that everything reported as committed is in the
store and nothing half-written is.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[2]


def write_big_parquet(path: Path, rows: int, *, seed: int = 1, week_start: str = "2026-11-23",
                      prefix: str = "e") -> Path:
    """``rows`` valid extractions of the ISO week starting ``week_start``, written fast."""
    rng = np.random.default_rng(seed)
    index = np.arange(rows)
    doc = index // 5

    def text(prefix: str, values: np.ndarray) -> pa.Array:
        return pc.binary_join_element_wise(prefix, pc.cast(pa.array(values), pa.string()), "")

    table = pa.table({
        "extraction_id": text(prefix, index),
        "doc_id": text("d", doc),
        "doc_type": pc.take(pa.array(["invoice", "receipt", "purchase_order"]), pa.array(doc % 3)),
        "form_version": pc.take(pa.array(["v1", "v2"]), pa.array((doc // 7) % 2)),
        "field": pc.take(pa.array(["total", "tax", "date", "vendor", "currency"]),
                         pa.array(index % 5)),
        "value": text("v", index % 977),
        "confidence": rng.uniform(0.0, 1.0, rows),
        "extracted_at": pa.array(
            np.datetime64(f"{week_start}T00:00:00", "s")
            + rng.integers(0, 7 * 86400, rows).astype("timedelta64[s]")
        ),
    })
    pq.write_table(table, path, row_group_size=128_000)
    return path


@dataclass(frozen=True)
class Killed:
    """What a killed child printed, and whether the kill landed before it finished."""

    lines: list[str]
    killed: bool
    seconds: float  # from the marker to the end of the child


def run_and_kill(code: str, *args: str, marker: str, delay: float,
                 timeout: float = 180.0) -> Killed:
    """Run ``python -c code args``; ``delay`` s after it prints ``marker``, SIGKILL it."""
    process = subprocess.Popen(
        [sys.executable, "-c", code, *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    lines: list[str] = []
    seen = threading.Event()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.append(line.rstrip("\n"))
            if marker in line:
                seen.set()
        seen.set()  # the child ended: stop waiting

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    if not seen.wait(timeout):
        process.kill()
        raise AssertionError(f"the child never printed {marker!r}")
    started = time.monotonic()
    try:
        process.wait(timeout=delay)  # a child that ends sooner is not waited for
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=60)
    reader.join(timeout=10)
    killed = process.returncode == -signal.SIGKILL
    if not killed and process.returncode != 0:
        assert process.stderr is not None
        raise AssertionError(f"the child failed on its own:\n{process.stderr.read()}")
    if process.stderr is not None:
        process.stderr.close()
    return Killed(list(lines), killed, time.monotonic() - started)


INGEST_CHILD = """
import sys
from fieldtrust import store
from fieldtrust.ingest.extractions import ingest_files
con = store.connect(sys.argv[1])
def progress(stage, done, total):
    print(stage, flush=True)
result = ingest_files(con, [sys.argv[2]], progress=progress)
con.close()
print("committed", result[0].rows_added, flush=True)
"""

DRAW_CHILD = """
import sys
from fieldtrust import store
from fieldtrust.sampling.design import Design
from fieldtrust.sampling.draw import draw_sample
con = store.connect(sys.argv[1])
print("ready", flush=True)
for seed in range(1000):
    result = draw_sample(con, "2026-W48", Design(base_rate=0.002), seed=seed, actor="quinn",
                         redraw=True)
    print("drew", result.sample_id, result.n_sample, flush=True)
"""

DECIDE_CHILD = """
import sys
from fieldtrust import store
from fieldtrust.governance.acts import _record, revoke
from fieldtrust.governance.evidence import Certification
from fieldtrust.labels.assignment import next_items
from fieldtrust.labels.verdicts import record_verdict, supersede
from fieldtrust.store.signing import KEY_ENV, using
import os
# Decisions are signed: the library signs with the key the CLI would install.
signing = using(os.environ[KEY_ENV])  # kept: its exit would uninstall the key
signing.__enter__()
con = store.connect(sys.argv[1])
sample = sys.argv[2]
print("ready", flush=True)
item = next_items(con, "ben", sample, count=1)[0]
label = record_verdict(con, actor="ben", extraction_id=item.extraction_id, verdict="correct")
print("label", label.label_id, flush=True)


def stated(i):
    # The populated store is too small to certify: the writer gets a stated certification
    # (a new one each round, so each approval freezes new evidence).
    return Certification(
        candidate=True, reasons=(), threshold=0.9, target=0.95, confidence=0.95, n_min=100,
        stability_weeks=4, window=(), method=f"round {i}", coverage=0.5, labels_above=100,
        accuracy=0.99, accuracy_low=0.96, bound_exact_clopper_pearson=True, n_population=200,
        n_labeled=100, weeks=(), audit_weeks=(), weeks_checked=(), form_versions=())


for i in range(100000):
    approve = i % 2 == 0
    if approve:
        decision = _record(con, "maya", "approve", "receipt", "total", 0.9, f"round {i}",
                           certification=stated(i))
    else:
        decision = revoke(con, "maya", "receipt", "total", f"round {i}")
    print("decision", decision.decision_id, decision.evidence_id or "", flush=True)
    label = supersede(con, actor="ben", label_id=label.label_id,
                      verdict="incorrect" if approve else "correct",
                      corrected_value=f"{i}.00" if approve else None,
                      error_type="misread_characters" if approve else None)
    print("label", label.label_id, flush=True)
"""
