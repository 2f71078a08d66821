//! Which storage a test runs on, and the S3 gating every suite shares: the S3 emulator is used
//! when `LAKESTREAM_TEST_S3_ENDPOINT` is set (`make test` starts moto and sets it), skipped with
//! a note otherwise, and its absence is a failure under `LAKESTREAM_REQUIRE_S3=1` (CI), so a
//! misconfigured run cannot pass by testing the filesystem only.

/// The storage a test lake lives on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// A temp dir.
    Fs,
    /// A fresh prefix of the test bucket on the S3 emulator.
    S3,
}

/// The backends this run covers: the filesystem always, S3 when the emulator is configured.
///
/// # Panics
/// When `LAKESTREAM_REQUIRE_S3=1` and `LAKESTREAM_TEST_S3_ENDPOINT` is not set.
pub fn backends() -> Vec<Backend> {
    let mut b = vec![Backend::Fs];
    if s3_endpoint().is_some() {
        b.push(Backend::S3);
    }
    b
}

/// The S3 emulator's endpoint, or `None` (with a note on stderr) when this run has none.
///
/// # Panics
/// When `LAKESTREAM_REQUIRE_S3=1` and `LAKESTREAM_TEST_S3_ENDPOINT` is not set: a run that must
/// cover S3 fails instead of skipping.
pub fn s3_endpoint() -> Option<String> {
    if let Ok(endpoint) = std::env::var("LAKESTREAM_TEST_S3_ENDPOINT") {
        return Some(endpoint);
    }
    #[allow(clippy::panic)]
    if std::env::var("LAKESTREAM_REQUIRE_S3").is_ok_and(|v| v == "1") {
        panic!(
            "LAKESTREAM_REQUIRE_S3=1 but LAKESTREAM_TEST_S3_ENDPOINT is not set: start the S3 \
             emulator (`make moto-start`) and set it, as `make test` does"
        );
    }
    eprintln!(
        "note: S3 backend skipped (LAKESTREAM_TEST_S3_ENDPOINT not set; `make test` sets it)"
    );
    None
}

/// The test bucket on the emulator (`LAKESTREAM_TEST_S3_BUCKET`, default `lakestream-test`,
/// which `scripts/moto.sh` creates).
pub fn s3_bucket() -> String {
    std::env::var("LAKESTREAM_TEST_S3_BUCKET").unwrap_or_else(|_| "lakestream-test".into())
}

/// A random suffix that keeps prefixes and keys of concurrent tests and runs apart.
pub fn unique_suffix() -> String {
    format!("{:016x}", fastrand::u64(..))
}
