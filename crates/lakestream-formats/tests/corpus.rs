//! Every saved fuzz input (`fuzz/corpus/<target>/*` and `fuzz/regressions/<target>/*`) through
//! its target body: the fuzzers' findings stay fixed without running a fuzzer in CI.

use lakestream_formats::fuzzing::TARGETS;
use std::path::Path;

#[test]
fn saved_fuzz_inputs_pass_their_targets() -> std::io::Result<()> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    let mut total = 0;
    for (name, target) in TARGETS {
        let mut seen = 0;
        for dir in ["corpus", "regressions"] {
            let dir = root.join(dir).join(name);
            if !dir.exists() {
                continue;
            }
            for entry in std::fs::read_dir(&dir)? {
                let path = entry?.path();
                let data = std::fs::read(&path)?;
                let run = std::panic::catch_unwind(|| target(&data));
                assert!(run.is_ok(), "{name}: {} fails its target", path.display());
                seen += 1;
            }
        }
        assert!(seen > 0, "{name}: no saved inputs under fuzz/corpus/{name}");
        total += seen;
    }
    println!("{total} saved fuzz inputs passed");
    Ok(())
}
