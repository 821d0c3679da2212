//! The statements the maestro source runs on Maestro's database (`docs/maestro-database.md` §12), written
//! once here. Column-targeted writes only on `resources`; nothing ever touches `server_instances`
//! or `event_instances`; no migrations.

/// How long a batch waits for a lock ([`LOCK_AND_READ_EVENTS`]).
macro_rules! batch_lock_timeout {
    () => {
        "250ms"
    };
}
pub const BATCH_LOCK_TIMEOUT: &str = batch_lock_timeout!();

/// A batch of events, each try-locked with Maestro's `events` lock and read, and this replica's
/// send lock of each resource the batch may send waited for, in one statement. `$1` is a JSON
/// array of `{"n": position, "id": event id, "a": key, "b": key, "s": whether it may be sent}`;
/// `$2` is this replica's number. One row per entry: `n`, `locked`, `found`, the event's
/// `source`, `source_id`, `event_type`, and whether it is reconciled.
///
/// A send lock is conductor's own (`bigint`, a lock space Maestro does not use): the hash of the
/// resource id seeded with the replica's number, so replicas, which send to different agents,
/// never wait for each other. They are taken in ascending key order (the aggregate reads its
/// sorted input in order), so two batches never wait for each other in a cycle, and held until
/// the transaction ends: the batch reads the resources in a later statement, whose snapshot is
/// taken after the locks, and sends them before it commits, so a batch that follows sends the
/// same or a newer row, never an older one.
///
/// The batch's waits for a lock are bounded (`lock_timeout`, set for the transaction before any
/// lock is taken): the plugin's calls run one at a time, so a batch held up by a row another
/// session keeps locked (Maestro marking the same event, say) would hold up every cluster's
/// events. After [`BATCH_LOCK_TIMEOUT`] the batch fails and is tried again with backoff, its
/// events sent again (harmless), and the batches behind it go on.
///
/// The statement's snapshot is taken before its locks: an event another replica reconciled and
/// unlocked meanwhile may read as unreconciled, and is then delivered and marked once more
/// (harmless: `docs/maestro-database.md` §4.2, §7.3). Each row is looked up by its primary key (`LATERAL`):
/// a plain join lets the planner, which cannot see how few ids the JSON holds, scan all of
/// `events`, and a batch would cost more as the table grows.
pub const LOCK_AND_READ_EVENTS: &str = concat!(
    "WITH bounded AS MATERIALIZED (SELECT set_config('lock_timeout', '",
    batch_lock_timeout!(),
    "', true)), ev AS MATERIALIZED (\
     SELECT q.n, q.s, pg_try_advisory_xact_lock(q.a, q.b) AS locked, \
     e.id IS NOT NULL AS found, e.source AS event_source, e.source_id, e.event_type, \
     e.reconciled_date IS NOT NULL AS reconciled \
     FROM bounded, json_to_recordset($1::json) AS q(n int, id text, a int, b int, s boolean) \
     LEFT JOIN LATERAL (SELECT * FROM events WHERE id = q.id AND deleted_at IS NULL OFFSET 0) e ON true), \
     sends AS MATERIALIZED (SELECT count(pg_advisory_xact_lock(k)) AS held FROM (\
     SELECT DISTINCT hashtextextended(source_id, $2::int8) AS k FROM ev \
     WHERE s AND event_source = 'Resources' ORDER BY k) keys) \
     SELECT ev.*, sends.held FROM ev CROSS JOIN sends"
);
/// The consumer of each event of `$1` (a JSON array of ids), as one JSON array in their order
/// (`null` where the event or its resource is gone): one row however many ids, each looked up by
/// primary key.
pub const CONSUMERS_OF_EVENTS: &str = "SELECT json_agg(r.consumer_name ORDER BY q.n)::text AS consumers \
     FROM json_array_elements_text($1::json) WITH ORDINALITY AS q(id, n) \
     LEFT JOIN LATERAL (SELECT source_id FROM events WHERE id = q.id OFFSET 0) e ON true \
     LEFT JOIN LATERAL (SELECT consumer_name FROM resources WHERE id = e.source_id OFFSET 0) r ON true";
/// Marks the events of `$2` (a JSON array of ids) reconciled at `$1`, found by primary key
/// (`= ANY(ARRAY(…))`, not `IN (SELECT …)`, which scans the table).
pub const MARK_RECONCILED: &str = "UPDATE events SET reconciled_date = $1, updated_at = $1 \
     WHERE id = ANY(ARRAY(SELECT json_array_elements_text($2::json)))";
pub const PURGE_RECONCILED: &str = "DELETE FROM events WHERE reconciled_date IS NOT NULL";
/// A page of the events to (re-)handle, in the order of their ids, after id `$2`: the
/// unreconciled ones, and, with `$1` set (after a lost LISTEN), those written since `$1` (another
/// replica may have reconciled them for its own agents while this one was not listening). `$3`
/// rows at most. In id order, the primary key: a backlog of any size is paged through its index,
/// each page stopping at its last row, where an order by `created_at` (no index) would sort every
/// waiting event for each page.
pub const PENDING_PAGE: &str = "SELECT id FROM events WHERE deleted_at IS NULL \
     AND (reconciled_date IS NULL OR created_at >= $1::timestamptz) \
     AND id > $2::text ORDER BY id LIMIT $3";
/// How many events wait unreconciled, and the age in seconds of the oldest of those among `$1`
/// (a JSON list of ids: the ones this replica is trying again), 0 without one.
pub const UNRECONCILED: &str = "SELECT \
     (SELECT count(*) FROM events WHERE reconciled_date IS NULL AND deleted_at IS NULL)::int8 AS waiting, \
     COALESCE((SELECT EXTRACT(EPOCH FROM now() - min(created_at)) FROM events \
       WHERE id = ANY(ARRAY(SELECT json_array_elements_text($1::json))) AND reconciled_date IS NULL), 0)::float8 AS oldest";
/// Maestro's schema is in place: its migrations table holds the last migration.
pub const SCHEMA_PRESENT: &str = "SELECT to_regclass('public.migrations') IS NOT NULL AS present";
pub const LAST_MIGRATION: &str = "SELECT id FROM migrations WHERE id = $1";

/// The columns of [`crate::spec::ResourceRow`], JSON as text.
macro_rules! resource_columns {
    () => {
        "id, consumer_name, version, source, payload::text, status::text, created_at, deleted_at"
    };
}
/// The resources of the events of `$1` (a JSON array of event ids) whose `source` is
/// `Resources`, each once, unscoped, each event and resource found by primary key. It needs
/// nothing from [`LOCK_AND_READ_EVENTS`], so it is sent with it, but it runs after it: its
/// snapshot follows the send locks that statement takes.
pub const READ_RESOURCES_OF_EVENTS: &str = concat!(
    "SELECT r.* FROM (SELECT DISTINCT e.source_id FROM json_array_elements_text($1::json) AS q(id) \
     JOIN LATERAL (SELECT source_id FROM events WHERE id = q.id AND source = 'Resources' OFFSET 0) e ON true) s \
     JOIN LATERAL (SELECT ",
    resource_columns!(),
    " FROM resources WHERE id = s.source_id OFFSET 0) r ON true"
);
/// Maestro's `resource_status` locks of a batch of status updates, in one statement: `$1` is a
/// JSON array of `{"a": key, "b": key}` pairs. They are taken in ascending key order (the
/// aggregate reads its sorted input in order), so two batches — of this replica or another —
/// never wait for each other in a cycle; Maestro holds one such lock at a time. Held until the
/// transaction ends. The targets are read in the next statement, whose snapshot follows the locks
/// (a statement's snapshot is taken before the locks it takes).
pub const LOCK_STATUSES: &str = "SELECT count(pg_advisory_xact_lock(k.a, k.b)) AS held FROM (\
     SELECT DISTINCT a, b FROM json_to_recordset($1::json) AS q(a int, b int) ORDER BY a, b) k";
/// [`LOCK_STATUSES`] without waiting: each pair and whether this transaction now holds it.
pub const TRY_LOCK_STATUSES: &str = "SELECT k.a, k.b, pg_try_advisory_xact_lock(k.a, k.b) AS held FROM (\
     SELECT DISTINCT a, b FROM json_to_recordset($1::json) AS q(a int, b int) ORDER BY a, b) k";
/// What status updates are judged against ([`crate::status::StatusTarget`]): the resources of
/// `$1` (a JSON array of ids), unscoped, each found by primary key, with only the `metadata` of
/// its payload (a manifest may be large, and a status update copies nothing else of it) and only
/// the `sequenceid` of its status, as JSON (the status is parsed once, by PostgreSQL). A row per
/// resource found, with its `id`.
pub const READ_STATUS_TARGETS: &str = "SELECT q.id, r.consumer_name, r.version, r.payload->'metadata' AS metadata, \
     r.status IS NOT NULL AS has_status, r.status->'sequenceid' AS sequence \
     FROM json_array_elements_text($1::json) AS q(id) \
     JOIN LATERAL (SELECT consumer_name, version, payload, status FROM resources WHERE id = q.id OFFSET 0) r ON true";
/// One resource, unscoped (soft-deleted rows too).
pub const READ_RESOURCE: &str = concat!("SELECT ", resource_columns!(), " FROM resources WHERE id = $1 LIMIT 1");
/// A consumer's resources for resync: unscoped, no source filter.
pub const LIST_RESOURCES: &str = concat!(
    "SELECT ",
    resource_columns!(),
    " FROM resources WHERE consumer_name = $1"
);

pub const HARD_DELETE: &str = "DELETE FROM resources WHERE id = $1";
/// A batch's statuses stored, a `StatusUpdate` row for each and Maestro's doorbell for each,
/// `pg_notify('status_events', id)` (Maestro's listener reads one id a notification), in one
/// statement. `$1` is a JSON array of `{"id": resource, "status": …, "event": status event id,
/// "last": whether it is the resource's last status of the batch}`, in the order they were
/// decided; `$2` the time. Each resource takes its last status; each update gets its event, in
/// order. A data-modifying `WITH` runs whether or not the query reads it, so the events are
/// written even for a row that has just gone, as one update at a time would write them.
pub const STORE_STATUSES: &str = "WITH e AS (INSERT INTO status_events \
     (id, created_at, updated_at, deleted_at, resource_id, resource_source, resource_type, payload, status, status_event_type, reconciled_date) \
     SELECT w.event, $2, $2, NULL, w.id, '', '', NULL, NULL, 'StatusUpdate', NULL \
     FROM ROWS FROM (json_to_recordset($1::json) AS (id text, event text)) WITH ORDINALITY AS w(id, event, n) \
     ORDER BY w.n RETURNING id), \
     l AS MATERIALIZED (SELECT * FROM json_to_recordset($1::json) AS l(id text, status json, last boolean) WHERE l.last), \
     stored AS (UPDATE resources SET status = (SELECT l.status FROM l WHERE l.id = resources.id), updated_at = $2 \
     WHERE id = ANY(ARRAY(SELECT l.id FROM l))) \
     SELECT count(pg_notify('status_events', id)) AS notified FROM e";
/// A `StatusDelete` row (with what Maestro needs to tell the source) and the doorbell.
pub const INSERT_STATUS_DELETE: &str = "WITH e AS (INSERT INTO status_events \
     (id, created_at, updated_at, deleted_at, resource_id, resource_source, resource_type, payload, status, status_event_type, reconciled_date) \
     VALUES ($1, $2, $2, NULL, $3, $4, '', $5::json, $6::json, 'StatusDelete', NULL) RETURNING id) \
     SELECT pg_notify('status_events', id) FROM e";
