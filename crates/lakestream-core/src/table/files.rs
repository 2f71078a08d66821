//! The live files of a table's loaded snapshot ([`TableHandle::live_files`]), each a
//! [`LiveFile`]: its path (percent-decoded), size, partition values, statistics and the
//! `remove` action that retires it; and the one deletion-vector refusal
//! ([`TableHandle::refuse_deletion_vectors`]) every plain-Parquet reader calls on the snapshot
//! it reads. Reading the files is [`parquet_read`](super::parquet_read).

use super::handle::TableHandle;
use super::parquet_read::DataFile;
use crate::error::{Error, Result};
use deltalake::Path;
use deltalake::kernel::LogicalFileView;
use deltalake::kernel::Remove;
use std::collections::HashMap;

/// A data file's partition values, as the log records them (`None`: the null partition).
pub type PartitionValues = HashMap<String, Option<String>>;

/// One live data file of a snapshot (a view into the loaded snapshot: cheap to keep).
#[derive(Clone)]
pub struct LiveFile(LogicalFileView);

impl std::fmt::Debug for LiveFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveFile")
            .field("path", &self.path())
            .field("size", &self.size())
            .finish()
    }
}

impl LiveFile {
    /// Path relative to the table root, percent-decoded.
    pub fn path(&self) -> String {
        self.0.path().into_owned()
    }

    /// The object-store path of the file.
    pub fn object_path(&self) -> Path {
        self.0.object_store_path()
    }

    /// Size in bytes.
    pub fn size(&self) -> u64 {
        self.0.size().max(0) as u64
    }

    /// Modification time (milliseconds since the epoch) as the log records it.
    pub fn modification_time(&self) -> i64 {
        self.0.modification_time()
    }

    /// Partition values as stored in the log.
    pub fn partition_values(&self) -> PartitionValues {
        self.0.partition_values_map()
    }

    /// The statistics as the log records them (a JSON string), if any.
    pub fn stats_json(&self) -> Option<String> {
        self.0.stats()
    }

    /// The statistics (`minValues`, `maxValues`, `nullCount`, `numRecords`), if any and valid.
    pub fn stats(&self) -> Option<serde_json::Value> {
        self.stats_json()
            .and_then(|s| serde_json::from_str(&s).ok())
    }

    /// The `minValues` and `maxValues` of `column`, when the statistics have both.
    pub fn min_max(&self, column: &str) -> Option<(serde_json::Value, serde_json::Value)> {
        let stats = self.stats()?;
        let stat = |kind: &str| stats.get(kind)?.get(column).cloned();
        stat("minValues").zip(stat("maxValues"))
    }

    /// Rows, from the statistics.
    pub fn num_records(&self) -> Option<usize> {
        self.0.num_records()
    }

    /// Whether the file carries a deletion vector.
    pub fn has_deletion_vector(&self) -> bool {
        self.0.deletion_vector_descriptor().is_some()
    }

    /// The `remove` action that retires this file.
    pub fn remove_action(&self, data_change: bool) -> Remove {
        self.0.remove_action(data_change)
    }

    /// The file as a [`DataFile`] to read.
    pub fn data_file(&self) -> DataFile {
        DataFile {
            path: self.object_path(),
            size: Some(self.size()),
            partitions: self.partition_values(),
        }
    }
}

impl TableHandle {
    /// The live files of the loaded snapshot (which may be older than the head after our own
    /// commits: [`refresh`](Self::refresh) first to read the latest). Metadata only: a reader
    /// of their rows calls [`refuse_deletion_vectors`](Self::refuse_deletion_vectors) first.
    pub fn live_files(&self) -> Result<Vec<LiveFile>> {
        Ok(self.snapshot()?.log_data().iter().map(LiveFile).collect())
    }

    /// How many files are live in the loaded snapshot.
    pub fn num_live_files(&self) -> Result<usize> {
        Ok(self.snapshot()?.log_data().num_files())
    }

    /// Refuse a table with deletion vectors ([`Error::DeletionVectors`], permanent): the
    /// loaded snapshot's protocol lists the `deletionVectors` reader feature, or a live file
    /// carries a deletion vector. Every path that reads data files as plain Parquet
    /// (compaction, the upsert's target, refine sources, redrive's lookup, `read`) calls it
    /// on the snapshot it reads, before reading or writing anything. Appends do not read data
    /// files and are not refused here. A handle that has loaded nothing passes.
    pub fn refuse_deletion_vectors(&self) -> Result<()> {
        let Ok(snapshot) = self.table.snapshot() else {
            return Ok(());
        };
        let feature = serde_json::to_value(snapshot.protocol())
            .ok()
            .and_then(|p| p.get("readerFeatures")?.as_array().cloned())
            .is_some_and(|f| f.iter().any(|f| f == "deletionVectors"));
        let files = snapshot
            .log_data()
            .iter()
            .filter(|f| f.deletion_vector_descriptor().is_some())
            .count();
        if !feature && files == 0 {
            return Ok(());
        }
        let mut found = Vec::new();
        if feature {
            found.push("the protocol lists the reader feature `deletionVectors`".to_string());
        }
        if files > 0 {
            found.push(format!(
                "{files} live data file(s) of version {} have one",
                snapshot.version()
            ));
        }
        Err(Error::DeletionVectors {
            table: self.name.clone(),
            found: found.join("; "),
        })
    }
}
