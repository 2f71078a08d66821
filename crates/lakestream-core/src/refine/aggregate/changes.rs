//! What a source's commits did to its rows after a version, as signed files: the Delta change
//! data feed rules without DataFusion. Per version:
//! - a commit with `cdc` actions (a table with the change data feed, e.g. a CDC silver): its
//!   change files are the change, each row signed by `_change_type` (`insert` and
//!   `update_postimage` add it, `delete` and `update_preimage` retract it);
//! - else every `add` with `dataChange=true` adds its rows and every `remove` with
//!   `dataChange=true` retracts its rows (a delete, an UPDATE or MERGE by any engine: the
//!   rewritten file's unchanged rows cancel out);
//! - `dataChange=false` actions (compaction) change nothing.
//!
//! A backlog is cut into bounded chunks of whole versions, as the append-only source does.

use crate::commit::change_data::CHANGE_TYPE;
use crate::error::{Error, Result};
use crate::read::with_partitions;
use crate::refine::source::ChunkLimits;
use crate::table::TableHandle;
use deltalake::Path;
use deltalake::arrow::array::{Array, AsArray, RecordBatch};
use deltalake::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use deltalake::kernel::Action;
use deltalake::parquet::arrow::ProjectionMask;
#[allow(deprecated)]
use deltalake::parquet::arrow::async_reader::ParquetObjectReader;
use deltalake::parquet::arrow::async_reader::ParquetRecordBatchStreamBuilder;
use futures::TryStreamExt;
use std::collections::HashMap;
use std::sync::Arc;

/// How a file's rows count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Effect {
    /// Added (`add`, `dataChange=true`).
    Added,
    /// Retracted (`remove`, `dataChange=true`).
    Removed,
    /// A change data file: each row's `_change_type` says.
    ChangeData,
}

/// A file whose rows a version added, retracted or changed.
#[derive(Debug, Clone)]
pub(crate) struct SignedFile {
    /// Path relative to the table root, percent-decoded.
    pub path: String,
    /// Partition values.
    pub partitions: HashMap<String, Option<String>>,
    /// Size in bytes (0 when the log does not say).
    pub size: u64,
    /// How its rows count.
    pub effect: Effect,
    /// The version.
    pub version: u64,
}

/// What a source did in `(after, end]`.
#[derive(Debug, Clone)]
pub(crate) struct Changes {
    /// The last version read.
    pub end: u64,
    /// Files, version after version.
    pub files: Vec<SignedFile>,
}

fn decode(path: &str) -> String {
    percent_encoding::percent_decode_str(path)
        .decode_utf8_lossy()
        .into_owned()
}

/// Partition values of a `remove` written without them: from its Hive-style path.
fn from_path(path: &str, partition_columns: &[String]) -> HashMap<String, Option<String>> {
    let mut out = HashMap::new();
    for seg in path.split('/') {
        if let Some((k, v)) = seg.split_once('=')
            && partition_columns.iter().any(|c| c == k)
        {
            // The log percent-encodes the path, whose segments are Hive-escaped: decode twice.
            let v = decode(&decode(v));
            let v = (v != "__HIVE_DEFAULT_PARTITION__").then_some(v);
            out.insert(k.to_string(), v);
        }
    }
    out
}

/// Why version `v` cannot be read (its commit or a file is gone), and what to do: an aggregate
/// cannot skip versions, it is rebuilt.
fn gone(job: &str, v: u64, after: u64, latest: u64, what: &str) -> String {
    format!(
        "{what} for version {v} is gone (log retention or vacuum); the job is {} version(s) \
         behind (consumed {after}, latest {latest}). An aggregate cannot skip changes: rebuild it \
         (delete its output table and run `lakestream refine {job}`: the first run reads the \
         source's snapshot)",
        latest.saturating_sub(after)
    )
}

/// Cut the next chunk of `handle`'s changes after version `after` (the handle is loaded at its
/// latest version).
pub(crate) async fn next_changes(
    job: &str,
    handle: &TableHandle,
    after: u64,
    limits: ChunkLimits,
) -> Result<Changes> {
    let table = handle.name();
    handle.refuse_deletion_vectors()?;
    let latest = handle.version().unwrap_or(0);
    let fail = |reason: String| Error::Source {
        job: job.to_string(),
        table: table.to_string(),
        reason,
    };
    if after > latest {
        return Err(fail(format!(
            "the job consumed up to version {after} but the table's latest version is {latest}: \
             the table was re-created. Rebuild the aggregate: delete its output table and run \
             the job again (its first run reads the source's snapshot)"
        )));
    }
    let partition_columns = handle.partition_columns()?;
    let mut out = Changes {
        end: after,
        files: vec![],
    };
    let (mut files, mut bytes) = (0usize, 0u64);
    let log_store = handle.table().log_store();
    for v in after + 1..=latest {
        if out.end != after && (files >= limits.max_files || bytes >= limits.max_bytes) {
            break;
        }
        let Some(commit) = log_store
            .read_commit_entry(v)
            .await
            .map_err(|e| Error::storage(table, e))?
        else {
            return Err(fail(gone(job, v, after, latest, "its commit file")));
        };
        let actions =
            deltalake::logstore::get_actions(v, &commit).map_err(|e| Error::storage(table, e))?;
        let (mut data, mut change) = (Vec::new(), Vec::new());
        for action in actions {
            match action {
                Action::Add(a) if a.deletion_vector.is_some() => {
                    return Err(Error::DeletionVectors {
                        table: table.to_string(),
                        found: format!("version {v} adds `{}` with one", a.path),
                    });
                }
                Action::Remove(r) if r.data_change && r.deletion_vector.is_some() => {
                    return Err(Error::DeletionVectors {
                        table: table.to_string(),
                        found: format!("version {v} removes `{}` with one", r.path),
                    });
                }
                Action::Add(a) if a.data_change => data.push(SignedFile {
                    path: decode(&a.path),
                    partitions: a.partition_values.clone(),
                    size: a.size.max(0) as u64,
                    effect: Effect::Added,
                    version: v,
                }),
                Action::Remove(r) if r.data_change => data.push(SignedFile {
                    partitions: r
                        .partition_values
                        .clone()
                        .filter(|p| !p.is_empty() || partition_columns.is_empty())
                        .unwrap_or_else(|| from_path(&r.path, &partition_columns)),
                    path: decode(&r.path),
                    size: r.size.unwrap_or(0).max(0) as u64,
                    effect: Effect::Removed,
                    version: v,
                }),
                Action::Cdc(c) => change.push(SignedFile {
                    path: decode(&c.path),
                    partitions: c.partition_values.clone(),
                    size: c.size.max(0) as u64,
                    effect: Effect::ChangeData,
                    version: v,
                }),
                _ => {}
            }
        }
        // A commit with change data files: they are its change (its adds and removes are the
        // rewritten files, which would count unchanged rows twice).
        let chosen = if change.is_empty() { data } else { change };
        files += chosen.len();
        bytes += chosen.iter().map(|f| f.size).sum::<u64>();
        out.files.extend(chosen);
        out.end = v;
    }
    Ok(out)
}

/// The rows of `f` in `schema` (projected source columns), each with its sign (+1 / -1).
pub(crate) async fn read_signed(
    job: &str,
    handle: &TableHandle,
    f: &SignedFile,
    schema: &SchemaRef,
    after: u64,
) -> Result<Vec<(RecordBatch, Vec<i8>)>> {
    let table = handle.name();
    let mut wanted: Vec<Field> = schema.fields().iter().map(|f| f.as_ref().clone()).collect();
    if f.effect == Effect::ChangeData {
        wanted.push(Field::new(CHANGE_TYPE, DataType::Utf8, true));
    }
    let read_schema: SchemaRef = Arc::new(Schema::new(wanted));
    let store = handle.table().object_store();
    #[allow(deprecated)]
    let mut reader = ParquetObjectReader::new(store, Path::from(f.path.as_str()));
    if f.size > 0 {
        reader = reader.with_file_size(f.size);
    }
    let missing = |e: &deltalake::parquet::errors::ParquetError| match e {
        deltalake::parquet::errors::ParquetError::External(inner) => inner
            .downcast_ref::<deltalake::ObjectStoreError>()
            .is_some_and(|x| matches!(x, deltalake::ObjectStoreError::NotFound { .. })),
        _ => false,
    };
    let latest = handle.version().unwrap_or(0);
    let gone_error = || Error::Source {
        job: job.to_string(),
        table: table.to_string(),
        reason: gone(job, f.version, after, latest, "a data file"),
    };
    let builder = match ParquetRecordBatchStreamBuilder::new(reader).await {
        Ok(b) => b,
        Err(e) if missing(&e) => return Err(gone_error()),
        Err(e) => return Err(Error::storage(table, e)),
    };
    let present: Vec<&str> = read_schema
        .fields()
        .iter()
        .map(|f| f.name().as_str())
        .filter(|c| builder.schema().field_with_name(c).is_ok())
        .collect();
    let mask = ProjectionMask::columns(builder.parquet_schema(), present);
    let batches: Vec<RecordBatch> = builder
        .with_projection(mask)
        .build()
        .map_err(|e| Error::storage(table, e))?
        .try_collect()
        .await
        .map_err(|e| Error::storage(table, e))?;
    let mut out = Vec::with_capacity(batches.len());
    for b in batches {
        let full = with_partitions(&read_schema, &b, &f.partitions)?;
        let signs: Vec<i8> = match f.effect {
            Effect::Added => vec![1; full.num_rows()],
            Effect::Removed => vec![-1; full.num_rows()],
            Effect::ChangeData => {
                let types = full
                    .column_by_name(CHANGE_TYPE)
                    .ok_or_else(|| Error::Source {
                        job: job.to_string(),
                        table: table.to_string(),
                        reason: format!(
                            "change data file `{}` has no `{CHANGE_TYPE}` column",
                            f.path
                        ),
                    })?;
                let types = deltalake::arrow::compute::cast(types, &DataType::Utf8)?;
                let types = types.as_string::<i32>();
                (0..types.len())
                    .map(|i| match types.is_valid(i).then(|| types.value(i)) {
                        Some("insert" | "update_postimage") => Ok(1),
                        Some("delete" | "update_preimage") => Ok(-1),
                        other => Err(Error::Source {
                            job: job.to_string(),
                            table: table.to_string(),
                            reason: format!(
                                "change data file `{}` (version {}) has a row with `{CHANGE_TYPE}` = {other:?}; \
                                 expected insert, update_preimage, update_postimage or delete",
                                f.path, f.version
                            ),
                        }),
                    })
                    .collect::<Result<_>>()?
            }
        };
        let projected = full.project(&(0..schema.fields().len()).collect::<Vec<_>>())?;
        out.push((projected, signs));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_remove_without_partition_values_takes_them_from_its_path() {
        let cols = vec!["year".to_string(), "day".to_string()];
        let p = from_path(
            "year=26/day=__HIVE_DEFAULT_PARTITION__/part-0.parquet",
            &cols,
        );
        assert_eq!(p.get("year"), Some(&Some("26".to_string())));
        assert_eq!(p.get("day"), Some(&None));
        assert_eq!(p.len(), 2);
    }
}
