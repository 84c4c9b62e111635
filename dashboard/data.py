"""Store access for the dashboard: short-lived connections, bounded waits, cached reads.

DuckDB locks its file per process. A dashboard that held a connection open
would lock the CLI out (``fieldtrust ingest`` could not write while anyone
looked at a chart), so a page run opens a read-only connection on its first
read, gives each read its own cursor and closes it when the run ends
(:func:`run_reads`); writes open read-write just as briefly.

Inside the server process, DuckDB refuses to open the same file read-only and
read-write at once, so one process-wide lock serialises the (short) moments a
connection is open. When another process holds the file, :func:`fieldtrust.store.connect`
retries with a bounded backoff; if the file stays busy the page says so in a
friendly warning instead of a traceback.

Reads are cached with ``st.cache_data`` keyed on a *data version*: a cheap
query over row counts and the newest label / decision times. A new label
changes the version, so it shows at once; nothing else ever has to clear the
cache. Cached functions take no widgets and return small aggregated results,
never whole tables.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb
import streamlit as st
from fieldtrust.dashboard import state
from fieldtrust.store import signing
from fieldtrust.store.bar import Bar, resolve_bar
from fieldtrust.store.scope import Scope

from fieldtrust import store
from fieldtrust.errors import StoreError, StoreLockedError
from fieldtrust.settings import Settings, served_settings

if TYPE_CHECKING:
    from fieldtrust.ingest.sources import Source

#: Seconds a page waits for another process to release the store.
LOCK_WAIT = 4.0
#: How long cached results live even if the version never changes (seconds).
CACHE_TTL = 600
CACHE_ENTRIES = 128

# Re-entrant: opening the store asks the kept connection to go (store.before_open).
_CONNECTION_LOCK = threading.RLock()


def settings() -> Settings:
    """The dashboard's settings, the one way every page reads them.

    What ``fieldtrust serve`` resolved from its ``--config`` file, flags and
    environment and handed to this server (:func:`fieldtrust.settings.served_settings`);
    a server started otherwise resolves them as the CLI would.
    """
    return served_settings()


def bar() -> Bar:
    """The bar every page is held to: the store's policy, read now (an admin may just have
    changed it), with the settings' asks laid over it (:func:`fieldtrust.store.bar.resolve_bar`,
    the resolver the CLI and governance use)."""
    with reading(db_path()) as con:
        return resolve_bar(con, settings().criteria)


def db_path() -> str:
    """The store the dashboard shows: ``-- --db PATH``, else the ``db`` setting."""
    argv = sys.argv[1:]
    for index, arg in enumerate(argv):
        if arg == "--db" and index + 1 < len(argv):
            return argv[index + 1]
        if arg.startswith("--db="):
            return arg.split("=", 1)[1]
    return settings().db


@dataclass(frozen=True)
class ServeMode:
    """Who may use a dashboard without sign-in, as ``fieldtrust serve`` started it."""

    demo: bool  # ``-- --demo``: the demo user picker
    user: str | None  # ``-- --as NAME``: the one local user


def serve_mode() -> ServeMode:
    """The ``--demo`` and ``--as NAME`` arguments after ``--`` (``fieldtrust serve`` adds them)."""
    argv = sys.argv[1:]
    user = None
    for index, arg in enumerate(argv):
        if arg == "--as" and index + 1 < len(argv):
            user = argv[index + 1]
    return ServeMode(demo="--demo" in argv, user=user)


#: The read-only connection of the page run in progress on this thread (see run_reads).
_RUN = threading.local()


@contextlib.contextmanager
def run_reads(path: str) -> Iterator[None]:
    """Let the reads of one page run share one connection, opened on first use.

    Opening the store costs about 50 ms; a page makes up to ten reads on a
    cache miss, so one connection per read was half of some pages' time. The
    connection (and the process-wide lock) is held until the run ends or a
    write needs the file, which closes it first; other processes wait for the
    run (a second or so), as they waited for each read before.

    Re-entrant: a fragment (the review page's) runs its reads in a run of its
    own when it reruns alone, and inside the page run's when the page runs.
    """
    if getattr(_RUN, "path", None) == path:
        yield
        return
    _RUN.path, _RUN.con = path, None
    try:
        yield
    finally:
        _close_run()
        _RUN.path = None


def _close_run() -> None:
    con = getattr(_RUN, "con", None)
    if con is not None:
        _RUN.con = None
        try:
            if con is not _kept_connection():
                con.close()
        finally:
            _CONNECTION_LOCK.release()


@contextlib.contextmanager
def reading(path: str) -> Iterator[duckdb.DuckDBPyConnection]:
    """A connection to read ``path``: the page run's, or one closed when the block ends.

    The store a write kept open (:func:`writing`) serves the reads too.
    """
    if getattr(_RUN, "path", None) == path:
        if _RUN.con is None:
            _CONNECTION_LOCK.acquire()
            try:
                _RUN.con = _kept_for(path) or store.connect(
                    path, read_only=True, lock_timeout=LOCK_WAIT)
            except BaseException:
                _CONNECTION_LOCK.release()
                raise
        with _cursor(_RUN.con) as read:
            yield read
        return
    with _CONNECTION_LOCK:
        kept = _kept_for(path)
        if kept is not None:
            with _cursor(kept) as read:
                yield read
            return
        with store.open_store(path, read_only=True, lock_timeout=LOCK_WAIT) as con:
            yield con


@contextlib.contextmanager
def _cursor(con: duckdb.DuckDBPyConnection) -> Iterator[duckdb.DuckDBPyConnection]:
    """A cursor per read: a result one read leaves unfetched cannot block the next."""
    read = store.cursor(con)
    try:
        yield read
    finally:
        read.close()


@contextlib.contextmanager
def writing(path: str) -> Iterator[duckdb.DuckDBPyConnection]:
    """A read-write connection to ``path``: the one the last write kept, or a new one.

    Kept open after the write for the next key press (:data:`KEEP_OPEN`), unless
    another opener waits for the store: reopening it costs more than the open
    (DuckDB's caches go with it), and twenty reviewers' keys queue behind it.
    """
    _close_run()  # DuckDB refuses a read-write connection beside a read-only one
    with _CONNECTION_LOCK:
        con = _kept_for(path) or store.connect(path, read_only=False, lock_timeout=LOCK_WAIT)
        _KEPT.con = None  # ours while the write runs: nobody closes it meanwhile
        try:
            yield con
        except BaseException:
            con.close()
            raise
        _keep(path, con)


# --- the store kept open between writes ------------------------------------------------------

#: Seconds the store stays open after a write with nobody else waiting for it.
KEEP_OPEN = 2.0
#: How often the keeper looks whether another opener waits, or the time is up.
_KEEPER_PAUSE = 0.05

@dataclass
class _Kept:
    """The connection a write kept, and whether the keeper watches it (under the lock)."""

    path: str = ""
    con: duckdb.DuckDBPyConnection | None = None
    used: float = 0.0  # when the write that kept it ended (time.monotonic)
    watched: bool = False


_KEPT = _Kept()


def _kept_connection() -> duckdb.DuckDBPyConnection | None:
    return _KEPT.con


def _kept_for(path: str) -> duckdb.DuckDBPyConnection | None:
    """The kept connection if it is to ``path``; one to another store is closed. Under the lock."""
    if _KEPT.con is not None and _KEPT.path != path:
        _let_go_now()
    return _KEPT.con


def _keep(path: str, con: duckdb.DuckDBPyConnection) -> None:
    """Keep ``con`` open for the next write or read, unless someone waits for the store."""
    if store.others_waiting(path):
        con.close()
        return
    _KEPT.path, _KEPT.con, _KEPT.used = path, con, time.monotonic()
    if not _KEPT.watched:
        _KEPT.watched = True
        threading.Thread(target=_keeper, name="fieldtrust-keeper", daemon=True).start()


def _let_go_now() -> None:
    """Close the kept connection (under the lock)."""
    con, _KEPT.con = _KEPT.con, None
    if con is not None:
        con.close()


def _let_go_before_open(path: str) -> None:
    """Anything else in this process opening the store first makes the kept connection go."""
    if _KEPT.con is None:
        return
    with _CONNECTION_LOCK:
        if _KEPT.con is not None and getattr(_RUN, "con", None) is not _KEPT.con:
            _let_go_now()


store.before_open(_let_go_before_open)


def _keeper() -> None:
    """Close the kept store once it has been idle :data:`KEEP_OPEN` s or someone waits for it."""
    while True:
        time.sleep(_KEEPER_PAUSE)
        if not _CONNECTION_LOCK.acquire(blocking=False):
            continue  # in use: whoever holds it decides when it is done
        try:
            if _KEPT.con is not None and (time.monotonic() - _KEPT.used > KEEP_OPEN
                                          or store.others_waiting(_KEPT.path)):
                _let_go_now()
            if _KEPT.con is None:
                _KEPT.watched = False  # under the lock: the next _keep starts another
                return
        finally:
            _CONNECTION_LOCK.release()


@dataclass(frozen=True)
class DataVersion:
    """What changes whenever anything a page shows changes; the cache key."""

    extractions: int
    labels: int
    last_label_at: Any
    decisions: int
    last_decision_at: Any
    samples: int
    roles: int
    maps: int
    skips: int
    assignments: int
    seed_verdicts: int  # a verdict on a seed must move the page on like any verdict

    @property
    def empty(self) -> bool:
        return self.extractions == 0


_VERSION_SQL = """
SELECT greatest((SELECT count(*) FROM extractions),
                (SELECT coalesce(sum(n), 0) FROM extraction_counts)),
       (SELECT count(*) FROM labels), (SELECT max(labeled_at) FROM labels),
       (SELECT count(*) FROM decisions), (SELECT max(decided_at) FROM decisions),
       (SELECT count(*) FROM audit_samples), (SELECT count(*) FROM user_roles),
       (SELECT count(*) FROM recalibration_maps), (SELECT count(*) FROM skips),
       (SELECT count(*) FROM assignments), (SELECT count(*) FROM seed_verdicts)
"""


def data_version(path: str) -> DataVersion | None:
    """The store's data version, or None when there is no store file yet.

    Row counts are metadata in DuckDB and the max() runs over the small
    labels and decisions tables, so this costs a few milliseconds per rerun.
    """
    if path != ":memory:" and not Path(path).exists():
        return None
    with reading(path) as con:
        row = con.execute(_VERSION_SQL).fetchone()
    assert row is not None
    return DataVersion(*row)


# --- cached reads ---------------------------------------------------------------------------------

#: Library calls pages may make through :func:`cached`, by name. A name (not the
#: function) goes into the cache key, so the key stays small and stable.
_QUERIES: dict[str, Callable[..., Any]] = {}


def query(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register ``fn(con, *args, **kwargs)`` as a cached read called ``name``."""

    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        _QUERIES[name] = fn
        return fn

    return register


@st.cache_data(ttl=CACHE_TTL, max_entries=CACHE_ENTRIES, show_spinner=False)
def _cached_call(
    path: str, version: DataVersion, name: str, args: tuple[Any, ...], kwargs: tuple[Any, ...]
) -> Any:
    ready = _take_ahead((path, version, name, args, kwargs))
    if ready is not _NOT_AHEAD:
        return ready
    with reading(path) as con:
        return _QUERIES[name](con, *args, **dict(kwargs))


#: Reads computed beside the server's start (:func:`compute_ahead`), by the key of the
#: cached read a page will make. Streamlit's cache is filled only by a page run, so the
#: first page's run takes its read from here instead of computing it; once taken, the
#: cache holds it.
_AHEAD: dict[tuple[Any, ...], Any] = {}
_AHEAD_LOCK = threading.Lock()
_NOT_AHEAD = object()


def _take_ahead(key: tuple[Any, ...]) -> Any:
    with _AHEAD_LOCK:
        return _AHEAD.pop(key, _NOT_AHEAD)


def compute_ahead(name: str, *args: Any, **kwargs: Any) -> None:
    """Compute the cached read ``name`` now, outside a page run, for the page that will ask.

    Kept for the store's current data version only: a write before that page
    changes the version, and the page computes its read as usual.
    """
    path = db_path()
    version = current_version()
    with reading(path) as con:
        result = _QUERIES[name](con, *args, **kwargs)
    with _AHEAD_LOCK:
        _AHEAD.clear()  # one report, not one per store version the server has seen
        _AHEAD[(path, version, name, args, _kwargs_key(kwargs))] = result


def _kwargs_key(kwargs: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    """A read's keyword arguments as they key it: the page's read and one computed ahead
    (:func:`compute_ahead`) must key alike, or the page never finds the one computed."""
    return tuple(sorted(kwargs.items()))


def cached(name: str, *args: Any, **kwargs: Any) -> Any:
    """Run the registered read ``name`` against the current store, cached on its version.

    The version is the one the entry point read at the start of this run (one
    query per run, not per read); outside a run it is read now.
    """
    path = db_path()
    version = st.session_state.get(state.DATA_VERSION)
    if not isinstance(version, DataVersion):
        version = current_version()
    return _cached_call(path, version, name, args, _kwargs_key(kwargs))


def uncached(name: str, *args: Any, **kwargs: Any) -> Any:
    """Run the registered read ``name`` now (for timings and reads that must be fresh)."""
    with reading(db_path()) as con:
        return _QUERIES[name](con, *args, **kwargs)


def write(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call the library writer ``fn(con, ...)`` on a short read-write connection.

    Decisions and policy settings are signed with the settings' key
    (:func:`signing_keys`).
    """
    with writing(db_path()) as con, signing_keys():
        return fn(con, *args, **kwargs)


@contextlib.contextmanager
def configured_source() -> Iterator[Source | None]:
    """The lake source the settings name, open while in use; None when the rows are the store's.

    What the draw and the review queue are given, as the CLI gives it to them.
    """
    from fieldtrust.ingest.rules import TimeWindow
    from fieldtrust.ingest.sources import SourceConfig, open_configured

    served = settings()
    source = open_configured(SourceConfig.from_settings(served),
                             window=TimeWindow.from_settings(served))
    try:
        yield source
    finally:
        if source is not None:
            source.close()


@contextlib.contextmanager
def signing_keys() -> Iterator[None]:
    """Sign and check with the keys of the settings (``signing_key_file``,
    ``trusted_key_files``) inside the block, as the CLI does; with neither set, the keys a
    caller installed (none in the dashboard, the benchmark's in ``bench``)."""
    resolved = settings()
    if not (resolved.signing_key_file or resolved.trusted_key_files):
        yield
        return
    with signing.using(resolved.signing_key_file, resolved.trusted_key_files):
        yield


def current_version() -> DataVersion:
    """The data version of the dashboard's store (a store must exist)."""
    version = data_version(db_path())
    if version is None:
        raise StoreError(f"no store at {db_path()}")
    return version


def scope_from(weeks: tuple[str, ...], doc_types: tuple[str, ...],
               form_versions: tuple[str, ...]) -> Scope:
    """The library :class:`~fieldtrust.store.scope.Scope` the sidebar filters describe."""
    return Scope(weeks=weeks, doc_types=doc_types, form_versions=form_versions)


def busy_message(exc: StoreLockedError) -> str:
    """What a person reads when another process keeps the store busy."""
    return (
        "The store is busy: another process holds it (an ingest or a sample draw, say)."
        f" Waited {LOCK_WAIT:.0f} s. The page will work again as soon as it"
        f" finishes; reload in a moment. ({exc})"
    )


def env_db_default() -> str | None:
    """``FIELDTRUST_DB`` if set (for the empty state's hint)."""
    return os.environ.get("FIELDTRUST_DB")


# --- library reads, registered for caching ---------------------------------------------------


@query("filter_options")
def filter_options(con: duckdb.DuckDBPyConnection) -> Any:
    """Weeks, document types and form versions in the store (store.summary.filter_options)."""
    from fieldtrust.store.summary import filter_options as options

    return options(con)


@query("users")
def users(con: duckdb.DuckDBPyConnection) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """(user, roles held) of everyone holding a role, for the demo-mode picker."""
    from fieldtrust.store.access import list_users

    return tuple((u.user_name, u.roles) for u in list_users(con) if u.roles)


@query("role_of")
def role_of(con: duckdb.DuckDBPyConnection, user: str) -> tuple[str, ...]:
    """The roles the signed-in user holds (empty: none granted)."""
    from fieldtrust.store.access import current_roles

    return tuple(sorted(current_roles(con, user)))


@query("current_sample")
def current_sample(con: duckdb.DuckDBPyConnection) -> str | None:
    """The newest audit sample's id (None before the first draw)."""
    from fieldtrust.labels.assignment import current_sample as newest

    return newest(con)


@query("sample_progress")
def sample_progress(con: duckdb.DuckDBPyConnection, sample_id: str) -> Any:
    """How far the review of ``sample_id`` has got (labels.assignment.SampleProgress)."""
    from fieldtrust.labels.assignment import sample_progress as progress

    return progress(con, sample_id)


@query("item_context")
def item_context(
    con: duckdb.DuckDBPyConnection, extraction_id: str, reviewer: str, sample_id: str
) -> Any:
    """Stated confidence, conflict and the reviewer's count beside an item (labels)."""
    from fieldtrust.labels.review_progress import item_context as context

    return context(con, extraction_id, reviewer, sample_id)


@query("reviewer_rates")
def reviewer_rates(con: duckdb.DuckDBPyConnection) -> Any:
    """Each reviewer's miss and false-flag rates with n and intervals (labels.reviewer_rates)."""
    from fieldtrust.labels.reviewer_rates import reviewer_rates as rates

    return [r.to_dict() for r in rates(con)]


@query("error_report")
def error_report(con: duckdb.DuckDBPyConnection, scope: Scope) -> Any:
    """Error types per (doc_type, field, form_version) (labels.errors_report)."""
    from fieldtrust.labels.errors_report import error_report as report

    return report(con, scope)


@query("adjudication_queue")
def adjudication_queue(con: duckdb.DuckDBPyConnection, scope: Scope) -> Any:
    """Double-reviewed items whose verdicts differ, not yet settled (labels.agreement)."""
    from fieldtrust.labels.agreement import adjudication_queue as queue

    return queue(con, scope)


@query("agreement")
def agreement(con: duckdb.DuckDBPyConnection, scope: Scope) -> Any:
    """Percent agreement and Cohen's kappa per field and reviewer pair (labels.agreement)."""
    from fieldtrust.labels.agreement import agreement as report

    return report(con, scope)


@query("decision_history")
def decision_history(con: duckdb.DuckDBPyConnection) -> Any:
    """Every automation decision, oldest first (governance.decisions)."""
    from fieldtrust.governance.decisions import decision_history as history

    return history(con)


@query("current_policy")
def current_policy(con: duckdb.DuckDBPyConnection) -> Any:
    """The latest decision of every decided stratum (governance.decisions)."""
    from fieldtrust.governance.decisions import current_policy as policy

    return policy(con)


@query("revocations")
def revocations(con: duckdb.DuckDBPyConnection, bar: Bar) -> Any:
    """Approved strata that later audits show failing (governance.revocation)."""
    from fieldtrust.governance.revocation import revocation_recommendations

    return revocation_recommendations(con, bar)


@query("monitoring")
def monitoring(con: duckdb.DuckDBPyConnection) -> Any:
    """Each approved segment's monitoring chart (governance.monitoring.monitor_approvals)."""
    from fieldtrust.governance.monitoring import monitor_approvals

    return monitor_approvals(con)


@query("own_labels")
def own_labels(con: duckdb.DuckDBPyConnection, user: str, doc_type: str, field: str) -> Any:
    """How many of a stratum's labels the would-be approver gave (governance.duties)."""
    from fieldtrust.governance.duties import own_labels as own

    return own(con, user, doc_type, field)


@query("policy_export")
def policy_export(con: duckdb.DuckDBPyConnection) -> Any:
    """The policy file production reads (governance.policy.export_policy)."""
    from fieldtrust.governance.policy import export_policy

    with signing_keys():  # the file is signed, and only a verified store is exported
        return export_policy(con)


@query("preview_design")
def preview_design(con: duckdb.DuckDBPyConnection, week: str, design_json: str) -> Any:
    """Cells of ``week`` under a design, with sizes, before drawing (sampling planner)."""
    from fieldtrust.sampling.design import Design
    from fieldtrust.sampling.planner import preview_design as preview

    return preview(con, week, Design.from_json(design_json))


@query("certificate_plan")
def certificate_plan(con: duckdb.DuckDBPyConnection, week: str, design_json: str, bar: Bar) -> Any:
    """What a design can certify per stratum, and when (sampling.certify_plan, as `plan`)."""
    from fieldtrust.sampling.certify_plan import plan_certificates
    from fieldtrust.sampling.design import Design

    return plan_certificates(con, week, Design.from_json(design_json), bar)


@query("weekly_estimates")
def weekly_estimates(con: duckdb.DuckDBPyConnection, scope: Scope, confidence: float) -> Any:
    """Design-weighted accuracy per week and (doc_type, field) (sampling.estimates)."""
    from fieldtrust.sampling.estimates import weekly_estimates as weekly

    return weekly(con, scope, confidence=confidence)


@query("weekly_alerts")
def weekly_alerts(
    con: duckdb.DuckDBPyConnection, week: str | None, target: float, confidence: float
) -> Any:
    """This week's alerts: below target, slipping, new form version worse (sampling.alerts)."""
    from fieldtrust.sampling.alerts import weekly_alerts as alerts

    return alerts(con, week, target=target, confidence=confidence)


@query("latest_design")
def latest_design(con: duckdb.DuckDBPyConnection) -> Any:
    """The design the newest sample was drawn with (None: no sample yet)."""
    from fieldtrust.sampling.samples import latest_design as latest

    return latest(con)


@query("week_sample")
def week_sample(con: duckdb.DuckDBPyConnection, week: str) -> str | None:
    """The current sample id of ``week`` (None: not drawn yet)."""
    from fieldtrust.sampling.samples import current_sample_id

    return current_sample_id(con, week)


@query("cell_progress")
def cell_progress(con: duckdb.DuckDBPyConnection, sample_id: str) -> Any:
    """Per cell of a sample: population, drawn and labelled items (labels.review_progress)."""
    from fieldtrust.labels.review_progress import cell_progress as progress

    return progress(con, sample_id)


@query("priority_queue")
def priority_queue(con: duckdb.DuckDBPyConnection, scope: Scope, limit: int) -> Any:
    """The human review queue outside the audit, most urgent first (sampling.queue)."""
    from fieldtrust.sampling.queue import priority_queue as queue

    with configured_source() as lake:
        return queue(con, scope, limit=limit, source=lake)


@query("candidates")
def candidates(con: duckdb.DuckDBPyConnection, scope: Scope, bar: Bar) -> Any:
    """Every stratum's automation assessment, candidates first (calibration.candidates)."""
    from fieldtrust.calibration.candidates import automation_candidates

    return automation_candidates(con, scope, bar)


@query("calibration_report")
def calibration_report(
    con: duckdb.DuckDBPyConnection, scope: Scope, bar: Bar, n_bins: int = 10,
    strategy: str = "quantile",
) -> Any:
    """Tables, bins, thresholds and candidacy of every stratum (calibration.report)."""
    from fieldtrust.calibration.report import calibration_report as report

    return report(con, scope, bar, n_bins=n_bins, strategy=strategy)


@query("threshold_curve")
def threshold_curve(
    con: duckdb.DuckDBPyConnection, doc_type: str, field: str, scope: Scope, bar: Bar
) -> Any:
    """Accuracy, lower bound and coverage at every candidate threshold (calibration.thresholds)."""
    from fieldtrust.calibration.thresholds import threshold_curve as curve

    return curve(con, doc_type, field, scope, bar)


@query("confidence_histogram")
def confidence_histogram(
    con: duckdb.DuckDBPyConnection, doc_type: str, field: str, scope: Scope, bins: int = 40
) -> Any:
    """Counts of stated confidence of one stratum in equal-width bins (calibration.histogram)."""
    from fieldtrust.calibration.histogram import confidence_histogram as histogram

    return histogram(con, doc_type, field, scope, bins=bins)


@query("metric_intervals")
def metric_intervals(
    con: duckdb.DuckDBPyConnection, doc_type: str, field: str, scope: Scope, n_bins: int,
    strategy: str,
) -> Any:
    """Bootstrap intervals of a stratum's ECE and Brier score (calibration.metrics)."""
    from fieldtrust.calibration.metrics import metric_intervals as intervals
    from fieldtrust.store.labelled import design_based_items

    items = design_based_items(
        con, dataclasses.replace(scope, doc_types=(doc_type,), fields=(field,)))
    return intervals(items.column("confidence").to_numpy(), items.column("correct").to_numpy(),
                     weight=items.column("weight").to_numpy(), n_bins=n_bins, strategy=strategy)


@query("recalibration_info")
def recalibration_info(con: duckdb.DuckDBPyConnection, doc_type: str, field: str) -> Any:
    """A stratum's current map, its knots and ECE before/after (calibration.recalibrate)."""
    from fieldtrust.calibration.recalibrate import stored_map

    return stored_map(con, doc_type, field)


@query("document_location")
def document_location(con: duckdb.DuckDBPyConnection, extraction_id: str) -> Any:
    """Document uri, page and bbox of an extraction (store.locations)."""
    from fieldtrust.store.locations import document_location as location

    return location(con, extraction_id)


@query("source_excerpt")
def source_excerpt(con: duckdb.DuckDBPyConnection, extraction_id: str) -> str | None:
    """The text excerpt stored with an extraction (for items read without one)."""
    row = con.execute(
        "SELECT source_excerpt FROM extractions WHERE extraction_id = ? LIMIT 1", [extraction_id]
    ).fetchone()
    return None if row is None else row[0]
