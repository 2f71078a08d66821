//! What every refine run shares whatever its kind: the lake, the pipeline's names, the commit
//! settings and the run's clock ([`RunContext`]), and how a job's progress is named in the
//! output table — one `txn` appId per source ([`source_app_id`]) and the table properties that
//! record the job and each source's table id. Maintenance reads the same names to find what a
//! lagging job still needs, so they are defined once, here.

use crate::commit::CommitSettings;
use crate::error::Result;
use crate::storage::Lake;
use crate::table::{TableHandle, WarmHandles};
use chrono::{DateTime, Utc};

/// Everything a run needs besides the job's config.
pub struct RunContext<'a> {
    /// The lake.
    pub lake: &'a Lake,
    /// Pipeline name (first segment of `txn` appIds).
    pub pipeline: &'a str,
    /// Dead-letter table for late rows.
    pub dead_letter_table: &'a str,
    /// Commit settings.
    pub settings: &'a CommitSettings,
    /// Processing time of the run: recorded on dead letters and tombstones, and the base of a
    /// join's future cap.
    pub now: DateTime<Utc>,
    /// Table handles kept across runs and invocations (the refine function's, built once per
    /// process): a run then loads only what its tables gained since. `None`: every run loads
    /// its tables from the log (the CLI, one-off runs).
    pub warm: Option<&'a WarmHandles>,
    /// Sources loaded through [`warm`](Self::warm) by this context: loaded once per invocation.
    sources_loaded: std::sync::Mutex<std::collections::HashSet<String>>,
    /// Tables whose kept handle this context proved to be the table it loaded (one HEAD per
    /// table and invocation; later loads only look for new commits).
    proven: std::sync::Mutex<std::collections::HashSet<String>>,
    /// When this context last loaded each table (brought it to the latest version).
    loaded_at: std::sync::Mutex<std::collections::HashMap<String, std::time::Instant>>,
}

/// How long a load stands for the latest version for a run's first load of its output
/// ([`RunContext::load_output`]).
const JUST_LOADED: std::time::Duration = std::time::Duration::from_secs(1);

impl<'a> RunContext<'a> {
    /// The context of `config`'s pipeline (its name and dead-letter table).
    pub fn new(
        config: &'a lakestream_formats::config::PipelineConfig,
        lake: &'a Lake,
        settings: &'a CommitSettings,
        now: DateTime<Utc>,
    ) -> Self {
        Self {
            lake,
            pipeline: &config.pipeline,
            dead_letter_table: &config.dead_letter_table,
            settings,
            now,
            warm: None,
            sources_loaded: Default::default(),
            proven: Default::default(),
            loaded_at: Default::default(),
        }
    }

    /// The same context, keeping table handles warm in `warm` across runs.
    pub fn with_warm(mut self, warm: &'a WarmHandles) -> Self {
        self.warm = Some(warm);
        self
    }

    /// A handle on `table` loaded at its latest version (`exists()` false when there is no
    /// table yet). With [`warm`](Self::warm) handles it is the kept handle, revalidated (one
    /// HEAD, once per context) and brought up to date incrementally (a GET of the next commit,
    /// in flight with that HEAD: no LIST), and a copy stays kept for the next run.
    pub async fn load(&self, table: &str) -> Result<TableHandle> {
        let Some(warm) = self.warm else {
            let mut h = TableHandle::open(self.lake, table)?;
            h.refresh().await?;
            return Ok(h);
        };
        let proven = self.proven.lock().is_ok_and(|p| p.contains(table));
        // A refresh that failed part-way is not kept: the next load starts from storage.
        let h = match proven.then(|| warm.take_as_is(table)).flatten() {
            Some(mut h) => {
                h.refresh().await?;
                h
            }
            // The identity HEAD and the GET of the next commit at once.
            None => warm.take_fresh(self.lake, table).await?,
        };
        if let Ok(mut p) = self.proven.lock() {
            p.insert(table.to_string());
        }
        if let Ok(mut l) = self.loaded_at.lock() {
            l.insert(table.to_string(), std::time::Instant::now());
        }
        warm.put(h.warm_copy());
        Ok(h)
    }

    /// [`load`](Self::load) for a run's output: the kept handle as it is when this context
    /// loaded the table less than [`JUST_LOADED`] ago (the hold decision's or the function's
    /// load, made together with the sources' loads) and committed nothing to it since (the
    /// snapshot is the head), else a load. Only for the plan's first
    /// look at its output: a commit another writer made since is caught by the conditional
    /// PUT, and the re-plan refreshes the handle (the commit loop), not through this.
    pub async fn load_output(&self, table: &str) -> Result<TableHandle> {
        let just = self
            .loaded_at
            .lock()
            .ok()
            .and_then(|l| l.get(table).copied())
            .is_some_and(|at| at.elapsed() < JUST_LOADED);
        if let Some(warm) = self.warm
            && just
            && let Some(h) = warm.take_as_is(table)
        {
            // Not after our own commit: its head then runs ahead of the snapshot the run would
            // read its files from (random-schedule suite: a gold run read its groups from the
            // version before its last commit, planned on the one after, and counted twice).
            if h.exists() && h.snapshot_is_head() {
                warm.put(h.warm_copy());
                return Ok(h);
            }
            warm.put(h);
        }
        self.load(table).await
    }

    /// A job's side table (tombstones, SCD2's stored deletes) at its latest version: with
    /// warm handles the kept one, so a run that finds nothing new in it asks one GET (and the
    /// first load of the invocation an identity HEAD); no LIST. Hand it back with
    /// [`keep`](Self::keep) after committing to it.
    pub async fn side(&self, table: &str) -> Result<TableHandle> {
        self.load(table).await
    }

    /// [`side`](Self::side) for a use that needs no newer commit than this context already
    /// loaded: the kept handle as it is (no request) when this context loaded it, else a
    /// load. An append planned on it is caught by its conditional PUT when another writer
    /// committed since (and rebased: appends do not conflict; one that sets a property
    /// re-plans); a check that finds nothing to do on it may miss what newer commits added
    /// (the tombstones' expiry: another run's consolidation may add past-dated tombstones,
    /// which the next run's expiry removes).
    pub async fn side_as_is(&self, table: &str) -> Result<TableHandle> {
        let proven = self.proven.lock().is_ok_and(|p| p.contains(table));
        if let Some(warm) = self.warm
            && proven
            && let Some(h) = warm.take_as_is(table)
        {
            warm.put(h.warm_copy());
            return Ok(h);
        }
        self.load(table).await
    }

    /// Keep `handle` warm for the next run (after this run committed to it: the next load
    /// then starts from its own commit instead of reading it back).
    pub fn keep(&self, handle: TableHandle) {
        if let Some(warm) = self.warm {
            warm.put(handle);
        }
    }

    /// [`load`](Self::load) for a table a job reads: with warm handles it is loaded once per
    /// context (one invocation), and later readers in the same invocation get that snapshot
    /// without a request. A version committed since is not missed: its commit's refine notice
    /// (or the next tick) runs the reader again, and the `txn`s say what it consumed.
    pub async fn load_source(&self, table: &str) -> Result<TableHandle> {
        self.load_source_at_least(table, None).await
    }

    /// [`load_source`](Self::load_source), refreshed when the snapshot this context holds is
    /// older than `at_least` (a version the caller knows exists: one another writer's `txn`
    /// consumed, or one a probe found) or no longer names a table.
    pub async fn load_source_at_least(
        &self,
        table: &str,
        at_least: Option<u64>,
    ) -> Result<TableHandle> {
        if let Some(warm) = self.warm {
            let loaded = self.sources_loaded.lock().is_ok_and(|l| l.contains(table));
            if loaded && let Some(h) = warm.take_as_is(table) {
                let fresh_enough = h.exists() && at_least.is_none_or(|v| h.version() >= Some(v));
                if fresh_enough {
                    warm.put(h.warm_copy());
                    return Ok(h);
                }
                warm.put(h);
            }
        }
        let h = self.load(table).await?;
        if self.warm.is_some()
            && let Ok(mut l) = self.sources_loaded.lock()
        {
            l.insert(table.to_string());
        }
        Ok(h)
    }

    /// `txn` appId of `job`'s consumption of `table` in this pipeline.
    pub fn app_id(&self, job: &str, table: &str) -> String {
        source_app_id(self.pipeline, job, table)
    }
}

/// `txn` appId of a job's consumption of `table`.
pub fn source_app_id(pipeline: &str, job: &str, table: &str) -> String {
    format!("{pipeline}/{job}/{table}")
}

/// Output table property naming the job that writes it.
pub const JOB_PROPERTY: &str = "lakestream.refine.job";

/// Output table property recording a source's table id (a re-created source fails the job).
pub fn source_id_property(table: &str) -> String {
    format!("lakestream.refine.source.{table}.tableId")
}
