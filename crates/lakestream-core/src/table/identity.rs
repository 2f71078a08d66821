//! Is the table in storage still the one a warm handle loaded? A handle's head may run ahead of
//! storage safely only while the table is *the same table*: an operator may delete a table or
//! re-create it at the same path, and a handle kept across invocations would then skip records
//! by its cached `txn`s. Commit files are written once (put-if-absent), so the head's commit
//! file identifies the table: [`TableHandle::revalidate`] HEADs it once per invocation and
//! compares it with the [`HeadTag`] the handle noted when it wrote or read that file. Gone or
//! different means another table: the handle forgets everything and loads it again.

use super::handle::TableHandle;
use crate::error::{Error, Result};
use deltalake::logstore::object_store::{self, ObjectMeta, ObjectStoreExt};

/// The identity of one commit file: its version, ETag and size. Commit files are written once
/// (put-if-absent), so the same version with another ETag or size is another table's commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct HeadTag {
    version: u64,
    e_tag: Option<String>,
    size: u64,
}

impl HeadTag {
    fn of(version: u64, meta: &ObjectMeta) -> Self {
        Self {
            version,
            e_tag: meta.e_tag.clone(),
            size: meta.size,
        }
    }

    /// Whether `meta` (a HEAD of the same version's commit file) is the file this tag saw.
    /// Without an ETag on either side only the size can be compared.
    fn matches(&self, meta: &ObjectMeta) -> bool {
        self.size == meta.size
            && match (&self.e_tag, &meta.e_tag) {
                (Some(a), Some(b)) => a == b,
                _ => true,
            }
    }
}

/// `_delta_log/<20 digits>.json`, relative to the table root.
fn commit_file(version: u64) -> deltalake::Path {
    deltalake::Path::from(format!("_delta_log/{version:020}.json"))
}

impl TableHandle {
    /// Prove, with one HEAD of the head's commit file, that the table in storage is still the
    /// one this handle loaded; call it once per invocation on a handle kept warm. When the file
    /// is gone (the table was deleted, or re-created with fewer versions) or is another file
    /// (re-created by someone else: another ETag or size), the warm state is dropped — head,
    /// `txn` cache, cached log files — and the next [`sync`](Self::sync) loads the table
    /// again. Returns `false` when the state was dropped. A handle that has loaded nothing is
    /// left as it is. Errors are storage errors (retryable).
    pub async fn revalidate(&mut self) -> Result<bool> {
        // A new invocation: a contended handle looks for newer commits again before planning.
        self.looked = false;
        let Some(head) = self.version().filter(|_| self.exists) else {
            return Ok(true);
        };
        let found = self.commit_meta(head).await?;
        Ok(self.proves(head, found.as_ref()))
    }

    /// One HEAD of `version`'s commit file: its metadata, `None` when it is missing.
    async fn commit_meta(&self, version: u64) -> Result<Option<ObjectMeta>> {
        let store = self.table.log_store().object_store(None);
        match store.head(&commit_file(version)).await {
            Ok(meta) => Ok(Some(meta)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(Error::storage(&self.name, e)),
        }
    }

    /// [`revalidate`](Self::revalidate) and [`refresh`](Self::refresh) at once: the HEAD of the
    /// head's commit file and the GET of the next commit are in flight together (one wait at S3
    /// instead of two). The GET is spent for nothing when the table is another one; then the
    /// handle forgets what it knew and loads the table again, as `revalidate` makes the next
    /// refresh do. A handle that has loaded nothing just refreshes.
    pub async fn revalidate_and_refresh(&mut self) -> Result<bool> {
        match self.prove_and_look().await? {
            Some(advanced) => self.refresh_after(Some(advanced)).await,
            None => self.refresh().await,
        }
    }

    /// The requests of [`revalidate_and_refresh`](Self::revalidate_and_refresh), without the
    /// load: `Some` with what the GET found when the HEAD proved the head, `None` when there was
    /// nothing to prove (nothing loaded) or the table is another one (then forgotten). On an
    /// error nothing of the handle changed but its `looked` flag (cleared: a new invocation)
    /// and its log-read cache, which may hold the next commit (a real one of the same table, or
    /// forgotten when the next proof fails).
    pub(super) async fn prove_and_look(&mut self) -> Result<Option<Option<u64>>> {
        self.looked = false;
        let Some(head) = self.version().filter(|_| self.exists) else {
            return Ok(None);
        };
        let (found, advanced) = futures::join!(self.commit_meta(head), self.advance());
        if !self.proves(head, found?.as_ref()) {
            return Ok(None);
        }
        Ok(Some(advanced?))
    }

    /// [`revalidate`](Self::revalidate) and [`commit_time`](Self::commit_time) of `version` at
    /// once (two HEADs in flight together): whether the table is still the one loaded, and
    /// when it is, `version`'s commit time. Errors are storage errors (retryable).
    pub async fn revalidate_and_commit_time(
        &mut self,
        version: u64,
    ) -> Result<(bool, Option<chrono::DateTime<chrono::Utc>>)> {
        self.looked = false;
        let Some(head) = self.version().filter(|_| self.exists) else {
            return Ok((true, self.commit_time(version).await?));
        };
        let (found, time) = futures::join!(self.commit_meta(head), self.commit_time(version));
        if !self.proves(head, found?.as_ref()) {
            return Ok((false, None));
        }
        Ok((true, time?))
    }

    /// Whether `found` (a HEAD of the head's commit file, `None`: gone) is the file the handle
    /// noted; when not, the warm state is dropped (with a warning).
    fn proves(&mut self, head: u64, found: Option<&ObjectMeta>) -> bool {
        let same = match (found, &self.head_tag) {
            (Some(meta), Some(tag)) => tag.version == head && tag.matches(meta),
            _ => false,
        };
        if !same {
            tracing::warn!(
                table = %self.name,
                version = head,
                found = found.is_some(),
                "the table is not the one this warm handle loaded (deleted or re-created); loading it again"
            );
            self.forget();
        }
        same
    }

    /// Whether version `version` is committed, with one HEAD of its commit file (nothing is
    /// loaded): its commit time (the file's last-modified) when it is. A refine function asks
    /// this of a source instead of loading it when it only needs to know that it advanced.
    /// A commit file the handle's log-read cache holds is answered from it, without a request:
    /// the last-modified its GET returned, or for a commit this process wrote, the time its
    /// PUT returned (the process's clock).
    pub async fn commit_time(&self, version: u64) -> Result<Option<chrono::DateTime<chrono::Utc>>> {
        let name = format!("{version:020}.json");
        if let Some(meta) = self.log_reads.as_ref().and_then(|l| l.commit_meta(&name)) {
            return Ok(Some(meta.last_modified));
        }
        Ok(self.commit_meta(version).await?.map(|m| m.last_modified))
    }

    /// Drop everything the handle knows about the table: the next use loads it from storage.
    fn forget(&mut self) {
        if let Some(l) = &self.log_reads {
            l.clear();
        }
        self.table.state = None;
        self.exists = false;
        self.txns.reset(None);
        self.head = None;
        self.head_schema = None;
        self.head_tag = None;
    }

    /// The tag of the commit file of `version` when the log-read cache holds it.
    pub(super) fn held_tag(&self, version: u64) -> Option<HeadTag> {
        let name = format!("{version:020}.json");
        let meta = self.log_reads.as_ref()?.commit_meta(&name)?;
        Some(HeadTag::of(version, &meta))
    }

    /// Note the head's tag after a load: from the log-read cache when the load read the head's
    /// commit file, else with one HEAD (a head at a checkpoint version is loaded from the
    /// checkpoint). Without a tag the next [`revalidate`](Self::revalidate) reloads the table.
    pub(super) async fn note_head_tag(&mut self) {
        let Some(head) = self.head else {
            self.head_tag = None;
            return;
        };
        self.head_tag = match self.held_tag(head) {
            Some(tag) => Some(tag),
            None => match self
                .table
                .log_store()
                .object_store(None)
                .head(&commit_file(head))
                .await
            {
                Ok(meta) => Some(HeadTag::of(head, &meta)),
                Err(e) => {
                    tracing::debug!(table = %self.name, version = head, error = %e, "head commit not found after a load");
                    None
                }
            },
        };
    }
}
