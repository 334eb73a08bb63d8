//! Reading a scripted run's tables back: rows and coverage at any version, dead letters, and
//! the check that every version a reader could see holds whole publications (E2).

use super::*;

/// `(event_id, coupon, ctx.b)` of every row, sorted, in the growing script's table: the
/// values of the columns the records added.
pub async fn grown_values(table_dir: &Path) -> Vec<String> {
    sql_lines(
        &[("t", table_dir.display().to_string())],
        "SELECT event_id, coalesce(coupon, '-'), coalesce(t.ctx.b, '-'), t.ctx.a FROM t",
    )
    .await
}

pub type Row = (String, String, i64);

/// The rows of the table at `version` (latest if `None`), and each window's coverage offset
/// (the highest over its files), read from the files the Delta log lists.
pub async fn rows_at(table_dir: &Path, version: Option<u64>) -> (Vec<Row>, HashMap<String, i64>) {
    let table = open_table(table_dir.to_str().unwrap(), &HashMap::new(), version)
        .await
        .unwrap_or_else(|e| panic!("version {version:?} does not load: {e}"));
    let store = table.object_store();
    let mut rows = Vec::new();
    let mut coverage: HashMap<String, i64> = HashMap::new();
    for file in active_files(&table).await.expect("active files") {
        let window = address_of(&file);
        // Files a MERGE wrote carry no coverage; swap publications' files do.
        if let Some(c) = file.coverage.as_ref().map(|c| c.offset) {
            let e = coverage.entry(window.clone()).or_insert(c);
            *e = (*e).max(c);
        }
        let batches = read_parquet(store.as_ref(), &file.path)
            .await
            .unwrap_or_else(|e| panic!("version {version:?}: file {} unreadable: {e}", file.path));
        for b in &batches {
            rows.extend(rows_of(b, &window));
        }
    }
    rows.sort();
    (rows, coverage)
}

fn rows_of(batch: &RecordBatch, window: &str) -> Vec<Row> {
    let ids = batch
        .column_by_name("event_id")
        .map(|c| deltalake::arrow::compute::cast(c, &DataType::Utf8).expect("a string column"))
        .and_then(|c| c.as_any().downcast_ref::<StringArray>().cloned())
        .expect("event_id column");
    let offsets = batch
        .column_by_name("_sluice_offset")
        .and_then(|c| c.as_any().downcast_ref::<Int64Array>().cloned())
        .expect("_sluice_offset column");
    (0..batch.num_rows())
        .map(|i| {
            assert!(!ids.is_null(i));
            (
                window.to_string(),
                ids.value(i).to_string(),
                offsets.value(i),
            )
        })
        .collect()
}

pub fn dlq_location(table_dir: &Path) -> String {
    format!("{}_dlq", table_dir.display())
}

/// `(source, offset, reason)` of every dead letter, sorted (duplicates kept: they must not be).
pub async fn dead_letters(table_dir: &Path) -> Vec<(String, i64, String)> {
    let table = open_table(&dlq_location(table_dir), &HashMap::new(), None)
        .await
        .expect("the dead-letter table loads");
    let store = table.object_store();
    let mut out = Vec::new();
    for file in active_files(&table).await.expect("active files") {
        for b in read_parquet(store.as_ref(), &file.path)
            .await
            .expect("readable")
        {
            let s = |name: &str| {
                b.column_by_name(name)
                    .and_then(|c| c.as_any().downcast_ref::<StringArray>().cloned())
                    .expect("a string column")
            };
            let (source, reason) = (s("source_partition"), s("reason"));
            let offset = b
                .column_by_name("source_offset")
                .and_then(|c| c.as_any().downcast_ref::<Int64Array>().cloned())
                .expect("offset");
            for i in 0..b.num_rows() {
                out.push((
                    source.value(i).to_string(),
                    offset.value(i),
                    reason.value(i).to_string(),
                ));
            }
        }
    }
    out.sort();
    out
}

/// The latest version of the table.
pub async fn latest_version(table_dir: &Path) -> u64 {
    open_table(table_dir.to_str().unwrap(), &HashMap::new(), None)
        .await
        .expect("table loads")
        .version()
        .expect("a version")
}

/// E2 at every version: each window a reader sees is exactly what its publications covered,
/// never part of one publication or a mix. (Under the merge policy, late rows come from MERGE
/// commits whose files carry no coverage: there each window must hold all its in-time rows,
/// only rows of the final table, and no key twice.) Returns the number of versions checked.
pub async fn check_every_version(
    table_dir: &Path,
    script: &Script,
    keyed: bool,
    policy: Policy,
) -> Result<u64, String> {
    let latest = latest_version(table_dir).await;
    let all = script.expected_final(keyed, policy);
    for v in 0..=latest {
        let (rows, coverage) = rows_at(table_dir, Some(v)).await;
        if policy == Policy::Upsert {
            // MERGE-written files carry no coverage: check what holds at every version, one
            // row per key per window, each a delivery of that key in that window.
            let mut keys: Vec<(&String, &String)> = rows.iter().map(|(w, id, _)| (w, id)).collect();
            let n = keys.len();
            keys.dedup();
            if keys.len() != n {
                return Err(format!(
                    "version {v}: a key appears twice in a window: {rows:?}"
                ));
            }
            let delivered = |(w, id, offset): &Row| {
                script
                    .lines
                    .iter()
                    .any(|l| l.offset == *offset && &l.event_id == id && &script.window_of(l) == w)
            };
            if let Some(r) = rows.iter().find(|r| !delivered(r)) {
                return Err(format!("version {v}: row {r:?} is no delivery of its key"));
            }
            continue;
        }
        if policy == Policy::Merge {
            let mut keys: Vec<(&String, &String)> = rows.iter().map(|(w, id, _)| (w, id)).collect();
            let n = keys.len();
            keys.dedup();
            if keyed && keys.len() != n {
                return Err(format!("version {v}: a key appears twice: {rows:?}"));
            }
            if let Some(r) = rows.iter().find(|r| !all.contains(r)) {
                return Err(format!(
                    "version {v}: row {r:?} is not in the clean run's table"
                ));
            }
            for (w, c) in &coverage {
                let in_time = script.expected(w, *c, keyed, Policy::Drop);
                if let Some(r) = in_time.iter().find(|r| !rows.contains(r)) {
                    return Err(format!("version {v}: window {w} lacks in-time row {r:?}"));
                }
            }
            continue;
        }
        let mut expected: Vec<Row> = coverage
            .iter()
            .flat_map(|(w, c)| script.expected(w, *c, keyed, policy))
            .collect();
        expected.sort();
        if rows != expected {
            return Err(format!(
                "version {v}: a reader sees {} rows where its windows' publications cover {}:\n  seen     {rows:?}\n  expected {expected:?}",
                rows.len(),
                expected.len()
            ));
        }
    }
    Ok(latest + 1)
}

/// The bytes of every data file of the table, by window (its address), each window's files
/// sorted by content.
pub async fn window_files(table_dir: &Path) -> BTreeMap<String, Vec<Vec<u8>>> {
    let table = open_table(table_dir.to_str().unwrap(), &HashMap::new(), None)
        .await
        .expect("the table loads");
    let store = table.object_store();
    let mut files: BTreeMap<String, Vec<Vec<u8>>> = BTreeMap::new();
    for file in active_files(&table).await.expect("active files") {
        let window = address_of(&file);
        let path = object_store::path::Path::parse(&file.path).expect("a file path");
        let got = object_store::ObjectStoreExt::get(store.as_ref(), &path)
            .await
            .unwrap_or_else(|e| panic!("file {}: {e}", file.path));
        let bytes = got
            .bytes()
            .await
            .unwrap_or_else(|e| panic!("file {}: {e}", file.path));
        files.entry(window).or_default().push(bytes.to_vec());
    }
    for contents in files.values_mut() {
        contents.sort();
    }
    files
}

/// A file's window, as its address (`column=value/...`).
fn address_of(file: &sluice_publish::PublishedFile) -> String {
    file.partition_values
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("/")
}
