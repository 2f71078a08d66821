//! The bronze and silver tables' own columns and properties: the contract between the CDC
//! ingestors (which write bronze) and the apply jobs (which write silver).

/// Bronze table columns every source writes (then the row's own columns). `__op` is one of
/// [`OP_INSERT`], [`OP_UPDATE`], [`OP_DELETE`], [`OP_SNAPSHOT`], [`OP_TRUNCATE`].
pub mod bronze {
    /// The change: `c`, `u`, `d`, `r` or `t` (Utf8, not null).
    pub const OP: &str = "__op";
    /// Ordering of the table's changes, compared as text (Utf8, not null).
    pub const SEQ: &str = "__seq";
    /// Commit time in the source database (Timestamp µs UTC, nullable).
    pub const SOURCE_TS: &str = "__source_ts";
    /// The Debezium record key as compact JSON (Utf8, nullable).
    pub const KEY: &str = "__key";
    /// Kafka lineage (Utf8 / Int32 / Int64, nullable).
    pub const TOPIC: &str = "__topic";
    /// Kafka partition.
    pub const PARTITION: &str = "__partition";
    /// Kafka offset.
    pub const OFFSET: &str = "__offset";
    /// S3 lineage: bucket/key, ETag, 1-based row number in the object (Utf8 / Utf8 / Int64).
    pub const OBJECT: &str = "__object";
    /// The ETag the object was read with.
    pub const ETAG: &str = "__etag";
    /// Row number (1-based, data rows only) in the object.
    pub const ROW: &str = "__row";
    /// Processing time (Timestamp µs UTC, not null).
    pub const INGESTED_AT: &str = "__ingested_at";
    /// Every bronze metadata column, in table order.
    pub const ALL: [&str; 11] = [
        OP,
        SEQ,
        SOURCE_TS,
        KEY,
        TOPIC,
        PARTITION,
        OFFSET,
        OBJECT,
        ETAG,
        ROW,
        INGESTED_AT,
    ];
    /// `__op` of an insert (Debezium `c`, DMS `I`).
    pub const OP_INSERT: &str = "c";
    /// `__op` of an update (Debezium `u`, DMS `U`).
    pub const OP_UPDATE: &str = "u";
    /// `__op` of a delete (Debezium `d`, DMS `D`); the row holds the last image.
    pub const OP_DELETE: &str = "d";
    /// `__op` of a snapshot / full-load / plain-file row (Debezium `r`, DMS full load).
    pub const OP_SNAPSHOT: &str = "r";
    /// `__op` of a truncate (Debezium `t`): no row data; every earlier change of the table is
    /// void.
    pub const OP_TRUNCATE: &str = "t";
    /// Bronze table properties (set when the table is created).
    pub const FAMILY_PROPERTY: &str = "lakestream.cdc.family";
    /// `<schema>.<table>` of the source table.
    pub const TABLE_PROPERTY: &str = "lakestream.cdc.table";
    /// Key columns, comma separated (from the Debezium record key or the config).
    pub const KEYS_PROPERTY: &str = "lakestream.cdc.keys";
    /// Where the keys came from: [`KEYS_FROM_CONFIG`] (declared), else the record key
    /// (`key-schema`: a wrapped key's schema; `key-payload`: an unwrapped key's fields).
    pub const KEYS_FROM_PROPERTY: &str = "lakestream.cdc.keys_from";
    /// [`KEYS_FROM_PROPERTY`] of keys declared in the config.
    pub const KEYS_FROM_CONFIG: &str = "config";
    /// Bronze property: the source field a Debezium table's changes are ordered by (`lsn`,
    /// `file`, `commit_lsn`, `scn`, `ts_ms`), fixed when the table is created.
    pub const POSITIONS_PROPERTY: &str = "lakestream.cdc.positions";
    /// Set by the bronze commit that dead-letters a change whose value does not fit its
    /// column's type (the source column changed type): `<column>: <bronze type> -> <what
    /// came>`. The table's apply job stops while it is set (README "CDC: schema changes").
    pub const TYPE_CHANGE_PROPERTY: &str = "lakestream.cdc.type_change";
}

/// Silver table columns added to the row's own columns.
pub mod silver {
    /// The sequence of the change the row holds (Utf8, not null).
    pub const SEQ: &str = "__seq";
    /// The source commit time of that change (Timestamp µs UTC, nullable).
    pub const SOURCE_TS: &str = "__source_ts";
    /// SCD2: when the row's version began (the change's commit time; Timestamp µs UTC).
    pub const START_AT: &str = "__START_AT";
    /// SCD2: when it ended (the next change's or the delete's commit time); null: current.
    pub const END_AT: &str = "__END_AT";
    /// SCD2: the sequence of the change that ended the row (Utf8, nullable).
    pub const END_SEQ: &str = "__END_SEQ";
    /// Silver table property: the sequence of the last truncate applied (SCD1 and SCD2).
    pub const TRUNCATED_AT_PROPERTY: &str = "lakestream.cdc.truncated_at";
    /// Silver property: the `__seq`s of truncates an operator voided (`lakestream refine <job>
    /// --void-truncate SEQ`), one per line; the apply treats them as if bronze had none.
    pub const VOID_TRUNCATES_PROPERTY: &str = "lakestream.cdc.void_truncates";
}
