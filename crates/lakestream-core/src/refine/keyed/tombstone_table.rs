//! Writing a keyed job's tombstone table (`_lakestream/<job>/tombstones`): tombstones written
//! before their output commit (a chunk too large to go inline, a new output's first commit,
//! SCD2's stored deletes), an output's anchor and the consolidation of its inline tombstones
//! ([`pending`]), each one append on the commit loop.

use super::pending;
use crate::commit::{self, CommitSettings, Planned, Planner, TableState};
use crate::error::{Error, Result};
use crate::refine::RunContext;
use crate::storage::Lake;
use crate::table::TableHandle;
use chrono::{DateTime, Utc};
use deltalake::arrow::array::{ArrayRef, RecordBatch, StringArray, TimestampMicrosecondArray};
use deltalake::arrow::datatypes::{Field, Schema, SchemaRef};
use std::sync::Arc;

use super::tombstones::table_name;
/// What a tombstone-table commit records about an output's inline tombstones
/// ([`pending::CONSOLIDATED_PROPERTY`]).
#[derive(Debug, Clone)]
pub(crate) enum Mark {
    /// Nothing (tombstones written before their output commit).
    None,
    /// The output's anchor: set only when the table holds none for that output.
    Anchor { output_id: String, at: i64 },
    /// The output's commits up to `through` are consolidated: set unless the table is there.
    Through { output_id: String, through: i64 },
}

impl Mark {
    /// The property to set on a table at `state`; `None`: the commit is not needed.
    fn property(&self, state: &TableState) -> Option<Option<(String, String)>> {
        let current = |id: &str| {
            state
                .properties
                .get(&pending::property_key(id))
                .and_then(|v| v.parse::<i64>().ok())
        };
        let set = |id: &str, v: i64| (pending::property_key(id), v.to_string());
        match self {
            Mark::None => Some(None),
            Mark::Anchor { output_id, at } => match current(output_id) {
                Some(_) => None,
                None => Some(Some(set(output_id, *at))),
            },
            // Only forward, and only an anchored output's (an anchor is never removed).
            Mark::Through { output_id, through } => match current(output_id) {
                Some(c) if c < *through => Some(Some(set(output_id, *through))),
                _ => None,
            },
        }
    }
}

struct Write {
    batch: RecordBatch,
    mark: Mark,
}

impl Planner for Write {
    fn app_ids(&self) -> Vec<String> {
        vec![]
    }
    async fn plan(&mut self, state: &TableState) -> Result<Option<Planned>> {
        let Some(property) = self.mark.property(state) else {
            return Ok(None);
        };
        // A tombstone table written before it kept `__source_ts` gains the column (nullable).
        let base = state.schema.clone().unwrap_or_else(|| self.batch.schema());
        let schema = widened(base, std::slice::from_ref(&self.batch));
        let aligned = align(&self.batch, &schema)?;
        let properties: Vec<(String, String)> = property.into_iter().collect();
        Ok(Some(Planned {
            batch: aligned,
            schema,
            partition_columns: vec!["date".into()],
            txns: vec![],
            commit_if_empty: !properties.is_empty(),
            set_properties: properties.clone(),
            table_properties: properties,
        }))
    }
}

/// Record tombstones for the delete rows `deletes` (key and ordering columns, source types)
/// with their tie texts, in `now`'s `date` partition. Writing one twice is harmless (the
/// newest per key counts).
pub async fn write(
    lake: &Lake,
    table: &str,
    settings: &CommitSettings,
    deletes: &RecordBatch,
    columns: &[String],
    ties: Vec<String>,
    now: DateTime<Utc>,
) -> Result<()> {
    let today = now.format("%Y-%m-%d").to_string();
    let dates = vec![today; deletes.num_rows()];
    write_dated(lake, table, settings, deletes, (columns, ties), now, dates).await
}

/// The `date` partition of rows that never expire ([`expiry`](super::expiry) removes the
/// partitions dated before a cutoff): an SCD2 job's stored truncates.
pub const NEVER_EXPIRES: &str = "9999-12-31";

/// [`write`] with each row's `date` partition given (`dates`, one per row).
pub async fn write_dated(
    lake: &Lake,
    table: &str,
    settings: &CommitSettings,
    deletes: &RecordBatch,
    columns: (&[String], Vec<String>),
    now: DateTime<Utc>,
    dates: Vec<String>,
) -> Result<()> {
    let Some(batch) = dated_batch(deletes, columns, now, dates)? else {
        return Ok(());
    };
    let mut handle = TableHandle::open(lake, table)?;
    commit::append(
        lake,
        &mut handle,
        settings,
        &mut Write {
            batch,
            mark: Mark::None,
        },
    )
    .await?;
    Ok(())
}

/// [`write_dated`] in a run: to the run's side-table handle ([`RunContext::side`]), kept warm
/// after its commit.
pub(crate) async fn write_in(
    ctx: &RunContext<'_>,
    table: &str,
    deletes: &RecordBatch,
    columns: (&[String], Vec<String>),
    dates: Vec<String>,
) -> Result<()> {
    let Some(batch) = dated_batch(deletes, columns, ctx.now, dates)? else {
        return Ok(());
    };
    // As this run's plan loaded it: a newer commit makes the PUT fail and the append rebase.
    let mut handle = ctx.side_as_is(table).await?;
    append_marked(ctx, &mut handle, batch, Mark::None).await
}

/// Append `batch` (tombstone rows, possibly none) to the tombstone table behind `handle` with
/// `mark`; the handle is kept warm after its commit. A commit that set a property is read
/// back (a handle applies its own commits' files and `txn`s, not their `metaData`: a later
/// property commit planned on it would drop this one's).
pub(crate) async fn append_marked(
    ctx: &RunContext<'_>,
    handle: &mut TableHandle,
    batch: RecordBatch,
    mark: Mark,
) -> Result<()> {
    let marks = !matches!(mark, Mark::None);
    let mut write = Write { batch, mark };
    let outcome = commit::append(ctx.lake, handle, ctx.settings, &mut write).await?;
    if marks && outcome.version.is_some() {
        handle.refresh().await?;
    }
    ctx.keep(handle.warm_copy());
    Ok(())
}

/// Set `output_id`'s anchor at `at` on `job`'s tombstone table unless it holds one (creating
/// the table with the columns of `rows`, tombstone rows of which none is written).
pub(crate) async fn anchor(
    ctx: &RunContext<'_>,
    job: &str,
    rows: &RecordBatch,
    (output_id, at): (String, i64),
) -> Result<()> {
    let mut handle = ctx.side_as_is(&table_name(job)).await?;
    if pending::consolidated_through(&handle, &output_id)?.is_some() {
        return Ok(());
    }
    let mark = Mark::Anchor { output_id, at };
    append_marked(ctx, &mut handle, rows.slice(0, 0), mark).await
}

/// The tombstone batches `batches` as one, in the columns of `schema` (the tombstone table's;
/// a column it lacks is added, nullable); an empty batch of `schema` when there are none.
pub(crate) fn aligned_all(batches: &[RecordBatch], schema: SchemaRef) -> Result<RecordBatch> {
    let schema = widened(schema, batches);
    let aligned = batches
        .iter()
        .map(|b| align(b, &schema))
        .collect::<Result<Vec<_>>>()?;
    Ok(deltalake::arrow::compute::concat_batches(
        &schema, &aligned,
    )?)
}

/// `schema` with the columns of `batches` it lacks added (nullable), in first-seen order.
fn widened(schema: SchemaRef, batches: &[RecordBatch]) -> SchemaRef {
    let mut fields: Vec<Field> = schema.fields().iter().map(|f| f.as_ref().clone()).collect();
    for b in batches {
        for f in b.schema().fields() {
            if !fields.iter().any(|x| x.name() == f.name()) {
                fields.push(f.as_ref().clone().with_nullable(true));
            }
        }
    }
    Arc::new(Schema::new(fields))
}

/// `batch` in the columns of `schema` (a column it lacks: null), cast where the types differ.
fn align(batch: &RecordBatch, schema: &SchemaRef) -> Result<RecordBatch> {
    let columns = schema
        .fields()
        .iter()
        .map(|f| match batch.column_by_name(f.name()) {
            Some(c) if c.data_type() == f.data_type() => Ok(c.clone()),
            // A value the table's type cannot hold is an error, never a null key.
            Some(c) => Ok(deltalake::arrow::compute::cast_with_options(
                c,
                f.data_type(),
                &deltalake::arrow::compute::CastOptions {
                    safe: false,
                    ..Default::default()
                },
            )?),
            None => Ok(deltalake::arrow::array::new_null_array(
                f.data_type(),
                batch.num_rows(),
            )),
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(RecordBatch::try_new(schema.clone(), columns)?)
}

/// The tombstone rows of `deletes`: their key and ordering `columns` with `ties`, the time
/// written and the `date` partition of each; `None` when there is none.
pub(super) fn dated_batch(
    deletes: &RecordBatch,
    (columns, ties): (&[String], Vec<String>),
    now: DateTime<Utc>,
    dates: Vec<String>,
) -> Result<Option<RecordBatch>> {
    if deletes.num_rows() == 0 {
        return Ok(None);
    }
    let n = deletes.num_rows();
    if dates.len() != n {
        return Err(Error::Internal(format!(
            "{} dates for {n} tombstones",
            dates.len()
        )));
    }
    let mut fields = Vec::new();
    let mut cols: Vec<ArrayRef> = Vec::new();
    for c in columns {
        let (i, f) = deletes
            .schema()
            .column_with_name(c)
            .map(|(i, f)| (i, f.clone()))
            .ok_or_else(|| Error::Internal(format!("delete rows have no `{c}`")))?;
        fields.push(f.with_nullable(true));
        cols.push(deletes.column(i).clone());
    }
    fields.push(Field::new(
        "tie",
        deltalake::arrow::datatypes::DataType::Utf8,
        false,
    ));
    cols.push(Arc::new(StringArray::from(ties)));
    fields.push(Field::new(
        "deleted_at",
        crate::schema::timestamp_type(),
        false,
    ));
    cols.push(Arc::new(
        TimestampMicrosecondArray::from(vec![now.timestamp_micros(); n]).with_timezone("UTC"),
    ));
    fields.push(Field::new(
        "date",
        deltalake::arrow::datatypes::DataType::Utf8,
        false,
    ));
    cols.push(Arc::new(StringArray::from(dates)));
    let schema: SchemaRef = Arc::new(Schema::new(fields));
    Ok(Some(RecordBatch::try_new(schema, cols)?))
}
