//! [`LogReads`] as an object store: commit files and whole checkpoints from memory, listings of
//! the log from what is known, everything else passed on; writes and deletes under the log keep
//! what is known current (or make it forget).

use super::known::is_log_dir;
use super::{LogReads, is_checkpoint_range, is_commit_file, is_plain, not_found, slice};
use async_trait::async_trait;
use bytes::Bytes;
use deltalake::logstore::object_store::{
    self, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore, PutMode,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, path::Path,
};
use futures::StreamExt;
use futures::stream::BoxStream;

/// Under a `_delta_log` directory.
fn in_log(location: &Path) -> bool {
    location.as_ref().contains("_delta_log/")
}

/// `…/_delta_log/_last_checkpoint`.
fn is_hint(location: &Path) -> bool {
    in_log(location) && location.filename() == Some("_last_checkpoint")
}

/// `…/_delta_log/<v>.checkpoint….parquet`.
fn is_checkpoint(location: &Path) -> bool {
    in_log(location)
        && location
            .filename()
            .is_some_and(|n| n.contains(".checkpoint") && n.ends_with(".parquet"))
}

#[async_trait]
impl ObjectStore for LogReads {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        let commit = matches!(opts.mode, PutMode::Create) && is_commit_file(location);
        let noted = commit || is_checkpoint(location);
        let kept = noted.then(|| payload.clone());
        if is_hint(location) {
            *self.hint.lock().unwrap_or_else(|p| p.into_inner()) = None;
        }
        let result = self.inner.put_opts(location, payload, opts).await?;
        if let Some(payload) = kept {
            let bytes = match payload.as_ref() {
                [one] => one.clone(),
                parts => Bytes::from(parts.concat()),
            };
            let meta = ObjectMeta {
                location: location.clone(),
                last_modified: chrono::Utc::now(),
                size: bytes.len() as u64,
                e_tag: result.e_tag.clone(),
                version: result.version.clone(),
            };
            if let Some(k) = self
                .known
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .as_mut()
            {
                k.saw(&meta);
            }
            if commit {
                self.commits
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .keep(location, meta, bytes);
            }
        }
        Ok(result)
    }
    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        if in_log(location) {
            self.log().forget(); // a checkpoint in parts: listed again
        }
        self.inner.put_multipart_opts(location, opts).await
    }
    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        let got = self.get_through(location, options).await;
        // A checkpoint (any log file but a commit, looked up on purpose, or the hint) found
        // missing: what the listing names may be gone; list again.
        if matches!(got, Err(object_store::Error::NotFound { .. }))
            && in_log(location)
            && !is_commit_file(location)
            && !is_hint(location)
        {
            self.log().forget();
        }
        got
    }
    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        let log = self.log();
        let watched = locations
            .inspect(move |l| {
                if l.as_ref().is_ok_and(in_log) {
                    log.forget();
                }
            })
            .boxed();
        self.inner.delete_stream(watched)
    }
    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list(prefix)
    }
    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        let Some(dir) = prefix.filter(|p| is_log_dir(p)).cloned() else {
            return self.inner.list_with_offset(prefix, offset);
        };
        let log = self.log();
        let offset = offset.clone();
        futures::stream::once(async move { log.answer(&dir, &offset).await })
            .flat_map(|answer| match answer {
                Ok(metas) => futures::stream::iter(metas.into_iter().map(Ok)).boxed(),
                Err(e) => futures::stream::iter([Err(e)]).boxed(),
            })
            .boxed()
    }
    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }
    async fn copy_opts(
        &self,
        from: &Path,
        to: &Path,
        options: object_store::CopyOptions,
    ) -> object_store::Result<()> {
        if in_log(to) {
            self.log().forget();
        }
        self.inner.copy_opts(from, to, options).await
    }
}

impl LogReads {
    /// A GET answered from memory where it can be (see the module docs).
    async fn get_through(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        if is_checkpoint_range(location, &options)
            && let Some(range) = &options.range
            && let Some((meta, bytes)) = self.whole_checkpoint(location).await?
        {
            return slice(meta, &bytes, Some(range));
        }
        if is_plain(&options) && options.range.is_none() && is_hint(location) {
            return self.last_checkpoint(location).await;
        }
        if !(is_plain(&options) && is_commit_file(location)) {
            return self.inner.get_opts(location, options).await;
        }
        match self.log().commit(location).await? {
            Some((meta, bytes)) => slice(meta, &bytes, options.range.as_ref()),
            None => Err(not_found(location)),
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn log_paths() {
        use super::*;
        assert!(is_hint(&Path::from("t/_delta_log/_last_checkpoint")));
        assert!(is_checkpoint(&Path::from(
            "t/_delta_log/00000000000000000010.checkpoint.parquet"
        )));
        assert!(!is_checkpoint(&Path::from("t/x.checkpoint.parquet")));
        assert!(
            super::super::known::commit_version(&Path::from(
                "t/_delta_log/00000000000000000010.json"
            ))
            .is_some()
        );
    }
}
