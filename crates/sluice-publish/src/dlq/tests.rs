//! The dead-letter table's owner columns and per-table offsets.

use deltalake::arrow::array::{Array, AsArray};
use deltalake::arrow::compute::concat_batches;
use deltalake::operations::create::CreateBuilder;

use super::*;

fn letter(offset: i64) -> DeadLetter {
    DeadLetter {
        source: "in".into(),
        offset,
        reason: "bad_time".into(),
        detail: "not a time".into(),
        raw: format!("{{\"t\":\"x{offset}\"}}"),
        window: None,
    }
}

fn owner(table_id: &str) -> DeadLetterOwner {
    DeadLetterOwner {
        pipeline: "p".into(),
        table_id: table_id.into(),
        contract: format!("{{\"time-format\":\"%Y-{table_id}\"}}"),
    }
}

async fn append(table: &mut DeadLetterTable, owner: &DeadLetterOwner, offset: i64) {
    let attempt = format!("{}-{offset}", owner.table_id);
    let mut stager = Stager::new(table.store(), attempt, Default::default());
    table
        .append(
            owner,
            &[letter(offset)],
            &[("in".into(), offset + 1)],
            1_000,
            &mut stager,
        )
        .await
        .unwrap();
}

/// (source offset, table id, contract) of every row, sorted.
async fn rows(table: &DeadLetterTable) -> Vec<(i64, Option<String>, Option<String>)> {
    let store = table.table.log_store().object_store(None);
    let schema = table.table.snapshot().unwrap().schema();
    assert!(schema.field(TABLE_ID_COLUMN).is_some() && schema.field("contract").is_some());
    let mut out = Vec::new();
    for view in table.table.snapshot().unwrap().log_data().iter() {
        let batches = sluice_stage::read_parquet(store.as_ref(), &view.path())
            .await
            .unwrap();
        let batch = concat_batches(&batches[0].schema(), &batches).unwrap();
        let text = |name: &str, i: usize| {
            batch.column_by_name(name).and_then(|c| {
                let c = c.as_string::<i32>();
                (!c.is_null(i)).then(|| c.value(i).to_string())
            })
        };
        let offsets = batch.column_by_name("source_offset").unwrap();
        let offsets = offsets.as_primitive::<deltalake::arrow::datatypes::Int64Type>();
        for i in 0..batch.num_rows() {
            out.push((
                offsets.value(i),
                text(TABLE_ID_COLUMN, i),
                text("contract", i),
            ));
        }
    }
    out.sort();
    out
}

#[tokio::test]
async fn dead_letter_offsets_are_kept_per_table_id() {
    let dir = tempfile::tempdir().unwrap();
    let options = TableOptions::new(dir.path().to_str().unwrap());
    let mut table = DeadLetterTable::open_or_create(&options).await.unwrap();
    append(&mut table, &owner("old"), 4).await;
    let partitions = ["in".to_string()];
    let old = table
        .committed_offsets(&owner("old"), &partitions)
        .await
        .unwrap();
    assert_eq!(old.get("in"), Some(&5));
    // A table created again at the same location has a new id: the old table's dead letters
    // are not taken for the new one's.
    let new = table
        .committed_offsets(&owner("new"), &partitions)
        .await
        .unwrap();
    assert!(new.is_empty(), "{new:?}");
    append(&mut table, &owner("new"), 4).await;
    let contract = |id: &str| Some(owner(id).contract);
    assert_eq!(
        rows(&table).await,
        vec![
            (4, Some("new".into()), contract("new")),
            (4, Some("old".into()), contract("old")),
        ]
    );
}

#[tokio::test]
async fn a_table_written_before_owner_columns_grows_them_with_its_next_dead_letters() {
    let dir = tempfile::tempdir().unwrap();
    let location = dir.path().to_str().unwrap();
    // The columns of the first release: the current ones without the two owner columns.
    let old: StructType = dead_letter_schema().as_ref().try_into_kernel().unwrap();
    let old_fields = old
        .fields()
        .filter(|f| f.name() != TABLE_ID_COLUMN && f.name() != "contract")
        .cloned();
    let mut created = CreateBuilder::new()
        .with_location(location)
        .with_columns(old_fields)
        .await
        .unwrap();
    let old_file = sluice_stage::Stager::new(created.object_store(), "old", Default::default())
        .slot_at_root("dlq")
        .write_computed(
            Arc::new(
                dead_letter_schema()
                    .project(&[0, 1, 2, 3, 4, 5, 6, 7])
                    .unwrap(),
            ),
            || {
                let full = dead_letter_batch(&owner("x"), &[letter(1)], 1_000).unwrap();
                Ok::<_, StageError>(vec![full.project(&[0, 1, 2, 3, 4, 5, 6, 7]).unwrap()])
            },
        )
        .await
        .unwrap();
    let add = Action::Add(Add {
        path: old_file.path,
        size: old_file.size_bytes,
        data_change: true,
        stats: Some(old_file.stats),
        ..Default::default()
    });
    let snapshot = created.snapshot().unwrap().clone();
    CommitBuilder::default()
        .with_actions(vec![add])
        .build(
            Some(&snapshot),
            created.log_store(),
            DeltaOperation::Write {
                mode: SaveMode::Append,
                partition_by: None,
                predicate: None,
            },
        )
        .await
        .unwrap();
    created.update_state().await.unwrap();

    let mut table = DeadLetterTable::open_or_create(&TableOptions::new(location))
        .await
        .unwrap();
    append(&mut table, &owner("t"), 7).await;
    assert_eq!(
        rows(&table).await,
        vec![
            (1, None, None),
            (7, Some("t".into()), owner("t").contract.into())
        ]
    );
}
