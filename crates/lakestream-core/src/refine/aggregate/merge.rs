//! Steps 3 and 4 of an aggregate run (the module header of [`aggregate`](super) lists them):
//! the touched groups' stored states, read from the output files that can hold them (those
//! files are rewritten with their other rows kept); each touched group's stored state merged
//! with its delta (groups whose extreme was retracted are recomputed from the source); and the
//! kept rows and the touched groups' new rows written.

use super::groups::{Acc, Evaluator, Groups, Outcome};
use super::prune::Wanted;
use crate::error::{Error, Result};
use crate::refine::context::RunContext;
use crate::refine::keyed::target;
use crate::refine::report::AggregateCounts;
use crate::table::TableHandle;
use crate::table::parquet_read::with_partitions;
use deltalake::arrow::array::{BooleanArray, RecordBatch};
use deltalake::arrow::compute::filter_record_batch;
use deltalake::arrow::datatypes::SchemaRef;
use deltalake::kernel::{Add, Remove};
use deltalake::writer::DeltaWriter;
use lakestream_formats::refine::RefineJob;
use lakestream_formats::refine::aggregate::AggregateConfig;

/// The groups a run touched: the run's delta, evaluated by `ev`, in an output partitioned by
/// `partition_by`.
pub(super) struct Touched<'a> {
    /// The job's evaluator.
    pub ev: &'a Evaluator,
    /// The run's delta per touched group.
    pub delta: &'a Groups,
    /// The output's partition columns.
    pub partition_by: &'a [String],
}

/// The touched groups' stored states and the output files that hold them.
#[derive(Default)]
pub(super) struct Stored {
    /// The stored state per touched group.
    pub groups: Groups,
    /// The other rows of the files holding touched groups (written again).
    pub kept: Vec<RecordBatch>,
    /// The removes of those files.
    pub removes: Vec<Remove>,
}

/// Read the output files (at `output`'s snapshot, in `out_schema`) that can hold a touched
/// group (pruned by partition values): the touched groups' stored states, and of each file
/// holding one its other rows and its remove.
pub(super) async fn read_stored(
    output: &TableHandle,
    a: &AggregateConfig,
    touched: Touched<'_>,
    out_schema: &SchemaRef,
) -> Result<Stored> {
    let Touched {
        ev,
        delta,
        partition_by,
    } = touched;
    let mut stored = Stored::default();
    let names: Vec<String> = a.group_by.iter().map(|g| g.name.clone()).collect();
    let wanted = Wanted::new(
        ev,
        &names,
        &delta.keys,
        |c| partition_by.iter().any(|p| p == c),
        true,
    )?;
    let first = names[0].clone();
    for f in target::live_files(output, &first)? {
        if !wanted.may_hold(f.partitions(), &None) {
            continue;
        }
        let batch = target::read_all(output, &f, out_schema).await?;
        let (keys, accs) = ev.stored(&batch)?;
        let mut keep = Vec::with_capacity(batch.num_rows());
        for (i, acc) in accs.into_iter().enumerate() {
            let key = keys.row(i);
            let touched = delta.get(key.data()).is_some();
            keep.push(!touched);
            if touched {
                stored.groups.put(key.data().to_vec(), acc);
            }
        }
        if keep.iter().all(|k| *k) {
            continue;
        }
        stored
            .kept
            .push(filter_record_batch(&batch, &BooleanArray::from(keep))?);
        stored.removes.push(f.remove.clone());
    }
    Ok(stored)
}

/// The touched groups' new states and what the run did to the groups.
pub(super) struct Merged {
    /// The new state per group that has rows (encoded key, state).
    pub results: Vec<(Vec<u8>, Acc)>,
    /// The run's counts.
    pub counts: AggregateCounts,
}

impl Merged {
    /// No group merged yet; `counts` so far.
    pub fn new(counts: AggregateCounts) -> Self {
        Self {
            results: Vec::new(),
            counts,
        }
    }

    /// Merge each touched group's `delta` with its `stored` state; the groups whose extreme
    /// was retracted (to recompute from the source).
    pub fn merge(&mut self, ev: &Evaluator, delta: &Groups, stored: &Groups) -> Result<Groups> {
        let counts = &mut self.counts;
        let mut recompute = Groups::default();
        for (key, d) in delta.keys.iter().zip(&delta.accs) {
            let old = stored.get(key);
            match ev.merge(old, d)? {
                Outcome::Keep(acc) => {
                    if old.is_some() {
                        counts.updated += 1;
                    } else {
                        counts.inserted += 1;
                    }
                    self.results.push((key.clone(), acc));
                }
                Outcome::Gone => {
                    if old.is_some() {
                        counts.deleted += 1;
                    }
                }
                Outcome::Recompute => recompute.put(key.clone(), ev.fresh()),
            }
        }
        Ok(recompute)
    }

    /// Take the `recompute` groups' states `fresh` from the source (a group without rows there
    /// goes; `stored`: their states before the run).
    pub fn recomputed(&mut self, recompute: &Groups, fresh: &Groups, stored: &Groups) {
        let counts = &mut self.counts;
        for key in &recompute.keys {
            let had = stored.get(key).is_some();
            match fresh.get(key).filter(|acc| acc.rows > 0) {
                Some(acc) => {
                    if had {
                        counts.updated += 1;
                    } else {
                        counts.inserted += 1;
                    }
                    self.results.push((key.clone(), acc.clone()));
                }
                None if had => counts.deleted += 1,
                None => {}
            }
        }
    }
}

/// Write the `kept` rows of rewritten files and the `results` groups' new rows (in
/// `out_schema`, partitioned by `partition_by`) through one writer: the files written.
pub(super) async fn write_groups(
    ctx: &RunContext<'_>,
    cfg: &RefineJob,
    ev: &Evaluator,
    out_schema: &SchemaRef,
    partition_by: &[String],
    kept: &[RecordBatch],
    results: &[(Vec<u8>, Acc)],
) -> Result<Vec<Add>> {
    let new_rows = {
        let keys: Vec<&[u8]> = results.iter().map(|(k, _)| k.as_slice()).collect();
        let accs: Vec<&Acc> = results.iter().map(|(_, a)| a).collect();
        ev.to_batch(&keys, &accs)?
    };
    if new_rows.num_rows() == 0 && kept.is_empty() {
        return Ok(Vec::new());
    }
    let mut writer = crate::commit::batch_writer(
        ctx.lake,
        &cfg.output,
        out_schema.clone(),
        partition_by.to_vec(),
    )?;
    for b in kept.iter().chain(std::iter::once(&new_rows)) {
        if b.num_rows() == 0 {
            continue;
        }
        let b = with_partitions(out_schema, b, &Default::default())?;
        crate::table::parquet_write::write_sliced(&mut writer, &b)
            .await
            .map_err(|e| Error::storage(&cfg.output, e))?;
    }
    writer
        .flush()
        .await
        .map_err(|e| Error::storage(&cfg.output, e))
}
