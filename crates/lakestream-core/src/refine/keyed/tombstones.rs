//! Tombstones of a CDC upsert: when a delete wins for a key, the key, its ordering values and
//! its tie-break text go to the job's tombstone table (`_lakestream/<job>/tombstones`, a Delta
//! table partitioned by the processing `date`), so a late, older insert of that key is not
//! brought back. Tombstones expire `tombstone_retention` after they were written (whole `date`
//! partitions are removed by the job itself). For a CDC job (`__seq` order) the expiry
//! records the greatest `__seq` it removed on the tombstone table
//! ([`EXPIRED_THROUGH_PROPERTY`]), and an incremental run keeps out a change at or below it
//! for a key with neither a row nor a tombstone ([`keep_out_forgotten`]): it may be older
//! than a delete that was forgotten, and a deleted key must not come back. A plain upsert has
//! no such horizon: a row for the key older than the delete that arrives after expiry is
//! upserted again.

use super::incoming::{Incoming, IncomingRows, Ties};
use super::order::Encoder;
use crate::commit::{
    self, Change, CommitSettings, Fixed, Planned, Planner, Proposal, ReadScope, TableState, run,
};
use crate::error::{Error, Result};
use crate::read::read_table;
use crate::storage::Lake;
use crate::table::TableHandle;
use chrono::{DateTime, Utc};
use deltalake::arrow::array::{
    Array, ArrayRef, AsArray, RecordBatch, StringArray, TimestampMicrosecondArray, UInt32Array,
};
use deltalake::arrow::compute::take_record_batch;
use deltalake::arrow::datatypes::{Field, Schema, SchemaRef};
use deltalake::protocol::DeltaOperation;
use std::collections::HashMap;
use std::sync::Arc;

/// The tombstone table of a job (named in one place, with every other table of the pipeline:
/// [`lakestream_formats::tables`]).
pub fn table_name(job: &str) -> String {
    lakestream_formats::tables::tombstone_table(job)
}

/// Tombstone table property: the greatest `__seq` of the tombstones expired so far (CDC jobs).
pub const EXPIRED_THROUGH_PROPERTY: &str = "lakestream.tombstones.expired_through";

/// Key -> (ordering bytes, tie text) of the newest tombstone per key.
pub type Tombstones = HashMap<Vec<u8>, (Vec<u8>, String)>;

/// Load every live tombstone of the table (it only holds deletes within the retention).
pub async fn load(lake: &Lake, table: &str, key: &Encoder, order: &Encoder) -> Result<Tombstones> {
    let batch = match read_table(lake, table, None).await {
        Ok(b) => b,
        Err(Error::TableNotFound(_)) => return Ok(Tombstones::new()),
        Err(e) => return Err(e),
    };
    let keys = key.encode(&batch, table)?;
    let orders = order.encode(&batch, table)?;
    let ties = batch
        .column_by_name("tie")
        .ok_or_else(|| Error::Internal(format!("tombstone table `{table}` has no `tie`")))?
        .as_string::<i32>()
        .clone();
    let mut out = Tombstones::new();
    for (i, (k, o)) in keys.into_iter().zip(orders).enumerate() {
        let t = ties.value(i).to_string();
        let newer = out.get(&k).is_none_or(|(bo, bt)| (&o, &t) > (bo, bt));
        if newer {
            out.insert(k, (o, t));
        }
    }
    Ok(out)
}

/// Mark the winners a tombstone keeps out as older: a delete with greater ordering values
/// keeps a row out; at equal ordering values the delete wins over a non-delete, and a delete is
/// never older than an equal tombstone (its own, from an earlier attempt or run that did not
/// commit the output).
pub(crate) async fn keep_out_deleted(
    lake: &Lake,
    src: &IncomingRows<'_>,
    incoming: &mut [Incoming],
) -> Result<()> {
    let table = table_name(&src.cfg.job);
    let tombs = load(lake, &table, &src.key_enc, &src.order_enc).await?;
    for inc in incoming.iter_mut() {
        let Some((o, _)) = tombs.get(src.keys.row(inc.row as usize).data()) else {
            continue;
        };
        let cmp = o.as_slice().cmp(src.order_of(inc));
        if cmp.is_gt() || (cmp.is_eq() && !inc.delete) {
            inc.older = true;
        } else {
            inc.after = Some(o.clone());
        }
    }
    Ok(())
}

/// CDC, after the winners met the output's rows: keep out a winner that is not a delete, has
/// neither an output row nor a tombstone, and whose `__seq` is at or below the expired
/// tombstones' greatest ([`EXPIRED_THROUGH_PROPERTY`]): it may be older than a forgotten delete
/// of its key. Plain-file `__seq`s (`0|<row time>|...`) order by the rows' own times, which a
/// back-fill may set in the past, so they are not kept out. Returns how many were kept out.
pub(crate) async fn keep_out_forgotten(
    lake: &Lake,
    src: &IncomingRows<'_>,
    incoming: &mut [Incoming],
) -> Result<usize> {
    let table = table_name(&src.cfg.job);
    let handle = match TableHandle::open_existing(lake, &table).await {
        Ok(h) => h,
        Err(Error::TableNotFound(_)) => return Ok(0),
        Err(e) => return Err(e),
    };
    let Some(horizon) = handle.property(EXPIRED_THROUGH_PROPERTY)? else {
        return Ok(0);
    };
    let seq_column = src
        .u
        .order_by
        .first()
        .map(String::as_str)
        .unwrap_or_default();
    let at = RecordBatch::try_from_iter([(
        seq_column,
        Arc::new(StringArray::from(vec![horizon])) as ArrayRef,
    )])?;
    let horizon = src.order_enc.encode(&at, &table)?.remove(0);
    let seq = src
        .rows
        .column_by_name(seq_column)
        .and_then(|c| c.as_string_opt::<i32>())
        .ok_or_else(|| Error::Internal("CDC changes have no text `__seq`".into()))?;
    let mut kept_out = 0;
    for inc in incoming.iter_mut() {
        let forgotten = !inc.older && !inc.delete && !inc.replaces && inc.after.is_none();
        if forgotten
            && src.order_of(inc) <= horizon.as_slice()
            && !seq.value(inc.row as usize).starts_with("0|")
        {
            inc.older = true;
            kept_out += 1;
        }
    }
    Ok(kept_out)
}

/// The deletes that won, to be recorded as tombstones before the output commit.
pub(crate) struct Deletes {
    rows: RecordBatch,
    columns: Vec<String>,
    ties: Vec<String>,
}

impl Deletes {
    /// The winners that are deletes and not older than the output (their tie texts computed
    /// into `ties`); `None` when there are none.
    pub(crate) fn of(
        src: &IncomingRows<'_>,
        incoming: &[Incoming],
        ties: &mut Ties,
    ) -> Result<Option<Self>> {
        let mut deleted: Vec<usize> = (0..incoming.len())
            .filter(|&w| !incoming[w].older && incoming[w].delete)
            .collect();
        src.fill_ties(incoming, ties, deleted.clone())?;
        deleted.sort_by_key(|&w| incoming[w].row);
        if deleted.is_empty() {
            return Ok(None);
        }
        let idx = UInt32Array::from(deleted.iter().map(|&w| incoming[w].row).collect::<Vec<_>>());
        Ok(Some(Self {
            rows: take_record_batch(&src.rows, &idx)?,
            columns: src.u.key.iter().chain(&src.u.order_by).cloned().collect(),
            ties: deleted
                .iter()
                .map(|w| ties.get(w).cloned().unwrap_or_default())
                .collect(),
        }))
    }

    /// Record them in `job`'s tombstone table.
    pub(crate) async fn write(
        &self,
        lake: &Lake,
        job: &str,
        settings: &CommitSettings,
        now: DateTime<Utc>,
    ) -> Result<()> {
        write(
            lake,
            &table_name(job),
            settings,
            &self.rows,
            &self.columns,
            self.ties.clone(),
            now,
        )
        .await
    }
}

struct Write {
    batch: RecordBatch,
}

impl Planner for Write {
    fn app_ids(&self) -> Vec<String> {
        vec![]
    }
    async fn plan(&mut self, state: &TableState) -> Result<Option<Planned>> {
        let schema = state.schema.clone().unwrap_or_else(|| self.batch.schema());
        Ok(Some(Planned {
            batch: self.batch.clone(),
            schema,
            partition_columns: vec!["date".into()],
            txns: vec![],
            set_properties: vec![],
            table_properties: vec![],
            commit_if_empty: false,
        }))
    }
}

/// Record tombstones for the delete rows `deletes` (key and ordering columns, source types)
/// with their tie texts. Writing one twice is harmless (the newest per key counts).
pub async fn write(
    lake: &Lake,
    table: &str,
    settings: &CommitSettings,
    deletes: &RecordBatch,
    columns: &[String],
    ties: Vec<String>,
    now: DateTime<Utc>,
) -> Result<()> {
    if deletes.num_rows() == 0 {
        return Ok(());
    }
    let n = deletes.num_rows();
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
    cols.push(Arc::new(StringArray::from(vec![
        now.format("%Y-%m-%d")
            .to_string();
        n
    ])));
    let schema: SchemaRef = Arc::new(Schema::new(fields));
    let mut handle = TableHandle::open(lake, table)?;
    let mut planner = Write {
        batch: RecordBatch::try_new(schema, cols)?,
    };
    commit::append(lake, &mut handle, settings, &mut planner).await?;
    Ok(())
}

/// Remove tombstones written before `now - retention` (whole `date` partitions); with
/// `horizon` (a CDC job's `__seq` column) the greatest value removed is kept in
/// [`EXPIRED_THROUGH_PROPERTY`] in the same commit.
pub async fn expire(
    lake: &Lake,
    table: &str,
    settings: &CommitSettings,
    now: DateTime<Utc>,
    retention: std::time::Duration,
    horizon: Option<&str>,
) -> Result<usize> {
    let mut handle = TableHandle::open(lake, table)?;
    if !handle.refresh().await? {
        return Ok(0);
    }
    let cutoff = (now - chrono::Duration::from_std(retention).unwrap_or(chrono::Duration::MAX))
        .format("%Y-%m-%d")
        .to_string();
    let removes: Vec<deltalake::kernel::Remove> = handle
        .live_files()?
        .iter()
        .filter(|f| {
            f.partition_values()
                .get("date")
                .and_then(|d| d.as_deref())
                .is_some_and(|d| d < cutoff.as_str())
        })
        .map(|f| f.remove_action(true))
        .collect();
    if removes.is_empty() {
        return Ok(0);
    }
    let n = removes.len();
    let schema = handle.arrow_schema()?;
    let properties = match horizon {
        Some(column) => expired_through(lake, &handle, column, &cutoff)
            .await?
            .map(|h| vec![(EXPIRED_THROUGH_PROPERTY.to_string(), h)])
            .unwrap_or_default(),
        None => vec![],
    };
    let change = Change {
        read_version: handle.version(),
        properties,
        operation: DeltaOperation::Delete {
            predicate: Some(format!("date < '{cutoff}'")),
        },
        adds: vec![],
        removes,
        txns: vec![],
        scope: ReadScope::Files,
        cdc_files: vec![],
    };
    let mut planner = Fixed(Some(Proposal {
        change,
        schema,
        create: None,
    }));
    // Another run expired them first (a conflict stops it), or storage failed: the next run
    // tries again.
    match run(&mut handle, settings, &mut planner).await {
        Ok(ran) => Ok(if ran.landed.is_some() { n } else { 0 }),
        Err(e) if e.is_retryable() => Ok(0),
        Err(e) => Err(e),
    }
}

/// The greatest `column` value of the tombstones dated before `cutoff`, or the one recorded
/// before when that is greater.
async fn expired_through(
    lake: &Lake,
    handle: &TableHandle,
    column: &str,
    cutoff: &str,
) -> Result<Option<String>> {
    let table = handle.name();
    let rows = read_table(lake, table, handle.version()).await?;
    let (Some(values), Some(dates)) = (
        rows.column_by_name(column)
            .and_then(|c| c.as_string_opt::<i32>()),
        rows.column_by_name("date")
            .and_then(|c| c.as_string_opt::<i32>()),
    ) else {
        return Ok(None);
    };
    let removed = (0..rows.num_rows())
        .filter(|&i| dates.is_valid(i) && values.is_valid(i) && dates.value(i) < cutoff)
        .map(|i| values.value(i))
        .max();
    let before = handle.property(EXPIRED_THROUGH_PROPERTY)?;
    Ok(match (removed, before) {
        (Some(r), Some(b)) => Some(b.max(r.to_string())),
        (Some(r), None) => Some(r.to_string()),
        (None, b) => b,
    })
}
