//! Log objects read with aws-sdk-s3, with `If-Match` on the notified ETag; the idempotency key
//! is built from the key that was read and the ETag of the response (never the notification's
//! text), so the bytes ingested are exactly the ones it names. A response without an ETag is
//! refused (not retryable). A missing object is [`Fetched::Missing`], an
//! ETag mismatch (412) [`Fetched::Superseded`] (both recorded in dead letters by the core); every
//! other error is retryable (the message goes back to the queue, and after `maxReceiveCount` to
//! the queue's dead-letter queue). An object over the size limit is answered from its
//! `Content-Length` before the body is read ([`Fetched::TooLarge`]).
//!
//! CDC files are opened instead ([`ObjectSource::open`]): a HEAD with `If-Match`, then GETs of
//! that ETag, streamed (CSV, JSON lines) or by byte range (Parquet).

use aws_sdk_s3::Client;
use aws_sdk_s3::operation::get_object::GetObjectError;
use bytes::Bytes;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt};
use lakestream_core::access_log::{Fetched, ObjectSource, ObjectVersion, Opened, ReadObject};
use lakestream_core::{Error, Result};
use lakestream_formats::notification::LogObject;
use std::ops::Range;
use std::sync::Arc;

/// Reads objects from S3.
#[derive(Debug, Clone)]
pub struct S3Objects {
    client: Client,
}

impl S3Objects {
    /// Wrap a client built once in `main`.
    pub fn new(client: Client) -> Self {
        Self { client }
    }
}

/// `If-Match` on the notified ETag (none when the notification carried none).
fn if_match(object: &LogObject) -> Option<String> {
    object
        .etag
        .as_deref()
        .filter(|e| !e.is_empty())
        .map(|e| format!("\"{}\"", e.trim_matches('"')))
}

/// The ETag S3 answered with: the idempotency key needs the version read, so an answer without
/// one is refused (nothing of the object written).
fn answered_etag(e_tag: Option<&str>, object: &LogObject, request: &str) -> Result<String> {
    e_tag
        .map(|e| e.trim_matches('"'))
        .filter(|e| !e.is_empty())
        .map(str::to_string)
        .ok_or_else(|| Error::Fetch {
            object: object.uri(),
            message: format!(
                "the {request} answered without an ETag: refused, nothing of it written (the \
                 idempotency key needs the version read)"
            ),
            retryable: false,
        })
}

impl ObjectSource for S3Objects {
    async fn fetch(&self, object: &LogObject, max_bytes: u64) -> Result<Fetched> {
        for key in std::iter::once(&object.key).chain(object.alt_key.as_ref()) {
            let res = self
                .client
                .get_object()
                .bucket(&object.bucket)
                .key(key)
                .set_if_match(if_match(object))
                .send()
                .await;
            match res {
                Ok(out) => {
                    let etag = answered_etag(out.e_tag.as_deref(), object, "GET")?;
                    // The size is known from Content-Length before the body is read; the body
                    // is then read in chunks and given up past the limit (a server that sends
                    // more than it announced).
                    let announced = out.content_length.unwrap_or(0).max(0) as u64;
                    if announced > max_bytes {
                        return Ok(Fetched::TooLarge { size: announced });
                    }
                    let mut body = out.body;
                    let mut bytes = Vec::with_capacity(announced as usize);
                    while let Some(chunk) = body.try_next().await.map_err(|e| Error::Fetch {
                        object: object.uri(),
                        message: format!("reading the body failed: {e}"),
                        retryable: true,
                    })? {
                        if (bytes.len() + chunk.len()) as u64 > max_bytes {
                            return Ok(Fetched::TooLarge {
                                size: (bytes.len() + chunk.len()) as u64,
                            });
                        }
                        bytes.extend_from_slice(&chunk);
                    }
                    return Ok(Fetched::Object(ReadObject {
                        bytes,
                        key: key.clone(),
                        etag,
                    }));
                }
                Err(e) => {
                    if matches!(e.as_service_error(), Some(GetObjectError::NoSuchKey(_))) {
                        continue;
                    }
                    if e.raw_response().map(|r| r.status().as_u16()) == Some(412) {
                        return Ok(Fetched::Superseded);
                    }
                    return Err(Error::Fetch {
                        object: object.uri(),
                        message: aws_sdk_s3::error::DisplayErrorContext(&e).to_string(),
                        retryable: true,
                    });
                }
            }
        }
        Ok(Fetched::Missing)
    }

    async fn open(&self, object: &LogObject) -> Result<Opened> {
        for key in std::iter::once(&object.key).chain(object.alt_key.as_ref()) {
            if let Some(opened) = self.head(object, key).await? {
                return Ok(opened);
            }
        }
        Ok(Opened::Missing)
    }
}

/// One object version on S3: every read is a GET with `If-Match` on its ETag (a version
/// overwritten while it is read fails instead of mixing contents).
#[derive(Debug, Clone)]
struct S3Version {
    client: Client,
    bucket: String,
    key: String,
    etag: String,
    size: u64,
    written_us: Option<i64>,
}

impl S3Version {
    fn get(&self) -> aws_sdk_s3::operation::get_object::builders::GetObjectFluentBuilder {
        self.client
            .get_object()
            .bucket(&self.bucket)
            .key(&self.key)
            .if_match(format!("\"{}\"", self.etag))
    }

    /// A failed GET: `status` 412 means the version is gone (not retryable).
    fn error(&self, status: Option<u16>, text: String) -> Error {
        let superseded = status == Some(412);
        Error::Fetch {
            object: format!("s3://{}/{}", self.bucket, self.key),
            message: if superseded {
                "the object was overwritten while it was read: the chunks committed so far \
                 stay, the overwrite's own notification ingests the new content"
                    .into()
            } else {
                text
            },
            retryable: !superseded,
        }
    }
}

impl ObjectVersion for S3Version {
    fn key(&self) -> &str {
        &self.key
    }
    fn etag(&self) -> &str {
        &self.etag
    }
    fn size(&self) -> u64 {
        self.size
    }
    fn written_us(&self) -> Option<i64> {
        self.written_us
    }
    fn read_range(&self, range: Range<u64>) -> BoxFuture<'static, Result<Bytes>> {
        let this = self.clone();
        async move {
            if range.end <= range.start {
                return Ok(Bytes::new());
            }
            let out = this
                .get()
                .range(format!("bytes={}-{}", range.start, range.end - 1))
                .send()
                .await
                .map_err(|e| {
                    this.error(
                        e.raw_response().map(|r| r.status().as_u16()),
                        aws_sdk_s3::error::DisplayErrorContext(&e).to_string(),
                    )
                })?;
            let body = out.body.collect().await.map_err(|e| Error::Fetch {
                object: format!("s3://{}/{}", this.bucket, this.key),
                message: format!("reading the body failed: {e}"),
                retryable: true,
            })?;
            Ok(body.into_bytes())
        }
        .boxed()
    }
    fn stream(&self) -> BoxStream<'static, Result<Bytes>> {
        let this = self.clone();
        let body = async move {
            let out = this.get().send().await.map_err(|e| {
                this.error(
                    e.raw_response().map(|r| r.status().as_u16()),
                    aws_sdk_s3::error::DisplayErrorContext(&e).to_string(),
                )
            })?;
            let uri = format!("s3://{}/{}", this.bucket, this.key);
            Ok::<_, Error>(futures::stream::unfold(
                (out.body, uri),
                |(mut body, uri)| async move {
                    match body.try_next().await {
                        Ok(Some(chunk)) => Some((Ok(chunk), (body, uri))),
                        Ok(None) => None,
                        Err(e) => Some((
                            Err(Error::Fetch {
                                object: uri.clone(),
                                message: format!("reading the body failed: {e}"),
                                retryable: true,
                            }),
                            (body, uri),
                        )),
                    }
                },
            ))
        };
        futures::stream::once(body)
            .map(|r| match r {
                Ok(s) => s.boxed(),
                Err(e) => futures::stream::iter([Err(e)]).boxed(),
            })
            .flatten()
            .boxed()
    }
}

impl S3Objects {
    /// HEAD `key` with `If-Match` on the notified ETag: the version, or `None` when the key
    /// does not exist; `Err(Ok(Superseded))` style answers are mapped by the caller.
    async fn head(&self, object: &LogObject, key: &str) -> Result<Option<Opened>> {
        let res = self
            .client
            .head_object()
            .bucket(&object.bucket)
            .key(key)
            .set_if_match(if_match(object))
            .send()
            .await;
        match res {
            Ok(out) => {
                let etag = answered_etag(out.e_tag.as_deref(), object, "HEAD")?;
                Ok(Some(Opened::Version(Arc::new(S3Version {
                    client: self.client.clone(),
                    bucket: object.bucket.clone(),
                    key: key.to_string(),
                    etag,
                    size: out.content_length.unwrap_or(0).max(0) as u64,
                    written_us: out
                        .last_modified
                        .and_then(|t| i64::try_from(t.as_nanos() / 1_000).ok()),
                }))))
            }
            Err(e) => match e.raw_response().map(|r| r.status().as_u16()) {
                Some(404) => Ok(None),
                Some(412) => Ok(Some(Opened::Superseded)),
                _ => Err(Error::Fetch {
                    object: object.uri(),
                    message: aws_sdk_s3::error::DisplayErrorContext(&e).to_string(),
                    retryable: true,
                }),
            },
        }
    }
}
