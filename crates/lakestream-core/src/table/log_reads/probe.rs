//! A cold load's listing found without a LIST (issue 39: a LIST costs 12.5 GETs, and a cold
//! load reads every commit after the checkpoint anyway).
//!
//! `_last_checkpoint` names the checkpoint version `c`; the listing the kernel then asks for
//! (the log after `<c>`) is the checkpoint file (one HEAD: its size, which the kernel's Parquet
//! reader needs) and the commits `c+1, c+2, …` (GETs of the next ones, [`AT_ONCE`] at a time,
//! until one is missing; their bodies kept for the replay that follows, so a commit found costs
//! nothing more). Without `_last_checkpoint` (a table younger than its first checkpoint) the
//! commits from `<0>.json` on. What that finds is what a LIST would have found at the moment of
//! the first missing GET: commit files are written once, in version order, with put-if-absent.
//!
//! It stands down (the caller lists) when a guess could be wrong or dear: a multi-part or V2
//! checkpoint (their file names are not in the hint alone), a hinted checkpoint found missing
//! (a stale hint, another writer's cleanup) or older than [`PROBE_AGE`] (a stale hint beside a
//! log cleanup could hide the newer commits: see [`young`]), no `<0>.json` or an old one
//! without a hint (no table, one restored after log cleanup, or a table without hints: the
//! LIST decides), or [`PROBES`] commits after the checkpoint
//! and more (its writer fell behind; a LIST then beats GETs a few at a time).

use super::known::Known;
use super::listing::Log;
use bytes::Bytes;
use deltalake::logstore::object_store::{self, ObjectMeta, ObjectStoreExt, path::Path};

/// How young the hinted checkpoint (or `<0>.json` without a hint) must be for a cold load to
/// look for the commits after it instead of listing (see [`young`]): an hour, under any log
/// retention a table sets in practice (30 days by default), over a busy table's checkpoint
/// interval.
pub const PROBE_AGE: std::time::Duration = std::time::Duration::from_secs(3600);
/// Commits a cold load looks for by GET before it lists instead (two checkpoint intervals).
pub const PROBES: u64 = 20;
/// Commit files asked for at once (a cold load's latency: one round trip per four commits;
/// at most three GETs past the newest commit find nothing).
pub const AT_ONCE: u64 = 4;

impl Log {
    /// Find the listing a cold load of `dir` needs from `_last_checkpoint`'s body `hint`
    /// without listing, and keep it as the known listing: `true` when found (a table is
    /// there), `false` when the caller must list (see the module docs).
    pub(super) async fn probe(
        &self,
        dir: &Path,
        hint: Option<&Bytes>,
    ) -> object_store::Result<bool> {
        let mut metas: Vec<ObjectMeta> = Vec::new();
        let checkpoint = match hint {
            None => None,
            Some(body) => match single_part(body) {
                Some(v) => Some(v),
                None => return Ok(false),
            },
        };
        if let Some(c) = checkpoint {
            let file = dir
                .clone()
                .join(format!("{c:020}.checkpoint.parquet").as_str());
            match self.inner.head(&file).await {
                Ok(meta) if young(&meta, self.probe_age) => metas.push(meta),
                Ok(_) | Err(object_store::Error::NotFound { .. }) => return Ok(false),
                Err(e) => return Err(e),
            }
        }
        // The hint is any writer's: a version at the end of u64 leaves no room to look (list).
        let Some(start) = checkpoint.map_or(Some(0), |c| c.checked_add(1)) else {
            return Ok(false);
        };
        let mut next = start;
        // Without a checkpoint, `<0>.json` alone first: a missing table costs one GET, and a
        // table created over [`PROBE_AGE`] ago is listed (a log cleanup in progress under a
        // missing `_last_checkpoint` could have removed the commits after it).
        let mut at_once = if checkpoint.is_some() { AT_ONCE } else { 1 };
        'look: loop {
            if next - start >= PROBES {
                return Ok(false);
            }
            let Some(end) = next.checked_add(at_once) else {
                return Ok(false);
            };
            let names: Vec<Path> = (next..end)
                .map(|v| dir.clone().join(format!("{v:020}.json").as_str()))
                .collect();
            let found = futures::future::try_join_all(names.iter().map(|p| self.commit(p))).await?;
            for got in found {
                match got {
                    Some((meta, _)) => metas.push(meta),
                    None => break 'look,
                }
                next += 1;
            }
            if checkpoint.is_none() && !metas.first().is_some_and(|m| young(m, self.probe_age)) {
                return Ok(false);
            }
            at_once = AT_ONCE;
        }
        if checkpoint.is_none() && next == 0 {
            return Ok(false);
        }
        let from = dir
            .clone()
            .join(format!("{:020}", checkpoint.unwrap_or(0)).as_str());
        let mut known = Known::listed(dir, &from, &metas);
        if let Some(c) = checkpoint {
            known.at_least(c);
        }
        known.looked();
        *self.known.lock().unwrap_or_else(|p| p.into_inner()) = Some(known);
        Ok(true)
    }
}

/// Whether `meta` (the hinted checkpoint, or `<0>.json` without a hint) was written less than
/// `age` ago. Log cleanup (delta-rs's `cleanup_expired_logs_for`, which lakestream's maintenance
/// runs, and Spark's) removes only versions below a checkpoint at or before the oldest log file
/// still inside the table's `delta.logRetentionDuration` (30 days by default), so a log file
/// inside it keeps every version from its own on, also while a cleanup is under way: GETs
/// from it find the true head. An older checkpoint may sit under a stale `_last_checkpoint`
/// with a newer checkpoint beside it and the commits between removed (or being removed, in no
/// order), where GETs from the hint would take an old version for the head: only a LIST sees
/// that. Assumes a log retention of an hour or more and clocks within its margin.
fn young(meta: &ObjectMeta, age: std::time::Duration) -> bool {
    let age = chrono::Duration::from_std(age).unwrap_or(chrono::Duration::MAX);
    chrono::Utc::now() - meta.last_modified < age
}

/// The version of a `_last_checkpoint` body naming a classic single-file checkpoint; `None`
/// for anything else (multi-part, V2, unreadable).
fn single_part(body: &Bytes) -> Option<u64> {
    let value: serde_json::Value = serde_json::from_slice(body).ok()?;
    if value.get("v2Checkpoint").is_some_and(|v| !v.is_null()) {
        return None;
    }
    match value.get("parts") {
        None | Some(serde_json::Value::Null) => {}
        Some(parts) if parts.as_u64() == Some(1) => {}
        Some(_) => return None,
    }
    value.get("version")?.as_u64()
}

#[cfg(test)]
mod tests {
    use super::single_part;

    #[test]
    fn only_a_single_file_checkpoint_is_guessed() {
        let v = |s: &str| single_part(&bytes::Bytes::from(s.to_string()));
        assert_eq!(v(r#"{"version":10,"size":12}"#), Some(10));
        assert_eq!(v(r#"{"version":10,"parts":1}"#), Some(10));
        assert_eq!(v(r#"{"version":10,"parts":null}"#), Some(10));
        assert_eq!(v(r#"{"version":10,"parts":3}"#), None);
        assert_eq!(v(r#"{"version":10,"parts":"x"}"#), None);
        assert_eq!(v(r#"{"version":10,"v2Checkpoint":{"path":"x"}}"#), None);
        assert_eq!(v(r#"{"size":12}"#), None);
        assert_eq!(v("not json"), None);
    }
}
