//! s3-log-ingest
