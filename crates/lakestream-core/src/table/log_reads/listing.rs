//! Listings of a table's log answered from [`Known`], and the lookups that keep it current:
//! [`Log::advance`] GETs the next commit file until one is missing (its bodies kept for the
//! replay that follows), [`Log::discover`] finds a cold load's listing (by GETs from
//! `_last_checkpoint`, `probe.rs`, else one LIST), [`Log::answer`] answers
//! the kernel's listing (a real LIST when nothing known covers it).

use super::Commits;
use super::known::{Known, commit_version};
use bytes::Bytes;
use deltalake::logstore::object_store::{self, GetOptions, ObjectMeta, ObjectStore, path::Path};
use futures::TryStreamExt;
use std::sync::{Arc, Mutex, MutexGuard};

/// New commits looked up one GET at a time before a LIST is cheaper (a LIST costs 12.5 GETs,
/// and lists up to 1,000 names at once).
pub const LOOKUPS: u32 = 10;

/// The parts of [`LogReads`](super::LogReads) a listing needs (shared, so a listing's stream
/// owns them).
#[derive(Clone)]
pub(super) struct Log {
    pub(super) inner: Arc<dyn ObjectStore>,
    pub(super) commits: Arc<Mutex<Commits>>,
    pub(super) known: Arc<Mutex<Option<Known>>>,
    /// How young a hinted checkpoint must be for a cold load to look instead of listing.
    pub(super) probe_age: std::time::Duration,
}

impl Log {
    fn known(&self) -> MutexGuard<'_, Option<Known>> {
        self.known.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Forget what the log holds: the next listing is a real LIST.
    pub(super) fn forget(&self) {
        *self.known() = None;
    }

    /// A commit file from memory or one GET (kept, and noted as existing); `None` when it is
    /// missing (a missing file the known listing names makes it forget that listing).
    pub(super) async fn commit(
        &self,
        location: &Path,
    ) -> object_store::Result<Option<(ObjectMeta, Bytes)>> {
        let held = self
            .commits
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .find(location);
        let (meta, bytes) = match held {
            Some(hit) => hit,
            None => match self.inner.get_opts(location, GetOptions::default()).await {
                Ok(got) => {
                    let meta = got.meta.clone();
                    let bytes = got.bytes().await?;
                    self.commits.lock().unwrap_or_else(|p| p.into_inner()).keep(
                        location,
                        meta.clone(),
                        bytes.clone(),
                    );
                    (meta, bytes)
                }
                Err(object_store::Error::NotFound { .. }) => {
                    let mut known = self.known();
                    if known.as_ref().is_some_and(|k| k.names(location)) {
                        *known = None;
                    }
                    return Ok(None);
                }
                Err(e) => return Err(e),
            },
        };
        if let Some(k) = self.known().as_mut() {
            k.saw(&meta);
        }
        Ok(Some((meta, bytes)))
    }

    /// Find the commits after the newest known one (a GET of the next until one is missing)
    /// and return the newest version known; `None` when no listing is known (nothing to go
    /// on: the caller refreshes the usual way). The next listing is answered without a GET.
    /// Far behind (more than [`LOOKUPS`] new commits: another writer's burst, a long pause),
    /// it forgets the listing and returns `None`: one LIST then beats GETs one at a time.
    pub(super) async fn advance(&self) -> object_store::Result<Option<u64>> {
        let mut found = 0;
        loop {
            let next = match self.known().as_ref() {
                Some(k) => k.next_commit(),
                None => return Ok(None),
            };
            let Some(next) = next else { return Ok(None) };
            if self.commit(&next).await?.is_none() {
                break;
            }
            found += 1;
            if found > LOOKUPS {
                self.forget();
                return Ok(None);
            }
        }
        let mut known = self.known();
        Ok(known.as_mut().and_then(|k| {
            k.looked();
            k.newest()
        }))
    }

    /// A real LIST of `dir` after `offset`, remembered.
    pub(super) async fn list(
        &self,
        dir: &Path,
        offset: &Path,
    ) -> object_store::Result<Vec<ObjectMeta>> {
        let metas: Vec<ObjectMeta> = self
            .inner
            .list_with_offset(Some(dir), offset)
            .try_collect()
            .await?;
        let mut known = Known::listed(dir, offset, &metas);
        known.looked();
        *self.known() = Some(known);
        Ok(metas)
    }

    /// The listing of `dir` after `offset`: from what is known (after finding the commits added
    /// since, unless looked for within [`FRESH`](super::known::FRESH)) when it covers the
    /// request, else a real LIST.
    pub(super) async fn answer(
        &self,
        dir: &Path,
        offset: &Path,
    ) -> object_store::Result<Vec<ObjectMeta>> {
        let stale = self
            .known()
            .as_ref()
            .filter(|k| k.covers(dir, offset))
            .map(Known::stale);
        let Some(stale) = stale else {
            return self.list(dir, offset).await;
        };
        if stale {
            self.advance().await?;
        }
        let answered = self
            .known()
            .as_ref()
            .filter(|k| k.covers(dir, offset))
            .map(|k| k.after(offset));
        match answered {
            Some(metas) => Ok(metas),
            None => self.list(dir, offset).await,
        }
    }

    /// Whether `dir` holds a table (a commit or a checkpoint; a leftover `_last_checkpoint`
    /// alone is none), and the listing the load that follows asks for (the log after
    /// `_last_checkpoint`'s version, `hint` as read by the caller), answered from it: found by
    /// a HEAD and GETs when that can stand in for a LIST ([`probe`](super::probe)), else with
    /// one LIST.
    pub(super) async fn discover(
        &self,
        dir: &Path,
        hint: Option<&Bytes>,
    ) -> object_store::Result<bool> {
        if self.probe(dir, hint).await? {
            return Ok(true);
        }
        let start = hint.and_then(hint_version);
        let offset = dir
            .clone()
            .join(format!("{:020}", start.unwrap_or(0)).as_str());
        let metas = self.list(dir, &offset).await?;
        Ok(metas.iter().any(|m| {
            commit_version(&m.location).is_some()
                || m.location
                    .filename()
                    .is_some_and(|n| n.contains(".checkpoint") && n.ends_with(".parquet"))
        }))
    }
}

impl Log {
    /// `_last_checkpoint` at `location` was read from storage: when it names a checkpoint the
    /// known listing lacks, forget the listing (the load that follows lists from it for real).
    pub(super) fn hint_read(&self, location: &Path, body: &Bytes) {
        let Some(v) = hint_version(body) else {
            return;
        };
        let mut known = self.known();
        if known
            .as_ref()
            .is_some_and(|k| k.lacks_checkpoint(location, v))
        {
            *known = None;
        }
    }
}

/// The `version` of a `_last_checkpoint` body.
fn hint_version(body: &Bytes) -> Option<u64> {
    let value: serde_json::Value = serde_json::from_slice(body).ok()?;
    value.get("version")?.as_u64()
}
