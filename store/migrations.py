"""The store's schema, as ordered, named migrations.

Every table and view of a store is created here and nowhere else (the demo's
hidden truth is no part of a store's schema: :mod:`fieldtrust.demo.truth`
creates it in demo stores). A migration is applied once, inside a
transaction, and recorded in ``schema_migrations``; a store made by an older
fieldtrust gains the newer migrations when it is next opened. Append new
migrations at the end; never edit one that has shipped.

Conventions: timestamps are ``TIMESTAMP`` in UTC (ingest converts), ISO weeks
are text like ``2026-W48``. Tables marked append-only (labels, decisions,
evidence) are only ever inserted into by the library.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import duckdb
from fieldtrust.store.chain import append_entries, chain_existing_rows, chain_table
from fieldtrust.store.queue_cache import refresh as refresh_queue_cache
from fieldtrust.store.rollup import refresh_rollups, refresh_sampled


@dataclass(frozen=True)
class Migration:
    name: str
    sql: str
    #: Python run after ``sql`` in the same transaction, for what SQL cannot do
    #: (chaining existing rows with sha256 in order).
    then: Callable[[duckdb.DuckDBPyConnection], object] | None = None


#: The part of ``effective_labels`` that keeps one live label per extraction
#: (0015, again in 0068): only the double-reviewed extractions are ranked, the
#: adjudication first, then the primary or imported label, then the latest.
#: Shared, not copied, so the two migrations cannot drift apart; neither may change.
_ONE_LIVE_LABEL_EACH = """\
        repeated AS (
            SELECT extraction_id FROM live GROUP BY extraction_id HAVING count(*) > 1
        ),
        chosen AS (
            SELECT * FROM live ANTI JOIN repeated USING (extraction_id)
            UNION ALL
            SELECT * EXCLUDE (rank_) FROM (
                SELECT *, row_number() OVER (
                    PARTITION BY extraction_id
                    ORDER BY CASE review_round WHEN 'adjudication' THEN 0
                                               WHEN 'primary' THEN 1
                                               WHEN 'import' THEN 1 ELSE 2 END,
                             labeled_at DESC, label_id DESC) AS rank_
                FROM live SEMI JOIN repeated USING (extraction_id)
            ) WHERE rank_ = 1
        )
        SELECT extraction_id, label_id, sample_id, verdict,
               CASE verdict WHEN 'correct' THEN 1 WHEN 'incorrect' THEN 0 END AS correct,
               corrected_value, corrected_status, error_type, error_detail,
               reviewer, review_round, labeled_at
        FROM chosen;"""

#: Each recalibration map as segments between its knots (0005, again in 0012).
_MAP_SEGMENTS = """\
            SELECT m.doc_type, m.field, m.method, k.x, k.y,
                   lead(k.x) OVER w AS x_next, lead(k.y) OVER w AS y_next
            FROM current_recalibration_maps m JOIN recalibration_knots k USING (map_id)
            WINDOW w AS (PARTITION BY k.map_id ORDER BY k.x)"""

#: A confidence mapped linearly between the two knots around it (0005, again in 0012).
_BETWEEN_KNOTS = """\
        SELECT e.extraction_id, s.method,
               CASE WHEN s.x_next IS NULL OR s.x_next = s.x THEN s.y
                    ELSE s.y + (s.y_next - s.y) * (e.confidence - s.x) / (s.x_next - s.x)
               END AS calibrated_confidence"""

MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        "0001_extractions",
        """
        CREATE TABLE ingest_batches (
            batch_id      VARCHAR PRIMARY KEY,
            source        VARCHAR NOT NULL,   -- file name, or 'extract' / 'demo'
            source_sha256 VARCHAR NOT NULL,   -- content hash: re-ingesting a file is a no-op
            format        VARCHAR NOT NULL,   -- csv | parquet | jsonl | extract | demo
            rows_in_file  BIGINT  NOT NULL,
            rows_added    BIGINT  NOT NULL,
            ingested_at   TIMESTAMP NOT NULL
        );

        -- One row per field read from one document. No PRIMARY KEY: an ART index
        -- over ten million ids costs more at ingest than the anti-join that keeps
        -- extraction_id unique (ingest.extractions checks it inside the transaction).
        CREATE TABLE extractions (
            extraction_id  VARCHAR   NOT NULL,
            doc_id         VARCHAR   NOT NULL,
            doc_type       VARCHAR   NOT NULL,
            form_version   VARCHAR   NOT NULL,  -- 'unknown' when the source did not say
            field          VARCHAR   NOT NULL,
            value          VARCHAR,             -- NULL unless value_status = 'present' / 'other'
            value_status   VARCHAR   NOT NULL
                CHECK (value_status IN ('present', 'null', 'unclear', 'other')),
            confidence     DOUBLE    NOT NULL CHECK (confidence >= 0 AND confidence <= 1),
            model          VARCHAR,
            extracted_at   TIMESTAMP NOT NULL,  -- UTC
            conflict       BOOLEAN   NOT NULL DEFAULT false,
            conflict_value VARCHAR,             -- the other source's value, kept beside ours
            source_excerpt VARCHAR,             -- text around the value, shown to reviewers
            batch_id       VARCHAR   NOT NULL
        );

        CREATE TABLE form_versions (
            doc_type      VARCHAR   NOT NULL,
            form_version  VARCHAR   NOT NULL,
            first_seen_at TIMESTAMP NOT NULL,
            PRIMARY KEY (doc_type, form_version)
        );
        """,
    ),
    Migration(
        "0002_audit_samples",
        """
        CREATE TABLE audit_samples (
            sample_id     VARCHAR   PRIMARY KEY,  -- '2026-W48/v1'
            week          VARCHAR   NOT NULL,     -- ISO week, UTC
            version       INTEGER   NOT NULL,
            seed          BIGINT    NOT NULL,
            design_json   VARCHAR   NOT NULL,     -- the full design used, canonical JSON
            design_sha256 VARCHAR   NOT NULL,
            drawn_at      TIMESTAMP NOT NULL,
            drawn_by      VARCHAR,
            UNIQUE (week, version)
        );

        CREATE TABLE audit_cells (
            sample_id      VARCHAR NOT NULL,
            cell           VARCHAR NOT NULL,  -- doc_type|field|band|version_status
            doc_type       VARCHAR NOT NULL,
            field          VARCHAR NOT NULL,
            band           VARCHAR NOT NULL,  -- '[0.90,0.95)'
            version_status VARCHAR NOT NULL CHECK (version_status IN ('new', 'established')),
            n_population   BIGINT  NOT NULL,
            n_sample       BIGINT  NOT NULL,
            inclusion_prob DOUBLE  NOT NULL,
            PRIMARY KEY (sample_id, cell)
        );

        CREATE TABLE audit_items (
            sample_id      VARCHAR NOT NULL,
            extraction_id  VARCHAR NOT NULL,
            cell           VARCHAR NOT NULL,
            inclusion_prob DOUBLE  NOT NULL CHECK (inclusion_prob > 0 AND inclusion_prob <= 1),
            prn            DOUBLE  NOT NULL,   -- permanent random number in [0, 1)
            double_review  BOOLEAN NOT NULL DEFAULT false,
            PRIMARY KEY (sample_id, extraction_id)
        );
        """,
    ),
    Migration(
        "0003_labels",
        """
        -- Append-only. A correction is a new row naming the row it supersedes.
        CREATE TABLE labels (
            label_id         VARCHAR   PRIMARY KEY,
            extraction_id    VARCHAR   NOT NULL,
            sample_id        VARCHAR,            -- NULL for labels imported without a design
            verdict          VARCHAR   NOT NULL
                CHECK (verdict IN ('correct', 'incorrect', 'unclear')),
            corrected_value  VARCHAR,  -- for 'incorrect'; NULL + status 'null' = field absent
            corrected_status VARCHAR
                CHECK (corrected_status IS NULL
                       OR corrected_status IN ('present', 'null', 'unclear', 'other')),
            error_type       VARCHAR,
            error_detail     VARCHAR,
            reviewer         VARCHAR   NOT NULL,
            review_round     VARCHAR   NOT NULL
                CHECK (review_round IN ('primary', 'second', 'adjudication', 'import')),
            labeled_at       TIMESTAMP NOT NULL,
            supersedes       VARCHAR,            -- label_id this row replaces
            import_batch_id  VARCHAR
        );

        CREATE TABLE label_imports (
            batch_id      VARCHAR PRIMARY KEY,
            source        VARCHAR NOT NULL,
            source_sha256 VARCHAR NOT NULL,
            rows_in_file  BIGINT  NOT NULL,
            rows_added    BIGINT  NOT NULL,
            imported_at   TIMESTAMP NOT NULL
        );

        CREATE TABLE assignments (
            sample_id     VARCHAR   NOT NULL,
            extraction_id VARCHAR   NOT NULL,
            review_round  VARCHAR   NOT NULL CHECK (review_round IN ('primary', 'second')),
            reviewer      VARCHAR   NOT NULL,
            assigned_at   TIMESTAMP NOT NULL,
            PRIMARY KEY (sample_id, extraction_id, review_round)
        );

        CREATE TABLE skips (
            sample_id     VARCHAR   NOT NULL,
            extraction_id VARCHAR   NOT NULL,
            reviewer      VARCHAR   NOT NULL,
            reason        VARCHAR,
            skipped_at    TIMESTAMP NOT NULL
        );

        -- The verdict everything downstream uses, one row per labelled extraction:
        -- an adjudication beats the review rounds; otherwise the primary review (or
        -- an imported label); a superseded row never counts. 'unclear' has
        -- correct = NULL: the source was unreadable, so it is neither right nor wrong.
        CREATE VIEW effective_labels AS
        WITH live AS (
            SELECT * FROM labels l
            WHERE NOT EXISTS (SELECT 1 FROM labels s WHERE s.supersedes = l.label_id)
        ),
        ranked AS (
            SELECT *, row_number() OVER (
                PARTITION BY extraction_id
                ORDER BY CASE review_round WHEN 'adjudication' THEN 0
                                           WHEN 'primary' THEN 1
                                           WHEN 'import' THEN 1 ELSE 2 END,
                         labeled_at DESC, label_id DESC) AS rank_
            FROM live
        )
        SELECT extraction_id, label_id, sample_id, verdict,
               CASE verdict WHEN 'correct' THEN 1 WHEN 'incorrect' THEN 0 END AS correct,
               corrected_value, corrected_status, error_type, error_detail,
               reviewer, review_round, labeled_at
        FROM ranked WHERE rank_ = 1;
        """,
    ),
    Migration(
        "0004_governance",
        """
        -- Role grants are append-only too: the current role is the latest grant.
        CREATE TABLE user_roles (
            user_name  VARCHAR   NOT NULL,
            role       VARCHAR   NOT NULL
                CHECK (role IN ('reviewer', 'qa_lead', 'manager', 'admin', 'none')),
            granted_by VARCHAR   NOT NULL,
            granted_at TIMESTAMP NOT NULL
        );

        CREATE TABLE evidence_snapshots (
            evidence_id  VARCHAR   PRIMARY KEY,   -- sha256 of payload_json
            created_at   TIMESTAMP NOT NULL,
            payload_json VARCHAR   NOT NULL
        );

        CREATE TABLE decisions (
            decision_id VARCHAR   PRIMARY KEY,
            doc_type    VARCHAR   NOT NULL,
            field       VARCHAR   NOT NULL,
            action      VARCHAR   NOT NULL CHECK (action IN ('approve', 'reject', 'revoke')),
            threshold   DOUBLE    CHECK (threshold IS NULL OR (threshold >= 0 AND threshold <= 1)),
            decided_by  VARCHAR   NOT NULL,
            role        VARCHAR   NOT NULL,
            comment     VARCHAR   NOT NULL,
            decided_at  TIMESTAMP NOT NULL,
            evidence_id VARCHAR
        );
        """,
    ),
    Migration(
        "0005_calibration_and_extraction_log",
        f"""
        -- Fitted recalibration maps. A map is piecewise linear through its knots
        -- (x ascending, the first at x = 0), so DuckDB applies it to every
        -- extraction with one ASOF join instead of a round trip through Python.
        CREATE TABLE recalibration_maps (
            map_id      VARCHAR   PRIMARY KEY,
            doc_type    VARCHAR   NOT NULL,
            field       VARCHAR   NOT NULL,
            method      VARCHAR   NOT NULL CHECK (method IN ('isotonic', 'platt', 'identity')),
            n_labels    BIGINT    NOT NULL,
            cv_score    DOUBLE,
            ece_before  DOUBLE,
            ece_after   DOUBLE,
            fitted_at   TIMESTAMP NOT NULL
        );

        CREATE TABLE recalibration_knots (
            map_id VARCHAR NOT NULL,
            x      DOUBLE  NOT NULL CHECK (x >= 0 AND x <= 1),
            y      DOUBLE  NOT NULL CHECK (y >= 0 AND y <= 1),
            PRIMARY KEY (map_id, x)
        );

        CREATE VIEW current_recalibration_maps AS
        SELECT * EXCLUDE (rank_) FROM (
            SELECT *, row_number() OVER (PARTITION BY doc_type, field
                                         ORDER BY fitted_at DESC, map_id DESC) AS rank_
            FROM recalibration_maps
        ) WHERE rank_ = 1;

        -- Calibrated confidence of every extraction whose stratum has a map;
        -- strata without one are absent (callers fall back to stated confidence).
        CREATE VIEW calibrated_confidence AS
        WITH segments AS (
{_MAP_SEGMENTS}
        )
{_BETWEEN_KNOTS}
        FROM extractions e
        ASOF JOIN segments s
          ON e.doc_type = s.doc_type AND e.field = s.field AND e.confidence >= s.x;

        -- One row per model call made by `fieldtrust extract`.
        CREATE TABLE extraction_log (
            attempt_id        VARCHAR   PRIMARY KEY,
            run_id            VARCHAR   NOT NULL,
            doc_id            VARCHAR   NOT NULL,
            source_path       VARCHAR,
            attempt           INTEGER   NOT NULL,
            model             VARCHAR,
            stop_reason       VARCHAR,
            tool_name         VARCHAR,
            tool_input_json   VARCHAR,
            validator_message VARCHAR,
            outcome           VARCHAR   NOT NULL,
            created_at        TIMESTAMP NOT NULL
        );
        """,
    ),
    # 0006_demo_truth and 0011_demo_truth_error_type (RETIRED) gave every store the
    # demo's truth table (demo_truth) before 0025. The demo creates it now
    # (fieldtrust.demo.truth); stores that applied them keep the table.
    Migration(
        "0010_labels_history_constraints",
        """
        -- Labels form one chain per (extraction, review round): a label is
        -- superseded at most once, and each round of an extraction has one
        -- first label (imports excepted: batches may overlap). Two reviewers
        -- racing on the same item then conflict in DuckDB, and the loser is
        -- told to supersede instead of silently adding a competing label.
        CREATE UNIQUE INDEX labels_supersedes_once ON labels (supersedes);
        CREATE UNIQUE INDEX labels_one_chain_per_round ON labels ((
            CASE WHEN supersedes IS NULL AND review_round <> 'import'
                 THEN extraction_id || '|' || review_round END));
        """,
    ),
    Migration(
        "0012_store_calibrated_confidence_only_mapped_strata",
        f"""
        -- The first version sorted every extraction for the ASOF join, even in
        -- strata without a map (50 s on ten million rows). Join only the strata
        -- that have a map; the rest fall back to stated confidence anyway.
        CREATE OR REPLACE VIEW calibrated_confidence AS
        WITH segments AS (
{_MAP_SEGMENTS}
        ),
        mapped AS (
            SELECT e.extraction_id, e.doc_type, e.field, e.confidence
            FROM extractions e
            SEMI JOIN current_recalibration_maps m
                ON e.doc_type = m.doc_type AND e.field = m.field
        )
{_BETWEEN_KNOTS}
        FROM mapped e
        ASOF JOIN segments s
          ON e.doc_type = s.doc_type AND e.field = s.field AND e.confidence >= s.x;
        """,
    ),
    Migration(
        "0013_store_history_chain",
        """
        -- Tamper evidence (store.chain): one sha256 chain over the append-only
        -- history tables. Each entry holds the row as written (canonical JSON)
        -- and sha256(previous row_hash, table, row_json); seq is the primary
        -- key, so two writers that read the same head cannot both append.
        -- Rows already in the store are chained once, oldest first.
        CREATE TABLE history_chain (
            seq        BIGINT    PRIMARY KEY,  -- 1, 2, 3...: position in the chain
            table_name VARCHAR   NOT NULL,
            row_key    VARCHAR   NOT NULL,     -- JSON list of the row's key columns
            row_json   VARCHAR   NOT NULL,     -- the row as written, canonical JSON
            row_hash   VARCHAR   NOT NULL,
            chained_at TIMESTAMP NOT NULL
        );
        -- Who imported a labels file (labels.label_import checks their role).
        ALTER TABLE label_imports ADD COLUMN imported_by VARCHAR;
        """,
        then=chain_existing_rows,
    ),
    Migration(
        "0014_store_extraction_rollups",
        """
        -- Derived caches, rebuilt from extractions whenever they fall out of
        -- step (store.rollup): never history, never the truth.
        -- Extraction counts per stratum, form version, ISO week and 0.005
        -- confidence step; ingest appends each batch's counts.
        CREATE TABLE extraction_counts (
            doc_type       VARCHAR  NOT NULL,
            field          VARCHAR  NOT NULL,
            form_version   VARCHAR  NOT NULL,
            week           VARCHAR  NOT NULL,
            k              SMALLINT NOT NULL,  -- floor(confidence * 200)
            n              BIGINT   NOT NULL,
            sum_confidence DOUBLE   NOT NULL
        );
        -- What labels are read with, for every extraction drawn into an
        -- audit sample or labelled: a few per cent of the rows, so reading
        -- labels never joins every extraction.
        CREATE TABLE sampled_extractions (
            extraction_id VARCHAR   PRIMARY KEY,
            doc_type      VARCHAR   NOT NULL,
            form_version  VARCHAR   NOT NULL,
            field         VARCHAR   NOT NULL,
            confidence    DOUBLE    NOT NULL,
            extracted_at  TIMESTAMP NOT NULL
        );
        """,
        then=refresh_rollups,
    ),
    Migration(
        "0015_store_effective_labels_rank_only_repeats",
        f"""
        -- The same rule as 0003: the live label of an extraction is its
        -- adjudication, else its primary (or imported) label, else the latest;
        -- ties go to the latest label_id. Ranking every label by a string
        -- partition was most of the time of reading labels, and all but the
        -- double-reviewed extractions have one live label: only those are ranked.
        CREATE OR REPLACE VIEW effective_labels AS
        WITH live AS (
            SELECT * FROM labels l
            WHERE NOT EXISTS (SELECT 1 FROM labels s WHERE s.supersedes = l.label_id)
        ),
{_ONE_LIVE_LABEL_EACH}
        """,
    ),
    Migration(
        "0016_store_document_locations",
        """
        -- Where a value came from (store.locations): the document, the 1-based
        -- page and the value's box as fractions of the page, origin top left.
        -- All optional; the sampled copy carries them (and doc_id) because the
        -- review screens read items from it.
        ALTER TABLE extractions ADD COLUMN document_uri VARCHAR;
        ALTER TABLE extractions ADD COLUMN page INTEGER;  -- >= 1, checked by ingest
        ALTER TABLE extractions ADD COLUMN bbox_x0 DOUBLE;
        ALTER TABLE extractions ADD COLUMN bbox_y0 DOUBLE;
        ALTER TABLE extractions ADD COLUMN bbox_x1 DOUBLE;
        ALTER TABLE extractions ADD COLUMN bbox_y1 DOUBLE;
        ALTER TABLE sampled_extractions ADD COLUMN doc_id VARCHAR;
        ALTER TABLE sampled_extractions ADD COLUMN document_uri VARCHAR;
        ALTER TABLE sampled_extractions ADD COLUMN page INTEGER;
        ALTER TABLE sampled_extractions ADD COLUMN bbox_x0 DOUBLE;
        ALTER TABLE sampled_extractions ADD COLUMN bbox_y0 DOUBLE;
        ALTER TABLE sampled_extractions ADD COLUMN bbox_x1 DOUBLE;
        ALTER TABLE sampled_extractions ADD COLUMN bbox_y1 DOUBLE;
        """,
        then=refresh_sampled,
    ),
    Migration(
        "0017_store_extraction_sources",
        """
        -- A lake source (store.sources): what each refresh counted, the files
        -- it read, and the counts it brought home (kept apart, so rebuilding
        -- extraction_counts from the stored rows puts them back).
        CREATE TABLE source_refreshes (
            refresh_id    VARCHAR   PRIMARY KEY,
            source        VARCHAR   NOT NULL,  -- 'parquet:lake/extractions'
            refreshed_at  TIMESTAMP NOT NULL,
            files_read    INTEGER   NOT NULL,
            rows_counted  BIGINT    NOT NULL,
            rows_skipped  BIGINT    NOT NULL,  -- bad rows left out (--skip-invalid)
            watermark     TIMESTAMP,           -- newest extracted_at counted (tables)
            changed_files VARCHAR   NOT NULL   -- JSON list: counted files changed since
        );
        CREATE TABLE source_files (
            source     VARCHAR NOT NULL,
            path       VARCHAR NOT NULL,        -- relative to the source's root
            size       BIGINT  NOT NULL,
            modified   DOUBLE  NOT NULL,        -- seconds since the epoch, as listed
            refresh_id VARCHAR NOT NULL,
            PRIMARY KEY (source, path)
        );
        CREATE TABLE source_counts (
            refresh_id     VARCHAR  NOT NULL,
            doc_type       VARCHAR  NOT NULL,
            field          VARCHAR  NOT NULL,
            form_version   VARCHAR  NOT NULL,
            week           VARCHAR  NOT NULL,
            k              SMALLINT NOT NULL,
            n              BIGINT   NOT NULL,
            sum_confidence DOUBLE   NOT NULL
        );
        """,
    ),
    Migration(
        "0018_label_provenance_and_policy_settings",
        """
        -- How an imported file's items were chosen (STATS.md section 10). A file
        -- declared a simple random sample (`labels import --random-sample`) gets a
        -- row here; every other label without an audit sample is non-random and
        -- never enters a design-based figure. Files imported before this
        -- migration without a sample id were weighed as random samples, so they
        -- are declared so here, by 'migration 0018'.
        CREATE TABLE label_import_designs (
            batch_id    VARCHAR   PRIMARY KEY,
            design      VARCHAR   NOT NULL CHECK (design IN ('random_sample')),
            declared_by VARCHAR   NOT NULL,
            declared_at TIMESTAMP NOT NULL
        );
        INSERT INTO label_import_designs (batch_id, design, declared_by, declared_at)
        SELECT b.batch_id, 'random_sample', 'migration 0018', b.imported_at
        FROM label_imports b
        WHERE EXISTS (SELECT 1 FROM labels l
                      WHERE l.import_batch_id = b.batch_id AND l.sample_id IS NULL);

        -- The bar an approval is held to, set by an admin only (append-only: the
        -- newest row is in force). Reports may be made stricter by flags or the
        -- environment; an approval always uses these.
        CREATE TABLE policy_settings (
            setting_id       VARCHAR   PRIMARY KEY,
            target           DOUBLE    NOT NULL CHECK (target > 0 AND target < 1),
            confidence       DOUBLE    NOT NULL CHECK (confidence > 0 AND confidence < 1),
            n_min            INTEGER   NOT NULL CHECK (n_min >= 1),
            stability_weeks  INTEGER   NOT NULL CHECK (stability_weeks >= 1),
            version_share    DOUBLE    NOT NULL CHECK (version_share > 0 AND version_share <= 1),
            min_week_labels  INTEGER   NOT NULL CHECK (min_week_labels >= 1),
            prior_error      DOUBLE    NOT NULL CHECK (prior_error >= 0 AND prior_error < 1),
            weeks            INTEGER   NOT NULL CHECK (weeks >= 1),
            set_by           VARCHAR   NOT NULL,
            set_at           TIMESTAMP NOT NULL
        );
        """,
        then=lambda con: chain_table(con, "label_import_designs"),
    ),
    Migration(
        "0019_store_role_sets",
        """
        -- A user holds a set of roles: a grant adds one, a revocation (a row
        -- here, chained like the grants) takes one away. Before, a grant
        -- replaced the user's role; the migration writes that replacement as
        -- the revocation it was, so every store reads the same way.
        CREATE TABLE role_revocations (
            user_name  VARCHAR   NOT NULL,
            role       VARCHAR   NOT NULL
                CHECK (role IN ('reviewer', 'qa_lead', 'manager', 'admin')),
            revoked_by VARCHAR   NOT NULL,
            revoked_at TIMESTAMP NOT NULL
        );
        """,
        then=lambda con: revoke_replaced_roles(con),
    ),
    Migration(
        "0020_labels_lead_time",
        """
        -- Seconds an annotator spent on a label, where the tool that recorded
        -- it says (Label Studio's lead_time). Beside the label, not in it:
        -- labels rows are chained as written.
        CREATE TABLE label_lead_times (
            label_id          VARCHAR PRIMARY KEY,
            lead_time_seconds DOUBLE  NOT NULL
        );
        """,
    ),
    Migration(
        "0021_store_queue_cache",
        """
        -- A derived cache, like the rollup (store.queue_cache): per queue
        -- partition (tier, doc_type, field, ISO week), the first open items by
        -- stated confidence and id, so the review queue never ranks every
        -- extraction on a page run. Rebuilt at ingest; never the truth.
        CREATE TABLE queue_candidates (
            tier           SMALLINT NOT NULL,  -- 0 conflict, 1 unclear, 2 the rest
            doc_type       VARCHAR  NOT NULL,
            field          VARCHAR  NOT NULL,
            week           VARCHAR  NOT NULL,
            extraction_id  VARCHAR  NOT NULL,
            doc_id         VARCHAR  NOT NULL,
            form_version   VARCHAR  NOT NULL,
            value          VARCHAR,
            value_status   VARCHAR  NOT NULL,
            conflict       BOOLEAN  NOT NULL,
            conflict_value VARCHAR,
            confidence     DOUBLE   NOT NULL
        );
        -- One row per partition: how many items were open when it was built,
        -- and the last item kept when not all were (NULL: every one is kept).
        CREATE TABLE queue_partitions (
            tier                SMALLINT NOT NULL,
            doc_type            VARCHAR  NOT NULL,
            field               VARCHAR  NOT NULL,
            week                VARCHAR  NOT NULL,
            open_items          BIGINT   NOT NULL,
            frontier_confidence DOUBLE,
            frontier_id         VARCHAR
        );
        -- What the cache was built over: it is read only while the store still
        -- holds exactly these extractions and at least these labels.
        CREATE TABLE queue_cache_state (
            extraction_rows BIGINT    NOT NULL,
            label_rows      BIGINT    NOT NULL,
            depth           INTEGER   NOT NULL,  -- open items kept per partition
            built_at        TIMESTAMP NOT NULL
        );
        """,
        then=refresh_queue_cache,
    ),
    Migration(
        "0022_source_draw_skips",
        """
        -- A lake's rows are checked for what they are counted by at refresh and
        -- for the rest (ids, values, statuses) at the draw, the only place they
        -- come home. A draw told to skip the week's invalid rows says here how
        -- many it left out of the sample and its population.
        CREATE TABLE source_draw_skips (
            sample_id    VARCHAR PRIMARY KEY,
            rows_skipped BIGINT  NOT NULL
        );
        """,
    ),
    Migration(
        "0023_policy_horizon_weeks",
        """
        -- The bar gains the anytime-valid horizon: the weeks over which a
        -- certificate's error guarantee holds whatever the weekly looks. NULL
        -- in a row written before it existed, which held the default (52);
        -- fieldtrust.store.bar reads it so. DuckDB cannot add a column with a
        -- CHECK: the one writer checks the range (1 to 520) through the Bar,
        -- and the history chain finds a row written around it.
        ALTER TABLE policy_settings ADD COLUMN horizon_weeks INTEGER;
        """,
    ),
    Migration(
        "0025_policy_in_force",
        """
        -- The policy in force: each decided stratum's latest decision, and the
        -- threshold above which it is automated (NULL unless that decision is
        -- an approval). Governance reports it and the review queue leaves out
        -- what it automates, from this one definition.
        CREATE VIEW policy_in_force AS
        SELECT d.*, CASE WHEN d.action = 'approve' THEN d.threshold END AS automated_above
        FROM decisions d
        QUALIFY row_number() OVER (PARTITION BY d.doc_type, d.field
                                   ORDER BY d.decided_at DESC, d.decision_id DESC) = 1;
        """,
    ),
    Migration(
        "0030_source_versions",
        """
        -- A Delta table is counted by what each version of its log adds and
        -- removes (ingest.sources.delta_log): the newest version a refresh
        -- counted, so the next one reads only the versions after it. NULL for
        -- Parquet and Spark sources, and for refreshes made before this.
        ALTER TABLE source_refreshes ADD COLUMN source_version BIGINT;
        """,
    ),
    Migration(
        "0035_store_history_signatures",
        """
        -- Signatures of chain entries, by a key kept outside the store file
        -- (store.signing): every entry of decisions and policy_settings is
        -- signed by its writer ('entry'); an admin's 'vouch' covers every
        -- entry up to its seq (history written before signing). Not chained:
        -- a signature is checked by itself, and a deleted one leaves its entry
        -- unsigned, which verify names.
        CREATE TABLE history_signatures (
            seq       BIGINT    NOT NULL,
            kind      VARCHAR   NOT NULL CHECK (kind IN ('entry', 'vouch')),
            key_id    VARCHAR   NOT NULL,
            signature VARCHAR   NOT NULL,
            signed_by VARCHAR,   -- vouch: the admin who vouched
            comment   VARCHAR,   -- vouch: what they checked
            signed_at TIMESTAMP NOT NULL,
            PRIMARY KEY (seq, kind)
        );
        -- The chain's head when signing began: entries up to it were written
        -- before fieldtrust signed anything, and wait for an admin's vouch.
        CREATE TABLE signing_started (
            seq        BIGINT    NOT NULL,
            started_at TIMESTAMP NOT NULL
        );
        INSERT INTO signing_started
        SELECT coalesce(max(seq), 0), now()::TIMESTAMP FROM history_chain;
        """,
    ),
    Migration(
        "0050_policy_max_own_label_share",
        """
        -- Segregation of duties: the largest share of a stratum's design-based
        -- labels its approver may have given. NULL in a row written before it
        -- existed, which held the default (1: any share, with a warning when
        -- every label is the approver's). Checked by the Bar, as 0023's column.
        ALTER TABLE policy_settings ADD COLUMN max_own_label_share DOUBLE;
        """,
    ),
    Migration(
        "0051_source_file_acknowledgements",
        """
        -- A counted lake file that changed or went away is reported by every
        -- refresh until someone acknowledges it (ingest.sources.changes): the
        -- file as it was seen (size and time; NULL for a file that is gone),
        -- who and when. A later change is reported again. Append-only.
        CREATE TABLE source_file_acknowledgements (
            source          VARCHAR   NOT NULL,
            path            VARCHAR   NOT NULL,  -- relative to the source's root
            size            BIGINT,
            modified        DOUBLE,
            acknowledged_by VARCHAR   NOT NULL,
            acknowledged_at TIMESTAMP NOT NULL
        );
        """,
    ),
    Migration(
        "0060_policy_anytime_certificate",
        """
        -- The bar gains the anytime-valid certificate's settings: which
        -- certificate certifies ('fixed', today's one look, or 'anytime'),
        -- familywise control across strata (0 or 1) and the seed rate of
        -- known-answer items (0: reviewer misses not allowed for). NULL in a
        -- row written before they existed, which held the defaults ('fixed',
        -- 0, 0); fieldtrust.store.bar reads it so. The one writer checks the
        -- values through the Bar (DuckDB cannot add a column with a CHECK).
        ALTER TABLE policy_settings ADD COLUMN certificate VARCHAR;
        ALTER TABLE policy_settings ADD COLUMN familywise INTEGER;
        ALTER TABLE policy_settings ADD COLUMN seed_rate DOUBLE;
        """,
    ),
    Migration(
        "0065_seed_items",
        """
        -- Seeds (STATS.md section 13): known wrong values put into an audit
        -- sample's review queue to measure how often reviewers miss an error.
        -- Apart from extractions and audit_items on purpose: a seed is never
        -- an extraction, never a label, never in an estimate. Each is made at
        -- the draw from a host extraction of the week outside the sample (its
        -- document, field and cell), its value replaced by a plausible wrong
        -- one: another field's value of the same document, a digit swap, a
        -- neighbouring date.
        CREATE TABLE seed_items (
            seed_id            VARCHAR   PRIMARY KEY,  -- an item id, shown like any other
            sample_id          VARCHAR   NOT NULL,
            host_extraction_id VARCHAR   NOT NULL,     -- the document and place shown
            doc_type           VARCHAR   NOT NULL,
            field              VARCHAR   NOT NULL,
            cell               VARCHAR   NOT NULL,
            seed_value         VARCHAR   NOT NULL,     -- the wrong value shown
            true_value         VARCHAR   NOT NULL,     -- the host's value it replaces
            seed_kind          VARCHAR   NOT NULL
                CHECK (seed_kind IN ('sibling_field', 'digit_swap', 'neighbour_date')),
            source_field       VARCHAR,                -- sibling_field: where the value came from
            prn                DOUBLE    NOT NULL,     -- its place in the cell's review order
            confidence         DOUBLE    NOT NULL,     -- the host's stated confidence
            created_at         TIMESTAMP NOT NULL
        );
        """,
    ),
    Migration(
        "0066_seed_verdicts",
        """
        -- A reviewer's verdict on a seed: never a label (append-only, chained).
        -- 'correct' is a miss; 'incorrect' and 'unclear' catch the seed.
        CREATE TABLE seed_verdicts (
            seed_verdict_id VARCHAR   PRIMARY KEY,
            seed_id         VARCHAR   NOT NULL,
            sample_id       VARCHAR   NOT NULL,
            reviewer        VARCHAR   NOT NULL,
            verdict         VARCHAR   NOT NULL
                CHECK (verdict IN ('correct', 'incorrect', 'unclear')),
            judged_at       TIMESTAMP NOT NULL,
            UNIQUE (seed_id)
        );
        """,
        then=lambda con: chain_table(con, "seed_verdicts"),
    ),
    Migration(
        "0068_label_import_second_looks",
        f"""
        -- A labels file that looks again at items already judged says how its
        -- items were chosen (issue 23, must-have 8). 'verdict_dependent' (only
        -- the errors re-checked, a chosen subset) is kept in the history and
        -- left out of effective_labels, so it cannot steer an estimate;
        -- 'symmetric' (a random share of every verdict, at a known rate)
        -- counts like any label.
        CREATE TABLE label_import_second_looks (
            batch_id    VARCHAR   PRIMARY KEY,
            selection   VARCHAR   NOT NULL
                CHECK (selection IN ('verdict_dependent', 'symmetric')),
            share       DOUBLE    CHECK (share IS NULL OR (share > 0 AND share <= 1)),
            declared_by VARCHAR   NOT NULL,
            declared_at TIMESTAMP NOT NULL
        );

        -- 0015's rule, less the labels of verdict-dependent second looks.
        CREATE OR REPLACE VIEW effective_labels AS
        WITH live AS (
            SELECT * FROM labels l
            WHERE NOT EXISTS (SELECT 1 FROM labels s WHERE s.supersedes = l.label_id)
              AND NOT EXISTS (SELECT 1 FROM label_import_second_looks g
                              WHERE g.batch_id = l.import_batch_id
                                AND g.selection = 'verdict_dependent')
        ),
{_ONE_LIVE_LABEL_EACH}
        """,
        then=lambda con: chain_table(con, "label_import_second_looks"),
    ),
    Migration(
        "0069_rekeyed_values",
        """
        -- Blind re-keying (labels.rekey): a reviewer types the value without
        -- seeing the extraction's. A match is recorded as a 'correct' label
        -- too; a mismatch waits for a qa_lead's adjudication. Append-only.
        CREATE TABLE rekeyed_values (
            rekey_id      VARCHAR   PRIMARY KEY,
            extraction_id VARCHAR   NOT NULL,     -- or a seed's id
            sample_id     VARCHAR,
            reviewer      VARCHAR   NOT NULL,
            typed_value   VARCHAR,                -- NULL with typed_status 'null': absent
            typed_status  VARCHAR   NOT NULL CHECK (typed_status IN ('present', 'null')),
            matches       BOOLEAN   NOT NULL,
            keyed_at      TIMESTAMP NOT NULL,
            UNIQUE (extraction_id)
        );
        """,
        then=lambda con: chain_table(con, "rekeyed_values"),
    ),
    Migration(
        "0070_extractor_versions",
        """
        -- The extractor (model, prompt, OCR engine) version that produced each
        -- extraction: a segment beside the form version, certified on its own
        -- labels and never covered by an approval made on another. Rows
        -- stored before it existed, and files that do not say, hold 'unknown'.
        ALTER TABLE extractions ADD COLUMN extractor_version VARCHAR DEFAULT 'unknown';
        ALTER TABLE sampled_extractions ADD COLUMN extractor_version VARCHAR DEFAULT 'unknown';
        -- When each (doc_type, form_version, extractor_version) was first seen:
        -- a form version whose extractor changed lately is new in the draw
        -- (boosted) as a new form version is.
        CREATE TABLE extractor_versions (
            doc_type          VARCHAR   NOT NULL,
            form_version      VARCHAR   NOT NULL,
            extractor_version VARCHAR   NOT NULL,
            first_seen_at     TIMESTAMP NOT NULL,
            PRIMARY KEY (doc_type, form_version, extractor_version)
        );
        INSERT INTO extractor_versions
            SELECT doc_type, form_version, extractor_version, min(extracted_at)
            FROM extractions GROUP BY ALL;
        """,
    ),
    Migration(
        "0071_monitoring_resumptions",
        """
        -- Append-only. A segment whose monitoring chart alarmed is suspended in
        -- the exported policy until a person decides: revoke the stratum, or
        -- resume the segment with a reason (this row). The chart restarts at 0
        -- in the week after alarm_week.
        CREATE TABLE monitoring_resumptions (
            resumption_id     VARCHAR   PRIMARY KEY,
            decision_id       VARCHAR   NOT NULL,  -- the approval being monitored
            doc_type          VARCHAR   NOT NULL,
            field             VARCHAR   NOT NULL,
            form_version      VARCHAR   NOT NULL,
            extractor_version VARCHAR   NOT NULL,
            alarm_week        VARCHAR   NOT NULL,  -- the alarm this resumption answers
            resumed_by        VARCHAR   NOT NULL,
            role              VARCHAR   NOT NULL,
            comment           VARCHAR   NOT NULL,
            resumed_at        TIMESTAMP NOT NULL,
            evidence_id       VARCHAR              -- the chart as the person saw it
        );
        """,
    ),
)


def revoke_replaced_roles(con: duckdb.DuckDBPyConnection) -> int:
    """Record, as revocations, the roles that a later grant replaced; return how many.

    Run once by migration 0019: a grant of a different role (not ``none``,
    which still takes every role away) revokes the role held until then, at
    the time and by the author of that grant.
    """
    grants = con.execute(
        "SELECT user_name, role, granted_by, granted_at FROM user_roles"
        " ORDER BY user_name, granted_at"
    ).fetchall()
    held: dict[str, str] = {}
    rows = []
    for name, role, by, at in grants:
        before = held.get(name)
        if before is not None and role not in ("none", before):
            rows.append((name, before, by, at))
        held[name] = role
    for name, role, by, at in rows:
        con.execute("INSERT INTO role_revocations VALUES (?, ?, ?, ?)", [name, role, by, at])
    append_entries(con, [
        ("role_revocations", {"user_name": n, "role": r, "revoked_by": b, "revoked_at": a})
        for n, r, b, a in rows
    ])
    return len(rows)


def applied_migrations(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Names of the migrations recorded in this store, in order applied."""
    con.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations ("
        " name VARCHAR PRIMARY KEY, applied_at TIMESTAMP NOT NULL)"
    )
    rows = con.execute("SELECT name FROM schema_migrations ORDER BY applied_at, name").fetchall()
    return [name for (name,) in rows]


def pending_migrations(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Names of the migrations this store lacks; works on a read-only connection."""
    done = set(_recorded(con))
    return [m.name for m in MIGRATIONS if m.name not in done]


#: Migrations this fieldtrust once had and retired (their tables stay in the stores that
#: ran them): known, so a store that recorded them is not taken for a newer one's.
RETIRED = ("0006_demo_truth", "0011_demo_truth_error_type")


def unknown_migrations(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Migrations the store records that this fieldtrust does not know (a newer one ran)."""
    known = {m.name for m in MIGRATIONS} | set(RETIRED)
    return [name for name in _recorded(con) if name not in known]


def _recorded(con: duckdb.DuckDBPyConnection) -> list[str]:
    """The migrations the store records, by name (none before the first); read-only safe."""
    exists = con.sql(
        "SELECT count(*) FROM duckdb_tables()"
        " WHERE database_name = current_database() AND schema_name = 'main'"
        " AND table_name = 'schema_migrations'"
    ).fetchall()[0][0]
    if not exists:
        return []
    return [name for (name,) in con.sql("SELECT name FROM schema_migrations ORDER BY name")
            .fetchall()]


def migrate(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Apply the migrations this store lacks; return the names applied now."""
    done = set(applied_migrations(con))
    applied = []
    for migration in MIGRATIONS:
        if migration.name in done:
            continue
        con.execute("BEGIN TRANSACTION")
        try:
            con.execute(migration.sql)
            if migration.then is not None:
                migration.then(con)
            con.execute(
                "INSERT INTO schema_migrations VALUES (?, now()::TIMESTAMP)", [migration.name]
            )
            con.execute("COMMIT")
        except Exception:
            con.execute("ROLLBACK")
            raise
        applied.append(migration.name)
    return applied
