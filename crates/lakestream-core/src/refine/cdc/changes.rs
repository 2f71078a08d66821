//! The changes of one CDC apply run: what the bronze table gained since the silver `txn` (the
//! one chunk reader, [`read_next`]; the first run reads bronze's snapshot, [`read_snapshot`]), with its key columns resolved (the job's `keys`, else the
//! bronze property `lakestream.cdc.keys`), the lineage columns dropped, one change per
//! (key, `__seq`) (a redelivered change is kept once) and the result sorted by key then
//! `__seq`, each `__seq` ranked by the family's position resets, tombstones placed in the run
//! ([`compacted`]) and the run checked for positions that went back ([`positions`]). SCD1 and
//! SCD2 both start here.

use super::{compacted, positions};
use crate::error::{Error, Result};
use crate::refine::context::RunContext;
use crate::refine::source::{SourceRead, read_next, read_snapshot};
use deltalake::arrow::array::{
    ArrayRef, AsArray, BooleanArray, RecordBatch, TimestampMicrosecondArray, UInt32Array,
};
use deltalake::arrow::compute::{cast, filter_record_batch, take_record_batch};
use deltalake::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use deltalake::arrow::row::{RowConverter, SortField};
use lakestream_formats::config::bronze;
use lakestream_formats::refine::RefineJob;
use lakestream_formats::refine::cdc::CdcApply;
use std::sync::Arc;

/// Bronze columns an apply keeps besides the key and row columns, in output order.
pub const KEPT: [&str; 4] = [
    bronze::OP,
    bronze::SEQ,
    bronze::SOURCE_TS,
    bronze::INGESTED_AT,
];

/// What one apply run read.
pub struct ChangeRead {
    /// The chunk read (source handle, chunk, versions); its `batches` were moved into
    /// [`changes`](Self::changes) and are empty.
    pub read: SourceRead,
    /// The key columns.
    pub keys: Vec<String>,
    /// The changes: key columns, row columns, `__op`, `__seq` (Utf8), `__source_ts`,
    /// `__ingested_at`; one per (key, `__seq`), sorted by key then `__seq`. A truncate's key
    /// columns are null.
    pub changes: RecordBatch,
}

/// Read the changes bronze gained after version `consumed` (the silver `txn`). `None`: the
/// bronze table does not exist yet (the caller reports `waiting_for`).
pub(crate) async fn read_changes(
    ctx: &RunContext<'_>,
    cfg: &RefineJob,
    apply: &CdcApply,
    (consumed, voided): (Option<u64>, &[String]),
) -> Result<Option<ChangeRead>> {
    // The first run (a new silver, or one rebuilt) reads bronze's snapshot: bronze is
    // append-only, so its live rows are every change it holds, with no need for its early log.
    let read = match consumed {
        None => read_snapshot(ctx, cfg, &apply.source).await?,
        Some(_) => read_next(ctx, cfg, &apply.source, consumed).await?,
    };
    let Some(mut read) = read else {
        return Ok(None);
    };
    refuse_type_change(cfg, apply, &read)?;
    let keys = resolve_keys(cfg, apply, &read)?;
    let rows = read.rows()?;
    read.batches = Vec::new();
    let changes = project(&rows, &keys, &apply.source, &cfg.job)?;
    let changes = without_voided(&changes, voided)?;
    let changes = positions::apply_resets(&changes, &apply.position_resets)?;
    let changes = compacted::place_tombstones(
        &changes,
        &rows,
        &keys,
        &read.handle,
        (&apply.position_resets, consumed.is_none()),
    )
    .await?;
    let changes = one_per_key_and_seq(&changes, &keys, &apply.source)?;
    positions::check(&changes, None, &keys, who(cfg, apply))?;
    Ok(Some(ChangeRead {
        read,
        keys,
        changes,
    }))
}

/// `changes` without the truncates an operator voided (their bronze `__seq`s, `voided`).
fn without_voided(changes: &RecordBatch, voided: &[String]) -> Result<RecordBatch> {
    if voided.is_empty() {
        return Ok(changes.clone());
    }
    let text = |name: &str| {
        changes
            .column_by_name(name)
            .and_then(|c| c.as_string_opt::<i32>())
            .ok_or_else(|| Error::Internal(format!("changes have no text `{name}`")))
    };
    let (op, seq) = (text(bronze::OP)?, text(bronze::SEQ)?);
    let keep: BooleanArray = (0..changes.num_rows())
        .map(|i| {
            let void =
                op.value(i) == bronze::OP_TRUNCATE && voided.iter().any(|v| v == seq.value(i));
            Some(!void)
        })
        .collect();
    Ok(filter_record_batch(changes, &keep)?)
}

/// The job, its bronze table and its family: who a [`positions`] error names.
pub(crate) fn who<'a>(
    cfg: &'a RefineJob,
    apply: &'a CdcApply,
) -> (&'a str, &'a str, Option<&'a str>) {
    (&cfg.job, &apply.source, apply.family.as_deref())
}

/// `Err` while bronze records a source column's type change
/// ([`bronze::TYPE_CHANGE_PROPERTY`]): a change of it was dead-lettered, so applying the rest
/// would let silver diverge from the source without a word.
fn refuse_type_change(cfg: &RefineJob, apply: &CdcApply, read: &SourceRead) -> Result<()> {
    let snapshot = read.handle.snapshot()?;
    let Some(change) = snapshot
        .metadata()
        .configuration()
        .get(bronze::TYPE_CHANGE_PROPERTY)
    else {
        return Ok(());
    };
    Err(Error::Schema {
        table: apply.source.clone(),
        reason: format!(
            "refine job `{}` stops: a change did not fit its bronze column ({change}), so the \
             source column changed type. That change is in the dead-letter table with its bytes; \
             applying the others would let silver diverge from the source. Rebuild the table \
             with the new type (README \"CDC: schema changes\": remove bronze `{}`, silver `{}` \
             and the job's side table, then re-snapshot the source table)",
            cfg.job, apply.source, cfg.output
        ),
    })
}

/// The job's key columns, else the bronze table's `lakestream.cdc.keys` property.
pub fn resolve_keys(cfg: &RefineJob, apply: &CdcApply, read: &SourceRead) -> Result<Vec<String>> {
    if !apply.keys.is_empty() {
        return Ok(apply.keys.clone());
    }
    let snapshot = read.handle.snapshot()?;
    let config = snapshot.metadata().configuration();
    let from_property: Vec<String> = config
        .get(bronze::KEYS_PROPERTY)
        .map(|v| {
            v.split(',')
                .map(str::trim)
                .filter(|k| !k.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    if !from_property.is_empty() {
        return Ok(from_property);
    }
    let table = config
        .get(bronze::TABLE_PROPERTY)
        .cloned()
        .unwrap_or_else(|| "<schema>.<table>".into());
    let family = apply.family.as_deref().unwrap_or("..");
    Err(Error::Config(format!(
        "refine job `{}`: the bronze table `{}` names no key columns (no `{}` property): declare \
         them as `cdc[..].keys.\"{table}\" = [\"id\"]` in the `[[cdc]]` block of family `{family}` \
         (or `keys` of a hand-written `[refine.cdc]` job)",
        cfg.job,
        apply.source,
        bronze::KEYS_PROPERTY
    )))
}

/// Key columns, row columns (bronze order), then [`KEPT`]; lineage columns dropped, `__seq` as
/// Utf8, a missing `__source_ts` / `__ingested_at` as null.
fn project(rows: &RecordBatch, keys: &[String], table: &str, job: &str) -> Result<RecordBatch> {
    let schema = rows.schema();
    let missing = |c: &str| Error::Schema {
        table: table.to_string(),
        reason: format!(
            "no column `{c}` (refine job `{job}` applies it as a CDC bronze table: see \
             ARCHITECTURE.md \"Bronze: one schema for every source\")"
        ),
    };
    let mut fields: Vec<Field> = Vec::new();
    let mut columns: Vec<ArrayRef> = Vec::new();
    for k in keys {
        let (i, f) = schema.column_with_name(k).ok_or_else(|| missing(k))?;
        fields.push(f.as_ref().clone().with_nullable(true));
        columns.push(rows.column(i).clone());
    }
    for (i, f) in schema.fields().iter().enumerate() {
        if keys.contains(f.name()) || bronze::ALL.contains(&f.name().as_str()) {
            continue;
        }
        fields.push(f.as_ref().clone().with_nullable(true));
        columns.push(rows.column(i).clone());
    }
    for c in KEPT {
        match schema.column_with_name(c) {
            Some((i, f)) if c == bronze::OP || c == bronze::SEQ => {
                fields.push(Field::new(c, DataType::Utf8, false));
                columns.push(
                    cast(rows.column(i), &DataType::Utf8).map_err(|e| Error::Schema {
                        table: table.to_string(),
                        reason: format!("`{c}` ({}) is not text: {e}", f.data_type()),
                    })?,
                );
            }
            Some((i, f)) => {
                fields.push(f.as_ref().clone().with_nullable(true));
                columns.push(rows.column(i).clone());
            }
            None if c == bronze::OP || c == bronze::SEQ => return Err(missing(c)),
            None => {
                fields.push(Field::new(c, crate::schema::timestamp_type(), true));
                columns.push(Arc::new(
                    TimestampMicrosecondArray::from(vec![None::<i64>; rows.num_rows()])
                        .with_timezone("UTC"),
                ) as ArrayRef);
            }
        }
    }
    // `__op` / `__seq` must not be null: a change without them cannot be applied or ordered.
    for (f, c) in fields.iter().zip(&columns) {
        if (f.name() == bronze::OP || f.name() == bronze::SEQ) && c.null_count() > 0 {
            return Err(Error::Schema {
                table: table.to_string(),
                reason: format!(
                    "`{}` is null in {} change(s): every bronze change needs an operation and a \
                     sequence; fix the writer of the bronze table",
                    f.name(),
                    c.null_count()
                ),
            });
        }
    }
    let out: SchemaRef = Arc::new(Schema::new(fields));
    Ok(RecordBatch::try_new(out, columns)?)
}

/// One change per (key, `__seq`) (the first delivered), sorted by key then `__seq`.
fn one_per_key_and_seq(changes: &RecordBatch, keys: &[String], table: &str) -> Result<RecordBatch> {
    let schema = changes.schema();
    let names: Vec<&str> = keys
        .iter()
        .map(String::as_str)
        .chain([bronze::SEQ])
        .collect();
    let mut cols: Vec<ArrayRef> = Vec::new();
    let mut sort = Vec::new();
    for n in names {
        let (i, f) = schema.column_with_name(n).ok_or_else(|| Error::Schema {
            table: table.to_string(),
            reason: format!("no column `{n}`"),
        })?;
        sort.push(SortField::new(f.data_type().clone()));
        cols.push(changes.column(i).clone());
    }
    let rows = RowConverter::new(sort)?.convert_columns(&cols)?;
    let mut idx: Vec<u32> = (0..changes.num_rows() as u32).collect();
    // Stable: of equal (key, `__seq`) the first delivered stays first.
    idx.sort_by(|a, b| rows.row(*a as usize).cmp(&rows.row(*b as usize)));
    idx.dedup_by(|b, a| rows.row(*a as usize) == rows.row(*b as usize));
    if idx.len() == changes.num_rows() && idx.iter().enumerate().all(|(i, v)| i as u32 == *v) {
        return Ok(changes.clone());
    }
    Ok(take_record_batch(changes, &UInt32Array::from(idx))?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use deltalake::arrow::array::{AsArray, Int64Array, StringArray};
    use deltalake::arrow::datatypes::Int64Type;

    #[test]
    fn lineage_dropped_duplicates_kept_once_sorted_by_key_then_seq() -> Result<()> {
        let rows = RecordBatch::try_from_iter([
            (
                "__op",
                Arc::new(StringArray::from(vec!["u", "c", "u", "c", "d"])) as ArrayRef,
            ),
            (
                "__seq",
                Arc::new(StringArray::from(vec!["3", "1", "3", "2", "4"])) as ArrayRef,
            ),
            (
                "__topic",
                Arc::new(StringArray::from(vec!["t", "t", "t", "t", "t"])) as ArrayRef,
            ),
            (
                "amount",
                Arc::new(Int64Array::from(vec![30, 10, 31, 20, 40])) as ArrayRef,
            ),
            (
                "id",
                Arc::new(Int64Array::from(vec![1, 1, 1, 2, 2])) as ArrayRef,
            ),
        ])?;
        let p = project(&rows, &["id".to_string()], "b", "j")?;
        let names: Vec<String> = p
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect();
        assert_eq!(
            names,
            [
                "id",
                "amount",
                "__op",
                "__seq",
                "__source_ts",
                "__ingested_at"
            ]
        );
        let out = one_per_key_and_seq(&p, &["id".to_string()], "b")?;
        let ids: Vec<i64> = out.column(0).as_primitive::<Int64Type>().values().to_vec();
        let amounts: Vec<i64> = out.column(1).as_primitive::<Int64Type>().values().to_vec();
        let seqs: Vec<&str> = out.column(3).as_string::<i32>().iter().flatten().collect();
        assert_eq!(ids, [1, 1, 2, 2]);
        assert_eq!(seqs, ["1", "3", "2", "4"]);
        // The first delivery of (1, "3") is kept.
        assert_eq!(amounts, [10, 30, 20, 40]);
        Ok(())
    }

    #[test]
    fn a_missing_sequence_is_a_schema_error() {
        let rows = RecordBatch::try_from_iter([
            ("__op", Arc::new(StringArray::from(vec!["c"])) as ArrayRef),
            ("id", Arc::new(Int64Array::from(vec![1])) as ArrayRef),
        ])
        .unwrap_or_else(|_| RecordBatch::new_empty(Arc::new(Schema::empty())));
        let e = project(&rows, &["id".to_string()], "b", "j").err();
        assert!(matches!(e, Some(Error::Schema { reason, .. }) if reason.contains("__seq")));
    }
}
