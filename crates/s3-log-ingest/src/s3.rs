//! Log objects read with aws-sdk-s3, with `If-Match` on the notified ETag; the idempotency key
//! is built from the key that was read and the ETag of the response (never the notification's
//! text), so the bytes ingested are exactly the ones it names. A response without an ETag is
//! refused (not retryable). A missing object is [`Fetched::Missing`], an
//! ETag mismatch (412) [`Fetched::Superseded`] (both recorded in dead letters by the core); every
//! other error is retryable (the message goes back to the queue, and after `maxReceiveCount` to
//! the queue's dead-letter queue). An object over the size limit is answered from its
//! `Content-Length` before the body is read ([`Fetched::TooLarge`]).

use aws_sdk_s3::Client;
use aws_sdk_s3::operation::get_object::GetObjectError;
use lakestream_core::access_log::{Fetched, ObjectSource, ReadObject};
use lakestream_core::{Error, Result};
use lakestream_formats::notification::LogObject;

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

impl ObjectSource for S3Objects {
    async fn fetch(&self, object: &LogObject, max_bytes: u64) -> Result<Fetched> {
        for key in std::iter::once(&object.key).chain(object.alt_key.as_ref()) {
            let res = self
                .client
                .get_object()
                .bucket(&object.bucket)
                .key(key)
                .set_if_match(
                    object
                        .etag
                        .as_deref()
                        .filter(|e| !e.is_empty())
                        .map(|e| format!("\"{}\"", e.trim_matches('"'))),
                )
                .send()
                .await;
            match res {
                Ok(out) => {
                    let etag = out
                        .e_tag
                        .as_deref()
                        .map(|e| e.trim_matches('"'))
                        .filter(|e| !e.is_empty())
                        .ok_or_else(|| Error::Fetch {
                            object: object.uri(),
                            message: "the GET answered without an ETag: refused, nothing of it \
                                      written (the idempotency key needs the version read)"
                                .into(),
                            retryable: false,
                        })?
                        .to_string();
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
}
