//! What a storage error's source chain says: a [`Refusal`] of the lake (unsafe storage), an S3
//! `400` that retrying cannot fix, a file name the file system refuses. [`Error::storage`]
//! classifies by these.
//!
//! [`Error::storage`]: super::Error::storage

/// Why Lakestream refuses to write to a lake: its endpoint ignores `If-None-Match`, or the
/// probe that checks it (the `put_probe` module, which makes them) was not allowed to write.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct Refusal(pub(crate) String);

/// The [`Refusal`] somewhere in `e`'s source chain, if any.
pub(super) fn refusal_in(e: &(dyn std::error::Error + 'static)) -> Option<Refusal> {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(r) = err.downcast_ref::<Refusal>() {
            return Some(r.clone());
        }
        cur = err.source();
    }
    None
}

/// S3 error codes that answer a data-file PUT with `400 Bad Request` for the key or the object
/// itself: the same PUT fails the same way every time. Other 400s are left retryable (S3 also
/// answers 400 for `RequestTimeout`, `ExpiredToken`, `BadDigest`, `IncompleteBody`, which a
/// retry can fix).
const PERMANENT_PUT_CODES: &[&str] = &["KeyTooLongError", "EntityTooLarge", "MetadataTooLarge"];

/// The S3 error code of a `400` answer to a PUT that retrying cannot fix, anywhere in `e`'s
/// source chain (a PUT, or the POST of a multipart upload). object_store's request error is
/// private: it is recognised by its text (`Error performing PUT ... status code: 400 ...<Code>KeyTooLongError</Code>`).
pub(crate) fn permanent_put_refusal(e: &(dyn std::error::Error + 'static)) -> Option<&'static str> {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    let (mut put, mut bad_request) = (false, false);
    while let Some(err) = cur {
        let text = err.to_string();
        put |= text.contains("Error performing PUT ") || text.contains("Error performing POST ");
        bad_request |= text.contains("status code: 400 ");
        if put
            && bad_request
            && let Some(code) = PERMANENT_PUT_CODES
                .iter()
                .find(|c| text.contains(&format!("<Code>{c}</Code>")))
        {
            return Some(code);
        }
        cur = err.source();
    }
    None
}

/// The file system's "file name too long" (`ENAMETOOLONG`) anywhere in `e`'s source chain.
pub(super) fn name_too_long<'a>(
    e: &'a (dyn std::error::Error + 'static),
) -> Option<&'a std::io::Error> {
    let mut cur: Option<&'a (dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(io) = err.downcast_ref::<std::io::Error>()
            && io.kind() == std::io::ErrorKind::InvalidFilename
        {
            return Some(io);
        }
        cur = err.source();
    }
    None
}
