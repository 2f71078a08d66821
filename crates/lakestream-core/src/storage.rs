//! Where tables live: the lake root as a URL plus the storage options delta-rs needs. The same
//! code path serves a filesystem lake and S3 (or an S3-compatible server). An S3 lake carries
//! its [`Probe`]: no write reaches it before the endpoint is shown to refuse a second
//! create-only PUT ([`put_probe`](crate::put_probe)).

use crate::error::{Error, Result};
use crate::partition_path::{MAX_SEGMENT, PartitionLimits};
use crate::put_probe::Probe;
use deltalake::logstore::object_store::ObjectStore;
use lakestream_formats::config::LakeConfig;
use lakestream_formats::names::check_table_path;
use std::collections::HashMap;
use std::sync::Arc;
use url::Url;

/// Wraps the object store a table's log and reads go through (fault injection, request counting).
pub type StoreWrapper = Arc<dyn Fn(Arc<dyn ObjectStore>) -> Arc<dyn ObjectStore> + Send + Sync>;

/// A resolved lake: root URL and storage options.
#[derive(Clone)]
pub struct Lake {
    root: Url,
    options: HashMap<String, String>,
    wrapper: Option<StoreWrapper>,
    probe: Option<Arc<Probe>>,
}

impl std::fmt::Debug for Lake {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lake")
            .field("root", &self.root.as_str())
            .field("wrapped", &self.wrapper.is_some())
            .finish()
    }
}

impl Lake {
    /// Resolve a lake config. Relative filesystem paths resolve against the working directory.
    /// Registers delta-rs's S3 support (idempotent).
    pub fn new(cfg: &LakeConfig) -> Result<Self> {
        deltalake::aws::register_handlers(None);
        let root = parse_root(&cfg.root)?;
        let mut options: HashMap<String, String> = cfg
            .storage_options
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if root.scheme() == "s3" {
            if let Some(endpoint) = &cfg.endpoint_url {
                options.insert("AWS_ENDPOINT_URL".into(), endpoint.clone());
            }
            if let Some(region) = &cfg.region {
                options.insert("AWS_REGION".into(), region.clone());
            }
            if cfg.allow_http {
                options.insert("AWS_ALLOW_HTTP".into(), "true".into());
            }
            // Commits rely on conditional put (If-None-Match: *); never on unsafe rename.
            options.insert("AWS_S3_ALLOW_UNSAFE_RENAME".into(), "false".into());
        }
        let probe = (root.scheme() == "s3" && !cfg.assume_conditional_put)
            .then(|| Probe::for_lake(&root, cfg.endpoint_url.as_deref()));
        Ok(Self {
            root,
            options,
            wrapper: None,
            probe,
        })
    }

    /// The same lake with every table's object store wrapped by `wrapper` (tests inject faults
    /// and hooks here; production never sets it).
    pub fn with_store_wrapper(mut self, wrapper: StoreWrapper) -> Self {
        self.wrapper = Some(wrapper);
        self
    }

    /// The store wrapper, if any.
    pub fn store_wrapper(&self) -> Option<&StoreWrapper> {
        self.wrapper.as_ref()
    }

    /// The conditional-put probe writes wait for: `None` for a filesystem lake or when
    /// `assume_conditional_put` is set.
    pub fn put_probe(&self) -> Option<&Arc<Probe>> {
        self.probe.as_ref()
    }

    /// A lake rooted at a local directory (created if missing).
    pub fn local(dir: &std::path::Path) -> Result<Self> {
        Self::new(&LakeConfig {
            root: dir.to_string_lossy().into_owned(),
            endpoint_url: None,
            region: None,
            allow_http: false,
            storage_options: Default::default(),
            assume_conditional_put: false,
        })
    }

    /// The lake root URL.
    pub fn root(&self) -> &Url {
        &self.root
    }

    /// Storage options for delta-rs.
    pub fn storage_options(&self) -> &HashMap<String, String> {
        &self.options
    }

    /// True for a filesystem lake.
    pub fn is_local(&self) -> bool {
        self.root.scheme() == "file"
    }

    /// URL of a table (`raw/order` -> `<root>/raw/order/`). Local table directories are created.
    ///
    /// Every table open goes through here, so this is where the lake refuses a name that is
    /// not a plain relative path under the root ([`check_table_path`]: no `%`, `?`, `#`, `\`,
    /// empty, `.`-leading (`.`, `..`) or `_`-leading segments but `_lakestream/`), and a location that leaves
    /// less than [`FILES_RESERVE`] bytes for the files under it within the storage's limit
    /// ([`MAX_FS_PATH`], [`MAX_S3_KEY`]). The URL is built segment by segment, never by URL
    /// resolution, and must stay under the root. Refusals are [`Error::TablePath`] (permanent).
    pub fn table_url(&self, table: &str) -> Result<Url> {
        let refuse = |reason: String| Error::TablePath {
            table: table.escape_debug().to_string(),
            reason,
        };
        let (url, len, limit, what) = self.locate(table)?;
        if len + FILES_RESERVE > limit {
            return Err(refuse(format!(
                "its location is {len} bytes: too long, the files under it need {FILES_RESERVE} \
                 more and {what} is {limit} bytes; use a shorter name (or lake root)"
            )));
        }
        if self.is_local()
            && let Ok(path) = url.to_file_path()
        {
            std::fs::create_dir_all(&path).map_err(|e| {
                if e.kind() == std::io::ErrorKind::InvalidFilename {
                    refuse(format!(
                        "its location is too long for the file system ({e})"
                    ))
                } else {
                    Error::Io {
                        path: path.display().to_string(),
                        source: e,
                    }
                }
            })?;
        }
        Ok(url)
    }

    /// How long the partition directories of `table`'s data files may be: [`MAX_SEGMENT`]
    /// bytes per `<col>=<value>` segment, and all of them within what the storage's limit
    /// ([`MAX_S3_KEY`], [`MAX_FS_PATH`]) leaves after the table's location and
    /// [`FILES_RESERVE`] bytes for a data file's name. The ingest dead-letters a record whose
    /// partition values do not fit ([`oversized_rows`](crate::partition_path::oversized_rows)).
    pub fn partition_limits(&self, table: &str) -> Result<PartitionLimits> {
        let (_, len, limit, store) = self.locate(table)?;
        Ok(PartitionLimits {
            segment: MAX_SEGMENT,
            dir: limit.saturating_sub(len + FILES_RESERVE),
            store,
        })
    }

    /// The checked URL of `table`, the length of its location (key prefix on S3, path on a
    /// file system), the storage's limit for that length and the limit's name.
    fn locate(&self, table: &str) -> Result<(Url, usize, usize, &'static str)> {
        let refuse = |reason: String| Error::TablePath {
            table: table.escape_debug().to_string(),
            reason,
        };
        check_table_path(table).map_err(refuse)?;
        let mut url = self.root.clone();
        url.path_segments_mut()
            .map_err(|()| refuse(format!("the lake root {} has no path", self.root)))?
            .pop_if_empty()
            .extend(table.split('/'))
            .push("");
        if !url.as_str().starts_with(self.root.as_str()) || url.query().is_some() {
            return Err(refuse(format!(
                "it resolves to {url}, outside the lake root"
            )));
        }
        let (len, limit, what) = if self.is_local() {
            let path = url
                .to_file_path()
                .map_err(|()| refuse(format!("{url} is not a local path")))?;
            (
                path.as_os_str().len(),
                MAX_FS_PATH,
                "the file system's path limit",
            )
        } else {
            (
                url.path().trim_matches('/').len(),
                MAX_S3_KEY,
                "S3's key limit",
            )
        };
        Ok((url, len, limit, what))
    }
}

/// Bytes a table's location leaves for the files under it: the log (`_delta_log/` and its
/// commit, checkpoint and temporary files), partition directories (an access-log table's
/// `bucket=<63 bytes>/date=YYYY-MM-DD/`) and data files (`part-00000-<uuid>-c000.snappy.parquet`).
pub const FILES_RESERVE: usize = 160;

/// The longest path the file system takes, in bytes (Linux `PATH_MAX` less the terminating NUL).
pub const MAX_FS_PATH: usize = 4095;

/// The longest S3 object key, in bytes.
pub const MAX_S3_KEY: usize = 1024;

fn parse_root(root: &str) -> Result<Url> {
    let with_slash = |s: &str| {
        if s.ends_with('/') {
            s.to_string()
        } else {
            format!("{s}/")
        }
    };
    if root.starts_with("s3://") || root.starts_with("file://") {
        return Url::parse(&with_slash(root))
            .map_err(|e| Error::Config(format!("`lake.root` = \"{root}\": {e}")));
    }
    let path = std::path::Path::new(root);
    let abs = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .map_err(|e| Error::Io {
                path: ".".into(),
                source: e,
            })?
            .join(path)
    };
    std::fs::create_dir_all(&abs).map_err(|e| Error::Io {
        path: abs.display().to_string(),
        source: e,
    })?;
    Url::from_directory_path(&abs)
        .map_err(|()| Error::Config(format!("`lake.root` = \"{root}\" is not a usable path")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_urls() -> anyhow::Result<()> {
        let lake = Lake::new(&LakeConfig {
            root: "s3://bucket/prefix".into(),
            endpoint_url: Some("http://127.0.0.1:5000".into()),
            region: Some("us-east-1".into()),
            allow_http: true,
            storage_options: Default::default(),
            assume_conditional_put: false,
        })?;
        assert_eq!(
            lake.table_url("raw/order")?.as_str(),
            "s3://bucket/prefix/raw/order/"
        );
        assert_eq!(lake.storage_options()["AWS_ALLOW_HTTP"], "true");
        let dir = tempfile::tempdir()?;
        let local = Lake::local(dir.path())?;
        assert!(lake.put_probe().is_some() && local.put_probe().is_none());
        let url = local.table_url("raw/member")?;
        assert!(url.as_str().starts_with("file://") && url.as_str().ends_with("/raw/member/"));
        assert!(dir.path().join("raw/member").is_dir());
        Ok(())
    }
}
