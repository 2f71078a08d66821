//! Realistic generated access-log lines (demo, tests, benchmarks): several buckets, GET/PUT/HEAD
//! and lifecycle operations, quoted user agents with spaces and parentheses, `-` fields, and
//! a mix of recent and years-old keys (what the seed's platform team wants to see).

use chrono::{DateTime, Utc};

const OWNER: &str = "79a59df900b949e55d96a1e698fbacedfd6e09d98eacf8f8d5218e7cd47ef2be";
const AGENTS: [&str; 4] = [
    "\"aws-cli/2.15.0 Python/3.11.6 Linux/6.1.0 exe/x86_64.amzn.2 prompt/off command/s3.cp\"",
    "\"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36\"",
    "\"aws-sdk-java/2.20.0 Linux/5.10 OpenJDK_64-Bit_Server_VM/17.0.8+7-LTS Java/17.0.8 vendor/Amazon.com_Inc. exec-env/AWS_ECS_FARGATE io/sync http/Apache cfg/retry-mode/legacy\"",
    "\"Trino/435 (presto-s3)\"",
];

/// `n` lines spread over `buckets`, one second apart from `start`.
pub fn generate_lines(seed: u64, n: usize, buckets: &[&str], start: DateTime<Utc>) -> String {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut out = String::with_capacity(n * 420);
    for i in 0..n {
        let bucket = buckets[rng.usize(0..buckets.len().max(1))];
        let t = start + chrono::Duration::seconds(i as i64);
        let year = if rng.u8(0..10) < 7 {
            2026
        } else {
            rng.i32(2015..2026)
        };
        let key = format!(
            "sales/{year}/{:02}/part-{:05}.parquet",
            rng.u8(1..13),
            rng.u32(0..100_000)
        );
        let (op, method, status, sent) = match rng.u8(0..10) {
            0..=5 => (
                "REST.GET.OBJECT",
                "GET",
                200,
                rng.u32(1_000..5_000_000).to_string(),
            ),
            6 => ("REST.PUT.OBJECT", "PUT", 200, "-".to_string()),
            7 => ("REST.HEAD.OBJECT", "HEAD", 404, "-".to_string()),
            8 => (
                "REST.GET.OBJECT",
                "GET",
                206,
                rng.u32(1..65_536).to_string(),
            ),
            _ => ("S3.TRANSITION_SIA.OBJECT", "-", 0, "-".to_string()),
        };
        let uri = if method == "-" {
            "-".to_string()
        } else {
            format!("\"{method} /{bucket}/{key} HTTP/1.1\"")
        };
        let status = if status == 0 {
            "-".to_string()
        } else {
            status.to_string()
        };
        let agent = AGENTS[rng.usize(0..AGENTS.len())];
        out.push_str(&format!(
            "{OWNER} {bucket} [{}] 198.51.100.{} arn:aws:sts::123456789012:assumed-role/analytics/session-{} {:016X} {op} {key} {uri} {status} - {sent} {} {} {} \"-\" {agent} - {}= SigV4 ECDHE-RSA-AES128-GCM-SHA256 AuthHeader {bucket}.s3.us-east-1.amazonaws.com TLSv1.3 - - us-east-1\n",
            t.format("%d/%b/%Y:%H:%M:%S +0000"),
            rng.u8(1..255),
            rng.u16(..),
            rng.u64(..),
            rng.u32(1..10_000_000),
            rng.u32(1..900),
            rng.u32(1..300),
            rng.u64(..)
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use lakestream_formats::access_log::parse_line;

    #[test]
    fn generated_lines_parse() {
        let text = generate_lines(
            3,
            500,
            &["a", "b"],
            DateTime::from_timestamp(1_795_939_200, 0).unwrap_or_default(),
        );
        let mut n = 0;
        for line in text.lines() {
            let r = parse_line(line);
            assert!(r.is_ok(), "{r:?}: {line}");
            n += 1;
        }
        assert_eq!(n, 500);
    }
}
