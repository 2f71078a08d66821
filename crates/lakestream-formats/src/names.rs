//! Names that become storage paths: table names (relative paths under the lake root) and S3
//! bucket names (an access-log line's `bucket` field names its table). Both come from outside —
//! a config, a log line anyone who can write the raw-logs bucket controls — so they are checked
//! here, once, by rules that leave nothing a URL or a file system would interpret: no `..`,
//! `.`, `%`, `?`, `#`, `\`, empty segments, segments starting with `.` (hidden files) or `_`
//! (`_delta_log`, `_symlink_format_manifest`); the only `_` name is the product's own
//! `_lakestream/` tree. The config refuses that one too (`config::validate`).

/// The longest segment of a table name, in bytes (a file name on common file systems).
pub const MAX_SEGMENT_BYTES: usize = 255;

/// The first segment of Lakestream's own tables (`_lakestream/<job>/tombstones`).
pub const INTERNAL_TREE: &str = "_lakestream";

/// Check that `name` is a plain relative table path: `/`-separated segments of
/// `[A-Za-z0-9_.=-]`, none empty, none starting with `.` (`.`, `..`, hidden files), none longer
/// than [`MAX_SEGMENT_BYTES`], none starting with `_` but a first segment [`INTERNAL_TREE`]. The
/// error says what is wrong.
pub fn check_table_path(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("the name is empty".into());
    }
    for (i, seg) in name.split('/').enumerate() {
        let shown = seg.escape_debug();
        if seg.is_empty() {
            return Err("it has an empty segment (a leading, trailing or doubled `/`)".into());
        }
        if seg == "." || seg == ".." {
            return Err(format!("segment `{seg}` would leave its place"));
        }
        if seg.starts_with('.') {
            return Err(format!(
                "segment `{}` starts with `.` (a hidden file)",
                seg.escape_debug()
            ));
        }
        if let Some(c) = seg
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '=')))
        {
            return Err(format!(
                "segment `{shown}` contains `{}`, outside [A-Za-z0-9_.=-]",
                c.escape_debug()
            ));
        }
        if seg.starts_with('_') && !(i == 0 && seg == INTERNAL_TREE) {
            return Err(format!(
                "segment `{shown}` starts with `_`, reserved for Delta and Lakestream files"
            ));
        }
        if seg.len() > MAX_SEGMENT_BYTES {
            return Err(format!(
                "segment of {} bytes is too long (at most {MAX_SEGMENT_BYTES})",
                seg.len()
            ));
        }
    }
    Ok(())
}

/// Check `name` against S3's naming rules for general purpose buckets: 3-63 characters of
/// lowercase letters, digits, `.` and `-`, beginning and ending with a letter or digit, no `..`,
/// not shaped like an IPv4 address, none of the reserved prefixes (`xn--`, `sthree-`) and
/// suffixes (`-s3alias`, `--ol-s3`, `.mrap`, `--x-s3`, `--table-s3`). Legacy us-east-1 names
/// (upper case, `_`, up to 255 characters; not creatable since 2018) are refused too. The error
/// names the rule broken.
pub fn check_bucket_name(name: &str) -> Result<(), String> {
    let n = name.len();
    if !(3..=63).contains(&n) {
        return Err(format!("{n} characters; a bucket name has 3 to 63"));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '-')))
    {
        return Err(format!(
            "`{}` is not a lowercase letter, digit, `.` or `-`",
            c.escape_debug()
        ));
    }
    let alnum = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    if !alnum(name.chars().next()) || !alnum(name.chars().last()) {
        return Err("it must begin and end with a letter or digit".into());
    }
    if name.contains("..") {
        return Err("it has two adjacent periods".into());
    }
    if name.split('.').count() == 4
        && name
            .split('.')
            .all(|p| !p.is_empty() && p.len() <= 3 && p.bytes().all(|b| b.is_ascii_digit()))
    {
        return Err("it is formatted as an IP address".into());
    }
    if let Some(p) = ["xn--", "sthree-"].iter().find(|p| name.starts_with(**p)) {
        return Err(format!("the prefix `{p}` is reserved"));
    }
    if let Some(s) = ["-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3"]
        .iter()
        .find(|s| name.ends_with(**s))
    {
        return Err(format!("the suffix `{s}` is reserved"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_bucket_names() {
        for ok in [
            "abc",
            "raw-logs",
            "datalake-prod",
            "my.bucket.name",
            "amzn-s3-demo-bucket1",
            "a1-2.b",
            "123",
            "1.2.3",
            "1.2.3.4.5",
            "256.1.1.1a",
            &"a".repeat(63),
        ] {
            assert_eq!(check_bucket_name(ok), Ok(()), "{ok}");
        }
    }

    #[test]
    fn invalid_bucket_names_name_the_rule() {
        for (bad, why) in [
            ("ab", "3 to 63"),
            (&"a".repeat(64) as &str, "3 to 63"),
            (&"x".repeat(300), "3 to 63"),
            ("", "3 to 63"),
            ("../escape", "`/`"),
            ("%2e%2e", "`%`"),
            ("a/b", "`/`"),
            ("../../outside", "`/`"),
            ("victim?x", "`?`"),
            ("victim#x", "`#`"),
            ("a\\b", "`\\\\`"),
            ("Victim", "`V`"),
            ("under_score", "`_`"),
            ("sp ace", "` `"),
            ("tab\tx", "`\\t`"),
            ("nul\0x", "`\\0`"),
            ("ünï", "`ü`"),
            ("-victim", "begin and end"),
            ("victim-", "begin and end"),
            (".victim", "begin and end"),
            ("victim.", "begin and end"),
            ("...", "begin and end"),
            ("victim..x", "adjacent periods"),
            ("192.168.1.1", "IP address"),
            ("10.0.0.255", "IP address"),
            ("xn--bucket", "prefix `xn--`"),
            ("sthree-bucket", "prefix `sthree-`"),
            ("bucket-s3alias", "suffix `-s3alias`"),
            ("bucket--ol-s3", "suffix `--ol-s3`"),
            ("bucket.mrap", "suffix `.mrap`"),
            ("bucket--use1-az4--x-s3", "suffix `--x-s3`"),
            ("bucket--table-s3", "suffix `--table-s3`"),
        ] {
            match check_bucket_name(bad) {
                Err(e) => assert!(e.contains(why), "{bad:?}: {e}"),
                Ok(()) => panic!("{bad:?} was accepted"),
            }
        }
    }

    #[test]
    fn every_valid_bucket_is_a_valid_table_segment() {
        for b in ["raw-logs", "my.bucket.name", "123", &"a".repeat(63)] {
            assert_eq!(check_bucket_name(b), Ok(()));
            assert_eq!(check_table_path(&format!("access_logs/{b}")), Ok(()));
        }
    }

    #[test]
    fn table_paths() {
        for ok in [
            "raw/order",
            "dead_letters",
            "x=1/y_2",
            "a.b-c",
            "raw/order.v2",
            "_lakestream/job/tombstones",
            &"s".repeat(255),
        ] {
            assert_eq!(check_table_path(ok), Ok(()), "{ok}");
        }
        for (bad, why) in [
            ("", "empty"),
            ("/", "empty segment"),
            ("/raw", "empty segment"),
            ("raw/", "empty segment"),
            ("a//b", "empty segment"),
            ("..", "leave"),
            ("../escape", "leave"),
            ("a/../b", "leave"),
            (".", "leave"),
            ("a/./b", "leave"),
            (".hidden", "starts with `.`"),
            ("raw/.x", "starts with `.`"),
            ("%2e%2e", "`%`"),
            ("victim?x", "`?`"),
            ("victim#x", "`#`"),
            ("a\\b", "`\\\\`"),
            ("raw order", "` `"),
            ("raw\norder", "`\\n`"),
            ("räw", "`ä`"),
            ("_delta_log", "starts with `_`"),
            ("raw/_delta_log", "starts with `_`"),
            ("raw/_symlink_format_manifest", "starts with `_`"),
            ("raw/_lakestream", "starts with `_`"),
            ("_other/x", "starts with `_`"),
            (&"s".repeat(256), "too long"),
        ] {
            match check_table_path(bad) {
                Err(e) => assert!(e.contains(why), "{bad:?}: {e}"),
                Ok(()) => panic!("{bad:?} was accepted"),
            }
        }
    }
}
