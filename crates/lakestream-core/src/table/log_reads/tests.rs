//! Unit tests of the log-read cache: whole checkpoint reads, kept commit files, bounds.

use super::*;
use deltalake::logstore::object_store::ObjectStoreExt;
use deltalake::logstore::object_store::memory::InMemory;
use deltalake::logstore::object_store::{PutMode, PutOptions};

#[tokio::test]
async fn checkpoint_ranges_come_from_one_whole_read() -> anyhow::Result<()> {
    let mem = Arc::new(InMemory::new());
    let ckpt = Path::from("t/_delta_log/00000000000000000019.checkpoint.parquet");
    let data = Path::from("t/part-0.parquet");
    let body: Vec<u8> = (0..=255u8).cycle().take(5000).collect();
    mem.put(&ckpt, body.clone().into()).await?;
    mem.put(&data, body.clone().into()).await?;
    let store = LogReads::new(mem.clone());
    let got = store.get_range(&ckpt, 10..20).await?;
    assert_eq!(&got[..], &body[10..20]);
    // From memory now: delete the object underneath and the ranges still answer.
    mem.delete(&ckpt).await?;
    let got = store.get_range(&ckpt, 4990..5000).await?;
    assert_eq!(&got[..], &body[4990..5000]);
    let opts = GetOptions {
        range: Some(GetRange::Suffix(8)),
        ..Default::default()
    };
    let got = store.get_opts(&ckpt, opts).await?;
    assert_eq!(got.range, 4992..5000);
    assert_eq!(&got.bytes().await?[..], &body[4992..]);
    assert!(store.get_range(&ckpt, 6000..6001).await.is_err());
    // Data files are not held: gone underneath, gone here.
    mem.delete(&data).await?;
    assert!(store.get_range(&data, 0..10).await.is_err());
    Ok(())
}

#[tokio::test]
async fn commit_files_written_or_read_are_not_fetched_again() -> anyhow::Result<()> {
    let mem = Arc::new(InMemory::new());
    let store = LogReads::new(mem.clone());
    let ours = Path::from("t/_delta_log/00000000000000000007.json");
    let theirs = Path::from("t/_delta_log/00000000000000000006.json");
    let hint = Path::from("t/_delta_log/_last_checkpoint");
    mem.put(&theirs, "{\"theirs\":6}".into()).await?;
    mem.put(&hint, "{\"version\":5}".into()).await?;
    let create = PutOptions {
        mode: PutMode::Create,
        ..Default::default()
    };
    store
        .put_opts(&ours, "{\"ours\":7}".into(), create.clone())
        .await?;
    assert_eq!(
        &store.get(&theirs).await?.bytes().await?[..],
        b"{\"theirs\":6}"
    );
    store.get(&hint).await?;
    // Gone underneath (log cleanup), still answered: both were seen by this process.
    mem.delete(&ours).await?;
    mem.delete(&theirs).await?;
    mem.delete(&hint).await?;
    assert_eq!(&store.get(&ours).await?.bytes().await?[..], b"{\"ours\":7}");
    assert_eq!(
        &store.get(&theirs).await?.bytes().await?[..],
        b"{\"theirs\":6}"
    );
    assert_eq!(&store.get_range(&ours, 2..6).await?[..], b"ours");
    // `_last_checkpoint` changes in place: held for one load only (see below).
    assert!(store.get(&hint).await.is_ok());
    // A losing conditional PUT leaves nothing behind.
    mem.put(&theirs, "{\"winner\":6}".into()).await?;
    let lost = Path::from("t/_delta_log/00000000000000000008.json");
    mem.put(&lost, "{\"winner\":8}".into()).await?;
    assert!(
        store
            .put_opts(&lost, "{\"ours\":8}".into(), create)
            .await
            .is_err()
    );
    assert_eq!(
        &store.get(&lost).await?.bytes().await?[..],
        b"{\"winner\":8}"
    );
    Ok(())
}

/// A checkpoint read whole is dropped after `keep` even when the store is never used again
/// (a warm process's handle on a table it no longer touches), and the checkpoints held at
/// once stay under [`HELD_BYTES`] whatever their number.
#[tokio::test]
async fn checkpoints_are_dropped_after_keep_and_bounded_in_bytes() -> anyhow::Result<()> {
    let mem = Arc::new(InMemory::new());
    let ckpt = |v: u64| Path::from(format!("t/_delta_log/{v:020}.checkpoint.parquet"));
    let store = LogReads::new(mem.clone()).with_keep(Duration::from_millis(100));
    mem.put(&ckpt(10), vec![1u8; 1000].into()).await?;
    store.get_range(&ckpt(10), 0..10).await?;
    assert_eq!(store.held_checkpoint_bytes(), 1000);
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(
        store.held_checkpoint_bytes(),
        0,
        "dropped by time, untouched"
    );

    let big = HELD_BYTES / 2 - 1024;
    let store = LogReads::new(mem.clone());
    for v in [20, 30, 40] {
        mem.put(&ckpt(v), vec![2u8; big].into()).await?;
        store.get_range(&ckpt(v), 0..10).await?;
        assert!(store.held_checkpoint_bytes() <= HELD_BYTES);
    }
    assert_eq!(store.held_checkpoint_bytes(), 2 * big, "the two newest");
    // The newest still answers from memory.
    mem.delete(&ckpt(40)).await?;
    assert_eq!(&store.get_range(&ckpt(40), 0..2).await?[..], &[2, 2]);
    Ok(())
}

#[test]
fn only_numbered_commit_files_are_commits() {
    let yes = [
        "t/_delta_log/00000000000000000007.json",
        "_delta_log/00000000000000000000.json",
    ];
    let no = [
        "t/_delta_log/_last_checkpoint",
        "t/_delta_log/00000000000000000007.crc",
        "t/_delta_log/_commits/00000000000000000007.uuid.json",
        "t/_delta_log/0000000000000000007.json",
        "t/data/00000000000000000007.json",
    ];
    assert!(yes.iter().all(|p| is_commit_file(&Path::from(*p))));
    assert!(!no.iter().any(|p| is_commit_file(&Path::from(*p))));
}

/// `_last_checkpoint` answers from memory for `keep` (a cold load reads it twice), a missing one
/// too, and is read again after; our own PUT of it drops what is held.
#[tokio::test]
async fn the_checkpoint_hint_is_held_for_one_load() -> anyhow::Result<()> {
    let mem = Arc::new(InMemory::new());
    let store = LogReads::new(mem.clone()).with_keep(Duration::from_millis(200));
    let hint = Path::from("t/_delta_log/_last_checkpoint");
    assert!(store.get(&hint).await.is_err());
    mem.put(&hint, "{\"version\":10}".into()).await?;
    assert!(
        store.get(&hint).await.is_err(),
        "a missing hint is held too"
    );
    tokio::time::sleep(Duration::from_millis(250)).await;
    assert_eq!(
        &store.get(&hint).await?.bytes().await?[..],
        b"{\"version\":10}"
    );
    store.put(&hint, "{\"version\":20}".into()).await?;
    assert_eq!(
        &store.get(&hint).await?.bytes().await?[..],
        b"{\"version\":20}"
    );
    Ok(())
}

/// A store over `mem` and the operations it makes on it, in order.
fn counted(mem: &Arc<InMemory>) -> (LogReads, Arc<Mutex<Vec<String>>>) {
    let calls = Arc::new(Mutex::new(Vec::<String>::new()));
    let c = calls.clone();
    let wrap = crate::intercept::observe_calls(Arc::new(move |op, _| {
        if let Ok(mut v) = c.lock() {
            v.push(op.to_string());
        }
    }));
    (LogReads::new(wrap(mem.clone())), calls)
}

/// A listing of the log after the first is answered from what the store knows: the commits
/// added since are found by GETs of the next commit file, not by listing; a deletion under the
/// log, or a named commit found missing, makes it list again; too many commits since too.
#[tokio::test]
async fn log_listings_after_the_first_are_answered_by_gets() -> anyhow::Result<()> {
    use futures::TryStreamExt;
    let mem = Arc::new(InMemory::new());
    let (store, calls) = counted(&mem);
    let dir = Path::from("t/_delta_log");
    let commit = |v: u64| Path::from(format!("t/_delta_log/{v:020}.json"));
    mem.put(&commit(0), "{}".into()).await?;
    mem.put(&commit(1), "{}".into()).await?;
    let from = Path::from("t/_delta_log/00000000000000000000");
    let list = |s: &LogReads| {
        s.list_with_offset(Some(&dir), &from)
            .map_ok(|m| m.location.to_string())
            .try_collect::<Vec<_>>()
    };
    let take = || std::mem::take(&mut *calls.lock().unwrap_or_else(|p| p.into_inner()));
    assert_eq!(list(&store).await?.len(), 2);
    assert_eq!(take(), ["list_from"]);
    // Another writer's commit: found by a GET (and the one after it missing), and the listing
    // that follows (delta-rs's refresh) answered without a request.
    mem.put(&commit(2), "{\"v\":2}".into()).await?;
    assert_eq!(store.advance().await?, Some(2));
    assert_eq!(take(), ["get", "get"]);
    let names = list(&store).await?;
    assert_eq!(names.last().map(String::as_str), Some(commit(2).as_ref()));
    assert!(take().is_empty());
    // The replay that follows reads the commit from memory.
    assert_eq!(
        &store.get(&commit(2)).await?.bytes().await?[..],
        b"{\"v\":2}"
    );
    assert!(take().is_empty());
    // Advance finds nothing new with one GET.
    assert_eq!(store.advance().await?, Some(2));
    assert_eq!(take(), ["get"]);
    // A listing not right after a look looks first (here: the look is older than FRESH).
    tokio::time::sleep(FRESH).await;
    mem.put(&commit(3), "{}".into()).await?;
    assert_eq!(list(&store).await?.len(), 4);
    assert_eq!(take(), ["get", "get"]);
    store.delete(&commit(3)).await?;
    take();
    assert_eq!(list(&store).await?.len(), 3);
    assert_eq!(
        take(),
        ["list_from"],
        "a deletion under the log: listed again"
    );
    // Our own commit is known from its PUT.
    let create = PutOptions {
        mode: PutMode::Create,
        ..Default::default()
    };
    store.put_opts(&commit(3), "{}".into(), create).await?;
    take();
    assert_eq!(store.advance().await?, Some(3));
    assert_eq!(take(), ["get"], "only the missing 4 is asked");
    // A commit the listing names found missing (evicted and cleaned up): listed again.
    mem.delete(&commit(1)).await?;
    *store.commits.lock().unwrap_or_else(|p| p.into_inner()) = Commits::default(); // evicted
    take();
    assert!(store.get(&commit(1)).await.is_err());
    assert_eq!(list(&store).await?.len(), 3);
    assert_eq!(take(), ["get", "list_from"]);
    // Many commits since the listing, found a few at a time: listed again.
    for v in 4..4 + RELIST_COMMITS {
        mem.put(&commit(v), "{}".into()).await?;
        if v % 5 == 0 {
            assert_eq!(store.advance().await?, Some(v));
        }
    }
    assert_eq!(store.advance().await?, Some(3 + RELIST_COMMITS));
    tokio::time::sleep(FRESH).await;
    take();
    assert_eq!(list(&store).await?.len(), 3 + RELIST_COMMITS as usize); // 0, 2, 3, 4..
    assert_eq!(take(), ["list_from"]);
    // Far behind (another writer's burst): a few GETs, then one LIST.
    let newest = 3 + RELIST_COMMITS;
    for v in newest + 1..=newest + 2 * u64::from(LOOKUPS) {
        mem.put(&commit(v), "{}".into()).await?;
    }
    assert_eq!(store.advance().await?, None);
    assert_eq!(take().len(), LOOKUPS as usize + 1);
    assert_eq!(list(&store).await?.len(), 3 + RELIST_COMMITS as usize + 20);
    assert_eq!(take(), ["list_from"]);
    Ok(())
}

/// Another writer's checkpoint is not found by GETs of the next commit; a load that reads
/// `_last_checkpoint` naming it (a load at a version, a checkpoint of our own) lists from it,
/// and must see it: the kernel refuses a hinted listing without the hinted checkpoint.
#[tokio::test]
async fn a_hint_naming_a_checkpoint_not_known_lists_again() -> anyhow::Result<()> {
    use futures::TryStreamExt;
    let mem = Arc::new(InMemory::new());
    let store = LogReads::new(mem.clone());
    let dir = Path::from("t/_delta_log");
    let commit = |v: u64| Path::from(format!("t/_delta_log/{v:020}.json"));
    for v in 0..3 {
        mem.put(&commit(v), "{}".into()).await?;
    }
    let from = Path::from("t/_delta_log/00000000000000000000");
    let listed: Vec<ObjectMeta> = store
        .list_with_offset(Some(&dir), &from)
        .try_collect()
        .await?;
    assert_eq!(listed.len(), 3);
    // Another writer: commits 3..5 and a checkpoint at 4 with its hint.
    for v in 3..6 {
        mem.put(&commit(v), "{}".into()).await?;
    }
    let ckpt = Path::from("t/_delta_log/00000000000000000004.checkpoint.parquet");
    mem.put(&ckpt, "parquet".into()).await?;
    let hint = Path::from("t/_delta_log/_last_checkpoint");
    mem.put(&hint, "{\"version\":4,\"size\":1}".into()).await?;
    assert_eq!(store.advance().await?, Some(5));
    // The kernel reads the hint, then lists from the checkpoint's version.
    store.get(&hint).await?;
    let at = Path::from("t/_delta_log/00000000000000000004");
    let names: Vec<String> = store
        .list_with_offset(Some(&dir), &at)
        .map_ok(|m| m.location.to_string())
        .try_collect()
        .await?;
    assert!(names.contains(&ckpt.to_string()), "{names:?}");
    Ok(())
}

/// A checkpoint the known listing names, found missing (another writer's log cleanup): the
/// next listing is a real one.
#[tokio::test]
async fn a_named_checkpoint_found_missing_lists_again() -> anyhow::Result<()> {
    use futures::TryStreamExt;
    let mem = Arc::new(InMemory::new());
    let store = LogReads::new(mem.clone());
    let dir = Path::from("t/_delta_log");
    let ckpt = Path::from("t/_delta_log/00000000000000000002.checkpoint.parquet");
    mem.put(
        &Path::from("t/_delta_log/00000000000000000002.json"),
        "{}".into(),
    )
    .await?;
    mem.put(&ckpt, "parquet".into()).await?;
    let from = Path::from("t/_delta_log/00000000000000000000");
    let list = |s: &LogReads| {
        s.list_with_offset(Some(&dir), &from)
            .map_ok(|m| m.location.to_string())
            .try_collect::<Vec<_>>()
    };
    assert_eq!(list(&store).await?.len(), 2);
    mem.delete(&ckpt).await?;
    assert!(store.get_range(&ckpt, 0..4).await.is_err());
    let names = list(&store).await?;
    assert!(!names.contains(&ckpt.to_string()), "{names:?}");
    Ok(())
}

/// A table a LIST found missing is asked again with HEADs of its first commit and of
/// `_last_checkpoint` (no GET, no LIST) until [`ABSENT_FOR`] has passed; once either exists
/// (another run created the table, or it was restored) it is discovered with the usual listing.
#[tokio::test]
async fn a_missing_table_is_asked_with_a_head_of_its_first_commit() -> anyhow::Result<()> {
    let mem = Arc::new(InMemory::new());
    let (store, calls) = counted(&mem);
    let dir = Path::from("t/_delta_log");
    let take = || std::mem::take(&mut *calls.lock().unwrap_or_else(|p| p.into_inner()));
    assert!(!store.discover(&dir).await?);
    assert_eq!(
        take(),
        ["get", "get", "list_from"],
        "the first look: `_last_checkpoint`, `<0>.json`, then a LIST decides"
    );
    assert!(!store.discover(&dir).await?);
    assert!(!store.discover(&dir).await?);
    assert_eq!(
        take(),
        ["head", "head", "head", "head"],
        "then two HEADs each"
    );
    mem.put(
        &Path::from("t/_delta_log/00000000000000000000.json"),
        "{}".into(),
    )
    .await?;
    assert!(store.discover(&dir).await?);
    // The two HEADs are asked together (`_last_checkpoint`'s for nothing this once); then
    // (`_last_checkpoint` was found missing moments ago: held, not asked again) `<0>.json`
    // and the next four looked for at once: no LIST.
    assert_eq!(take(), ["head", "head", "get", "get", "get", "get", "get"]);
    // A table restored after log cleanup (no `<0>.json`, a `_last_checkpoint`) is found too.
    let restored = LogReads::new(mem.clone());
    let other = Path::from("u/_delta_log");
    assert!(!restored.discover(&other).await?);
    mem.put(
        &Path::from("u/_delta_log/_last_checkpoint"),
        "{\"version\":9}".into(),
    )
    .await?;
    mem.put(
        &Path::from("u/_delta_log/00000000000000000009.checkpoint.parquet"),
        "x".into(),
    )
    .await?;
    assert!(restored.discover(&other).await?);
    // Cleared (a failed identity proof): the next look lists again.
    store.clear();
    mem.delete(&Path::from("t/_delta_log/00000000000000000000.json"))
        .await?;
    assert!(!store.discover(&dir).await?);
    assert_eq!(take(), ["get", "get", "list_from"]);
    Ok(())
}

/// A cold load's listing from `_last_checkpoint` without a LIST: a HEAD of the checkpoint it
/// names, GETs of the commits after it (four at once, kept), and the kernel's listing then
/// answered from them. A LIST instead when the guess could be wrong or dear: a multi-part
/// checkpoint, a hinted checkpoint gone, more than `PROBES` commits after it.
#[tokio::test]
async fn a_cold_load_finds_its_listing_without_a_list() -> anyhow::Result<()> {
    use futures::TryStreamExt;
    let mem = Arc::new(InMemory::new());
    let put = |path: String, body: &'static str| {
        let mem = mem.clone();
        async move { mem.put(&Path::from(path), body.into()).await }
    };
    let table = |t: &str, hint: &'static str, commits: std::ops::RangeInclusive<u64>| {
        let t = t.to_string();
        let put = &put;
        async move {
            put(format!("{t}/_delta_log/_last_checkpoint"), hint).await?;
            put(
                format!("{t}/_delta_log/{:020}.checkpoint.parquet", 10),
                "ckpt",
            )
            .await?;
            for v in commits {
                put(format!("{t}/_delta_log/{v:020}.json"), "{}").await?;
            }
            anyhow::Ok(())
        }
    };
    table("a", r#"{"version":10,"size":3}"#, 8..=13).await?;
    let (store, calls) = counted(&mem);
    let take = || std::mem::take(&mut *calls.lock().unwrap_or_else(|p| p.into_inner()));
    let dir = Path::from("a/_delta_log");
    assert!(store.discover(&dir).await?);
    // The hint, the checkpoint's HEAD, 11..=14 at once (14 missing): no LIST.
    assert_eq!(take(), ["get", "head", "get", "get", "get", "get"]);
    // The kernel's listing after the checkpoint's version, answered from them.
    let from = Path::from(format!("a/_delta_log/{:020}", 10));
    let names: Vec<String> = store
        .list_with_offset(Some(&dir), &from)
        .map_ok(|m| m.location.filename().unwrap_or_default().to_string())
        .try_collect()
        .await?;
    assert_eq!(
        names,
        [
            "00000000000000000010.checkpoint.parquet",
            "00000000000000000011.json",
            "00000000000000000012.json",
            "00000000000000000013.json",
        ]
    );
    assert!(take().is_empty(), "answered from what the probe found");
    // And its commits from memory.
    store
        .get(&Path::from("a/_delta_log/00000000000000000013.json"))
        .await?;
    assert!(take().is_empty());

    // A checkpoint in parts: its names are not in the hint; listed.
    table("b", r#"{"version":10,"parts":2}"#, 11..=11).await?;
    let (store, calls) = counted(&mem);
    assert!(store.discover(&Path::from("b/_delta_log")).await?);
    let made = std::mem::take(&mut *calls.lock().unwrap_or_else(|p| p.into_inner()));
    assert_eq!(made, ["get", "list_from"]);
    // The hinted checkpoint gone (another writer's cleanup after a newer one): listed.
    table("c", r#"{"version":10}"#, 11..=11).await?;
    mem.delete(&Path::from(format!(
        "c/_delta_log/{:020}.checkpoint.parquet",
        10
    )))
    .await?;
    let (store, calls) = counted(&mem);
    assert!(store.discover(&Path::from("c/_delta_log")).await?);
    let made = std::mem::take(&mut *calls.lock().unwrap_or_else(|p| p.into_inner()));
    assert_eq!(made, ["get", "head", "list_from"]);
    // A checkpoint older than the probe age: listed (a stale hint beside a cleanup).
    table("e", r#"{"version":10}"#, 11..=11).await?;
    let (store, calls) = counted(&mem);
    let store = store.with_probe_age(Duration::ZERO);
    assert!(store.discover(&Path::from("e/_delta_log")).await?);
    let made = std::mem::take(&mut *calls.lock().unwrap_or_else(|p| p.into_inner()));
    assert_eq!(made, ["get", "head", "list_from"]);
    // No `_last_checkpoint`: from `<0>.json` on while it is young, else listed.
    for v in 0..=2u64 {
        put(format!("f/_delta_log/{v:020}.json"), "{}").await?;
    }
    let (store, calls) = counted(&mem);
    assert!(store.discover(&Path::from("f/_delta_log")).await?);
    let made = std::mem::take(&mut *calls.lock().unwrap_or_else(|p| p.into_inner()));
    assert_eq!(made, ["get", "get", "get", "get", "get", "get"]);
    let (store, calls) = counted(&mem);
    let store = store.with_probe_age(Duration::ZERO);
    assert!(store.discover(&Path::from("f/_delta_log")).await?);
    let made = std::mem::take(&mut *calls.lock().unwrap_or_else(|p| p.into_inner()));
    assert_eq!(made, ["get", "get", "list_from"]);
    // A hostile `_last_checkpoint` (any writer of the log can put one) naming the last u64
    // version, with a checkpoint file there: no overflow, no panic; the load lists.
    let last = u64::MAX;
    put(
        "g/_delta_log/_last_checkpoint".into(),
        r#"{"version":18446744073709551615}"#,
    )
    .await?;
    put(format!("g/_delta_log/{last:020}.checkpoint.parquet"), "x").await?;
    put(format!("g/_delta_log/{:020}.json", 0), "{}").await?;
    let (store, calls) = counted(&mem);
    assert!(store.discover(&Path::from("g/_delta_log")).await?);
    let made = std::mem::take(&mut *calls.lock().unwrap_or_else(|p| p.into_inner()));
    assert_eq!(made, ["get", "head", "list_from"]);
    // Its writer fell behind: more than PROBES commits after the checkpoint, then a LIST.
    table("d", r#"{"version":10}"#, 11..=(11 + PROBES)).await?;
    let (store, calls) = counted(&mem);
    assert!(store.discover(&Path::from("d/_delta_log")).await?);
    let made = std::mem::take(&mut *calls.lock().unwrap_or_else(|p| p.into_inner()));
    assert_eq!(
        made.last().map(String::as_str),
        Some("list_from"),
        "{made:?}"
    );
    assert_eq!(made.iter().filter(|c| *c == "list_from").count(), 1);
    Ok(())
}
