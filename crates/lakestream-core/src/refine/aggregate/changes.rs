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
use crate::partition_path::{decode, values_from_path};
use crate::refine::chunk::{ChunkLimits, Cut, Interpret, read_chunk};
use crate::table::{Commit, DataFile, TableHandle, is_missing_file};
use deltalake::arrow::array::{Array, AsArray, RecordBatch};
use deltalake::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use deltalake::kernel::Action;
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

impl SignedFile {
    /// The file to read (its size, when the log says it, saves a request).
    fn data_file(&self) -> DataFile {
        let size = (self.size > 0).then_some(self.size);
        DataFile::new(&self.path, size, self.partitions.clone())
    }
}

/// What a source did in `(after, end]`.
#[derive(Debug, Clone)]
pub(crate) struct Changes {
    /// The last version read.
    pub end: u64,
    /// Files, version after version.
    pub files: Vec<SignedFile>,
}

/// Why version `v` cannot be read (its commit or a file is gone), and what to do: an aggregate
/// cannot skip versions, it is rebuilt.
fn gone(job: &str, v: u64, after: u64, latest: u64, what: &str) -> String {
    format!(
        "{what} for version {v} is gone (log retention or vacuum); the job is {} version(s) \
         behind (consumed {after}, latest {latest}). An aggregate cannot skip changes: rebuild it \
         with `lakestream refine {job} --rebuild` (its first run reads the source's snapshot)",
        latest.saturating_sub(after)
    )
}

/// The aggregate's reading of a commit (the change data feed rules, see the module).
struct SignedChanges<'a> {
    job: &'a str,
    table: &'a str,
    after: u64,
    partition_columns: Vec<String>,
}

impl SignedChanges<'_> {
    fn fail(&self, reason: String) -> Error {
        Error::Source {
            job: self.job.to_string(),
            table: self.table.to_string(),
            reason,
        }
    }
}

impl Interpret for SignedChanges<'_> {
    type Item = SignedFile;

    fn items(&mut self, commit: &Commit) -> Result<Vec<SignedFile>> {
        let (v, table) = (commit.version(), self.table);
        let (mut data, mut change) = (Vec::new(), Vec::new());
        for action in commit.actions()? {
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
                        .filter(|p| !p.is_empty() || self.partition_columns.is_empty())
                        .unwrap_or_else(|| values_from_path(&r.path, &self.partition_columns)),
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
        Ok(if change.is_empty() { data } else { change })
    }

    fn size(item: &SignedFile) -> u64 {
        item.size
    }

    fn recreated(&self, after: u64, latest: u64) -> Error {
        self.fail(format!(
            "the job consumed up to version {after} but the table's latest version is {latest}: \
             the table was re-created. Rebuild the aggregate: delete its output table and run \
             the job again (its first run reads the source's snapshot)"
        ))
    }

    fn gone(&self, version: u64, latest: u64) -> Error {
        self.fail(gone(
            self.job,
            version,
            self.after,
            latest,
            "its commit file",
        ))
    }
}

/// Cut the next chunk of `handle`'s changes after version `after` (the handle is loaded at its
/// latest version).
pub(crate) async fn next_changes(
    job: &str,
    handle: &TableHandle,
    after: u64,
    limits: ChunkLimits,
) -> Result<Changes> {
    let mut signed = SignedChanges {
        job,
        table: handle.name(),
        after,
        partition_columns: handle.partition_columns()?,
    };
    let Cut { end, versions, .. } = read_chunk(&mut signed, handle, Some(after), limits).await?;
    Ok(Changes {
        end: end.unwrap_or(after),
        files: versions.into_iter().flat_map(|(_, files)| files).collect(),
    })
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
    let latest = handle.version().unwrap_or(0);
    let batches = match handle.read_columns(&f.data_file(), &read_schema).await {
        Ok(b) => b,
        Err(e) if is_missing_file(&e) => {
            return Err(Error::Source {
                job: job.to_string(),
                table: table.to_string(),
                reason: gone(job, f.version, after, latest, "a data file"),
            });
        }
        Err(e) => return Err(e),
    };
    let mut out = Vec::with_capacity(batches.len());
    for full in batches {
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
