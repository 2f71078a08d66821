//! What a table's `_delta_log/` holds, known without listing it again.
//!
//! delta-rs's kernel lists the log from the snapshot's checkpoint on every refresh of a loaded
//! table, and a LIST costs twelve times a GET. But the log only grows by one file name at a
//! time — `<v+1>.json`, written once — so a process that has listed the log once can find what
//! was added since by GETting the next commit file until one is missing, and keeps the bodies
//! it fetched for the replay that follows. [`Known`] is that listing: the entries of the last
//! real LIST after its offset, the commit files found since (by such a GET, a plain read, or our
//! own put-if-absent PUT), and the checkpoints this process wrote.
//!
//! It answers a listing of the log only when it covers it (same directory, an offset at or after
//! the real listing's), and lists for real again
//! - after [`RELIST_COMMITS`] commits found since the last LIST (a checkpoint another engine
//!   wrote is then adopted: a checkpoint is an optimization, never needed for correctness);
//! - after anything under the log was deleted through this store, a commit file it names turned
//!   out missing, or a checkpoint was written in parts (each forgets it);
//! - when the table's identity proof fails ([`LogReads::clear`](super::LogReads::clear)).
//!
//! A listing answered from here is a listing of the log at the moment of the last missing GET:
//! what a LIST would have returned then, without a newer checkpoint of another writer.

use deltalake::logstore::object_store::{ObjectMeta, path::Path};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Commits found by GET (or written) after which the log is listed for real again.
pub const RELIST_COMMITS: u64 = 100;

/// How long a listing or a look for the next commit answers listings without a GET.
pub const FRESH: Duration = Duration::from_secs(1);

/// The log's entries as of the last real LIST plus what was found or written since.
#[derive(Debug, Clone)]
pub(super) struct Known {
    /// The `_delta_log` directory listed.
    dir: Path,
    /// The real listing's offset: every entry after it is known.
    from: Path,
    /// Entries after `from`, by location (commit names sort by version: 20 digits).
    entries: BTreeMap<Path, ObjectMeta>,
    /// Newest commit version known to exist.
    newest: Option<u64>,
    /// Commits added since the real listing.
    added: u64,
    /// Until when a listing is answered without a GET of the next commit (just listed or
    /// looked: [`FRESH`] later it is as of then, as a LIST that took that long would be).
    fresh_until: Option<Instant>,
}

impl Known {
    /// The result of a real listing of `dir` after `from`.
    pub(super) fn listed(dir: &Path, from: &Path, metas: &[ObjectMeta]) -> Self {
        let mut known = Self {
            dir: dir.clone(),
            from: from.clone(),
            entries: BTreeMap::new(),
            newest: None,
            added: 0,
            fresh_until: None,
        };
        for meta in metas {
            if let Some(v) = commit_version(&meta.location) {
                known.newest = known.newest.max(Some(v));
            }
            known.entries.insert(meta.location.clone(), meta.clone());
        }
        known
    }

    /// Whether a listing of `dir` after `offset` can be answered from here: the directory was
    /// listed from no later than `offset`, a commit is known, and not too many were added.
    pub(super) fn covers(&self, dir: &Path, offset: &Path) -> bool {
        &self.dir == dir
            && offset.as_ref() >= self.from.as_ref()
            && self.newest.is_some()
            && self.added < RELIST_COMMITS
    }

    /// Note that commit `version` existed (the version of a checkpoint found without a LIST:
    /// its commit file may be gone, the next one to look for is after it).
    pub(super) fn at_least(&mut self, version: u64) {
        self.newest = self.newest.max(Some(version));
    }

    /// Note that the log was just listed or looked at (answers need no GET for [`FRESH`]).
    pub(super) fn looked(&mut self) {
        self.fresh_until = Some(Instant::now() + FRESH);
    }

    /// Whether a listing now needs a GET of the next commit first.
    pub(super) fn stale(&self) -> bool {
        self.fresh_until.is_none_or(|t| Instant::now() >= t)
    }

    /// Newest commit version known to exist.
    pub(super) fn newest(&self) -> Option<u64> {
        self.newest
    }

    /// The commit file to look for next (`None` when no commit is known).
    pub(super) fn next_commit(&self) -> Option<Path> {
        let v = self.newest?.checked_add(1)?;
        Some(self.dir.clone().join(format!("{v:020}.json").as_str()))
    }

    /// Note a file of the log seen to exist (a commit found or written, a checkpoint written).
    /// A commit is added only when it is the next one: a gap is filled by the next lookup.
    pub(super) fn saw(&mut self, meta: &ObjectMeta) {
        if !self.in_dir(&meta.location) || meta.location.as_ref() <= self.from.as_ref() {
            return;
        }
        match commit_version(&meta.location) {
            Some(v) if self.newest.and_then(|n| n.checked_add(1)) == Some(v) => {
                self.newest = Some(v);
                self.added += 1;
            }
            Some(_) => return,
            None => {}
        }
        self.entries.insert(meta.location.clone(), meta.clone());
    }

    /// Whether `location` is in the listed directory.
    pub(super) fn in_dir(&self, location: &Path) -> bool {
        location
            .as_ref()
            .strip_prefix(self.dir.as_ref())
            .is_some_and(|rest| rest.starts_with('/'))
    }

    /// Whether `hint` (this directory's `_last_checkpoint`) names a checkpoint at `version`
    /// that this listing lacks (another writer's: GETs of the next commit never find one).
    pub(super) fn lacks_checkpoint(&self, hint: &Path, version: u64) -> bool {
        let prefix = format!("{version:020}.checkpoint");
        self.in_dir(hint)
            && !self
                .entries
                .keys()
                .any(|p| p.filename().is_some_and(|n| n.starts_with(&prefix)))
    }

    /// Whether `location` is an entry this listing names.
    pub(super) fn names(&self, location: &Path) -> bool {
        self.entries.contains_key(location)
    }

    /// The entries after `offset`, in name order (what a LIST after `offset` returns).
    pub(super) fn after(&self, offset: &Path) -> Vec<ObjectMeta> {
        self.entries
            .iter()
            .filter(|(p, _)| p.as_ref() > offset.as_ref())
            .map(|(_, m)| m.clone())
            .collect()
    }
}

/// Whether `prefix` is a table's log directory (`…/_delta_log`).
pub(super) fn is_log_dir(prefix: &Path) -> bool {
    prefix.as_ref().rsplit('/').next() == Some("_delta_log")
}

/// The version of a commit file `…/_delta_log/<20 digits>.json`.
pub(super) fn commit_version(location: &Path) -> Option<u64> {
    let name = location.filename()?;
    let digits = name.strip_suffix(".json")?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(path: &str) -> ObjectMeta {
        ObjectMeta {
            location: Path::from(path),
            last_modified: chrono::Utc::now(),
            size: 1,
            e_tag: None,
            version: None,
        }
    }

    #[test]
    fn a_listing_grows_by_the_next_commit_only() {
        let dir = Path::from("t/_delta_log");
        let from = Path::from("t/_delta_log/00000000000000000010");
        let mut k = Known::listed(
            &dir,
            &from,
            &[
                meta("t/_delta_log/00000000000000000010.checkpoint.parquet"),
                meta("t/_delta_log/00000000000000000011.json"),
            ],
        );
        assert_eq!(
            k.next_commit(),
            Some(Path::from("t/_delta_log/00000000000000000012.json"))
        );
        // A gap is not bridged; the next commit is.
        k.saw(&meta("t/_delta_log/00000000000000000013.json"));
        assert!(!k.names(&Path::from("t/_delta_log/00000000000000000013.json")));
        k.saw(&meta("t/_delta_log/00000000000000000012.json"));
        k.saw(&meta(
            "t/_delta_log/00000000000000000012.checkpoint.parquet",
        ));
        k.saw(&meta("u/_delta_log/00000000000000000013.json"));
        let names: Vec<String> = k
            .after(&Path::from("t/_delta_log/00000000000000000011"))
            .iter()
            .map(|m| m.location.to_string())
            .collect();
        assert_eq!(
            names,
            [
                "t/_delta_log/00000000000000000011.json",
                "t/_delta_log/00000000000000000012.checkpoint.parquet",
                "t/_delta_log/00000000000000000012.json",
            ]
        );
        // Covered from the listing's offset on, not before it, not another directory.
        assert!(k.covers(&dir, &from));
        assert!(!k.covers(&dir, &Path::from("t/_delta_log/00000000000000000000")));
        assert!(!k.covers(&Path::from("u/_delta_log"), &from));
    }

    /// A commit file named for the last u64 version (any writer of the log can put one):
    /// nothing to look for after it, and no overflow.
    #[test]
    fn the_last_possible_version_has_no_next() {
        let dir = Path::from("t/_delta_log");
        let from = Path::from("t/_delta_log/00000000000000000000");
        let last = format!("t/_delta_log/{:020}.json", u64::MAX);
        let mut k = Known::listed(&dir, &from, &[meta(&last)]);
        assert_eq!(k.next_commit(), None);
        k.saw(&meta(&last));
        assert_eq!(k.newest(), Some(u64::MAX));
    }

    #[test]
    fn many_commits_since_the_listing_list_again() {
        let dir = Path::from("t/_delta_log");
        let from = Path::from("t/_delta_log/00000000000000000000");
        let mut k = Known::listed(
            &dir,
            &from,
            &[meta("t/_delta_log/00000000000000000000.json")],
        );
        for v in 1..=RELIST_COMMITS {
            assert!(k.covers(&dir, &from), "{v}");
            k.saw(&meta(&format!("t/_delta_log/{v:020}.json")));
        }
        assert!(!k.covers(&dir, &from));
    }

    #[test]
    fn only_log_directories_and_numbered_commits() {
        assert!(is_log_dir(&Path::from("lake/t/_delta_log")));
        assert!(!is_log_dir(&Path::from("lake/t/_delta_log_x")));
        assert_eq!(
            commit_version(&Path::from("t/_delta_log/00000000000000000042.json")),
            Some(42)
        );
        assert_eq!(
            commit_version(&Path::from("t/_delta_log/00000000000000000042.crc")),
            None
        );
        assert_eq!(commit_version(&Path::from("t/_delta_log/42.json")), None);
    }
}
