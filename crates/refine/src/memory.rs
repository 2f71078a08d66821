//! A refine run's memory follows the chunk it reads. `make bench-memory` measured a CDC apply
//! (SCD1 with the change data feed, every key updated, the worst kind per byte) of 32 MiB
//! chunks at 0.58-0.72 GB at the peak, for text that compresses ~1.4x and ~2x alike: a chunk
//! also ends where its rows take 1.5x its limit decoded (`ChunkLimits::max_decoded_bytes`;
//! before that cut, 1.0-1.08 GB; the join and the aggregate take less per byte). A chunk larger
//! than the function's memory holds would be killed by Lambda at the same chunk on every retry,
//! so the function caps each job's `max_mib_per_run` at its memory / [`MB_PER_CHUNK_MIB`]
//! (768 MB, the template's default: 24 MiB, measured at 0.53 GB; 1,024 MB: 32 MiB; 2,048 MB:
//! 64 MiB, the config's default), read
//! once in `main` from `AWS_LAMBDA_FUNCTION_MEMORY_SIZE`.
//!
//! A CDC apply's first run and `--rebuild` read bronze's whole snapshot in one run (10-16x its
//! bytes): each job's `snapshot_max_mib` is set to memory /
//! [`SNAPSHOT_MEMORY_FACTOR`](lakestream_core::refine::snapshot_limit::SNAPSHOT_MEMORY_FACTOR), and a
//! larger snapshot fails before it is read, saying how to proceed (ARCHITECTURE.md "Memory").

use lakestream_core::refine::snapshot_limit::SNAPSHOT_MEMORY_FACTOR;
use lakestream_formats::config::PipelineConfig;

/// Function memory (MB) per MiB of a run's chunk.
pub const MB_PER_CHUNK_MIB: u64 = 32;

/// A job or family whose `max_mib_per_run` was lowered to fit the function's memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capped {
    /// `refine job <name>` or `cdc family <name>`.
    pub what: String,
    /// Its configured `max_mib_per_run`.
    pub configured: u64,
    /// What a run reads at most now.
    pub cap: u64,
}

/// The most MiB of new source data a run may read in a function of `memory_mb`.
pub fn chunk_cap_mib(memory_mb: u64) -> u64 {
    (memory_mb / MB_PER_CHUNK_MIB).max(1)
}

/// Lower every refine job's and CDC family's `max_mib_per_run` above what `memory_mb` holds to
/// [`chunk_cap_mib`], and set their `snapshot_max_mib`; returns the chunks it lowered (for a
/// warning at start).
pub fn fit_chunks(config: &mut PipelineConfig, memory_mb: u64) -> Vec<Capped> {
    let cap = chunk_cap_mib(memory_mb);
    let snapshot = Some((memory_mb / SNAPSHOT_MEMORY_FACTOR).max(1));
    for j in &mut config.refine {
        j.snapshot_max_mib = snapshot;
    }
    for f in &mut config.cdc {
        f.snapshot_max_mib = snapshot;
    }
    let jobs = config
        .refine
        .iter_mut()
        .map(|j| (format!("refine job {}", j.job), &mut j.max_mib_per_run));
    let families = config
        .cdc
        .iter_mut()
        .map(|f| (format!("cdc family {}", f.family), &mut f.max_mib_per_run));
    let mut out = Vec::new();
    for (what, mib) in jobs.chain(families) {
        if *mib > cap {
            out.push(Capped {
                what,
                configured: *mib,
                cap,
            });
            *mib = cap;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(extra: &str) -> PipelineConfig {
        let example = include_str!("../../../lakestream.toml");
        PipelineConfig::from_toml(&format!("{example}{extra}")).expect("the example parses")
    }

    const FAMILY: &str = r#"
[[cdc]]
family = "crm"
source = "debezium"
topics = ["crm.public.*"]
max_mib_per_run = 200
"#;

    #[test]
    fn a_smaller_function_reads_smaller_chunks() {
        let mut cfg = config(FAMILY);
        let before: Vec<u64> = cfg.refine.iter().map(|j| j.max_mib_per_run).collect();
        assert!(
            before.iter().all(|&m| m == 64),
            "the example's jobs: {before:?}"
        );
        let capped = fit_chunks(&mut cfg, 1024);
        assert!(cfg.refine.iter().all(|j| j.max_mib_per_run == 32));
        assert_eq!(cfg.cdc[0].max_mib_per_run, 32);
        assert_eq!(
            cfg.cdc[0].snapshot_max_mib,
            Some(1024 / SNAPSHOT_MEMORY_FACTOR)
        );
        assert!(cfg.refine.iter().all(|j| j.snapshot_max_mib == Some(64)));
        assert_eq!(capped.len(), cfg.refine.len() + 1);
        assert!(capped.contains(&Capped {
            what: "cdc family crm".into(),
            configured: 200,
            cap: 32
        }));
    }

    #[test]
    fn what_fits_is_left_as_configured() {
        let mut cfg = config(FAMILY);
        assert_eq!(
            fit_chunks(&mut cfg, 2048).len(),
            1,
            "only the family's 200 MiB"
        );
        assert!(cfg.refine.iter().all(|j| j.max_mib_per_run == 64));
        assert_eq!(cfg.cdc[0].max_mib_per_run, 64);
        let mut big = config(FAMILY);
        assert!(fit_chunks(&mut big, 10240).is_empty());
        assert_eq!(big.cdc[0].max_mib_per_run, 200);
        assert_eq!(chunk_cap_mib(128), 4);
        assert_eq!(
            chunk_cap_mib(0),
            1,
            "at least one MiB (a run reads one version anyway)"
        );
    }
}
