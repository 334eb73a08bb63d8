//! A log message's own fields as columns (`--kafka-columns key,timestamp,headers,partition,
//! offset`): `kafka_key`, `kafka_timestamp`, `kafka_headers`, `kafka_partition`,
//! `kafka_offset`, filled from what the consumer read with the message, never from its value.
//!
//! The columns are in the record schema (the opener adds them) under a read name no record
//! field has, so a record's own field of the same name is never taken for them; decoding
//! fills them per row from the chunk's [`MessageMeta`] (see `decode`). A key or header value
//! that is not UTF-8 where the columns hold text ([`BytesAs::String`]) fails its row
//! (`wrong_type`): it is never changed into other text.

use std::sync::Arc;

use deltalake::arrow::array::{
    ArrayRef, BinaryArray, Int32Array, Int64Array, ListArray, StringArray, StructArray,
    TimestampMicrosecondArray,
};
use deltalake::arrow::buffer::OffsetBuffer;
use deltalake::arrow::datatypes::{DataType, Field, Fields, TimeUnit};

/// The message of each row at `offsets`, found in `meta` (sorted by offset).
pub fn rows_of<'m>(offsets: &[i64], meta: &'m [MessageMeta]) -> Vec<Option<&'m MessageMeta>> {
    offsets
        .iter()
        .map(|o| {
            meta.binary_search_by_key(o, |m| m.offset)
                .ok()
                .map(|i| &meta[i])
        })
        .collect()
}

/// What a message carries besides its value.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MessageMeta {
    pub offset: i64,
    pub partition: i32,
    pub key: Option<Vec<u8>>,
    /// Milliseconds since the epoch (the producer's create time, or the broker's append
    /// time, as the topic is configured); `None` when the message has none.
    pub timestamp_ms: Option<i64>,
    /// In the order the message has them (a key may repeat).
    pub headers: Vec<(String, Option<Vec<u8>>)>,
}

/// One of a message's own fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum MessagePart {
    Key,
    Timestamp,
    Headers,
    Partition,
    Offset,
}

impl MessagePart {
    pub const ALL: [MessagePart; 5] = [
        MessagePart::Key,
        MessagePart::Timestamp,
        MessagePart::Headers,
        MessagePart::Partition,
        MessagePart::Offset,
    ];

    pub fn parse(name: &str) -> Option<MessagePart> {
        MessagePart::ALL.into_iter().find(|p| p.name() == name)
    }

    /// The name in `--kafka-columns`.
    pub fn name(self) -> &'static str {
        match self {
            MessagePart::Key => "key",
            MessagePart::Timestamp => "timestamp",
            MessagePart::Headers => "headers",
            MessagePart::Partition => "partition",
            MessagePart::Offset => "offset",
        }
    }

    /// The column's name in the table.
    pub fn column(self) -> String {
        format!("kafka_{}", self.name())
    }

    /// The name the column is read under: no record field has it.
    pub fn read_name(self) -> String {
        format!("\u{0}sluice.kafka_{}", self.name())
    }
}

/// How message keys and header values are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BytesAs {
    /// UTF-8 text (a value that is not fails its row).
    #[default]
    String,
    Binary,
}

impl BytesAs {
    pub fn parse(name: &str) -> Option<BytesAs> {
        match name {
            "string" => Some(BytesAs::String),
            "binary" => Some(BytesAs::Binary),
            _ => None,
        }
    }

    fn data_type(self) -> DataType {
        match self {
            BytesAs::String => DataType::Utf8,
            BytesAs::Binary => DataType::Binary,
        }
    }
}

/// The message columns a run adds, and how it stores bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MessageColumns {
    pub parts: Vec<MessagePart>,
    pub bytes: BytesAs,
}

impl MessageColumns {
    pub fn is_empty(&self) -> bool {
        self.parts.is_empty()
    }

    /// The column of `part` as the record schema holds it (read under
    /// [`MessagePart::read_name`], see `schema::SOURCE_NAME_KEY`).
    pub fn field(&self, part: MessagePart) -> Field {
        let t = match part {
            MessagePart::Key => self.bytes.data_type(),
            MessagePart::Timestamp => {
                DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
            }
            MessagePart::Headers => DataType::List(Arc::new(Field::new(
                "element",
                DataType::Struct(self.header_fields()),
                true,
            ))),
            MessagePart::Partition => DataType::Int32,
            MessagePart::Offset => DataType::Int64,
        };
        let read_as = [(crate::schema::SOURCE_NAME_KEY.to_string(), part.read_name())];
        Field::new(part.column(), t, true).with_metadata(read_as.into_iter().collect())
    }

    fn header_fields(&self) -> Fields {
        Fields::from(vec![
            Field::new("key", DataType::Utf8, true),
            Field::new("value", self.bytes.data_type(), true),
        ])
    }

    /// The column of `part` for `rows` (each row's message, see [`rows_of`]); rows whose
    /// value cannot be stored get a reason in `failed`.
    pub fn fill(
        &self,
        part: MessagePart,
        rows: &[Option<&MessageMeta>],
        failed: &mut [Option<String>],
    ) -> ArrayRef {
        match part {
            MessagePart::Key => {
                let keys: Vec<Option<&[u8]>> = rows
                    .iter()
                    .map(|m| m.and_then(|m| m.key.as_deref()))
                    .collect();
                self.bytes_array(&keys, "key", failed)
            }
            MessagePart::Timestamp => Arc::new(
                rows.iter()
                    .map(|m| m.and_then(|m| m.timestamp_ms).map(|ms| ms * 1000))
                    .collect::<TimestampMicrosecondArray>()
                    .with_timezone("UTC"),
            ),
            MessagePart::Partition => Arc::new(
                rows.iter()
                    .map(|m| m.map(|m| m.partition))
                    .collect::<Int32Array>(),
            ),
            MessagePart::Offset => Arc::new(
                rows.iter()
                    .map(|m| m.map(|m| m.offset))
                    .collect::<Int64Array>(),
            ),
            MessagePart::Headers => self.headers(rows, failed),
        }
    }

    fn headers(&self, rows: &[Option<&MessageMeta>], failed: &mut [Option<String>]) -> ArrayRef {
        let mut lengths = Vec::with_capacity(rows.len());
        let mut keys: Vec<Option<&str>> = Vec::new();
        let mut values: Vec<Option<&[u8]>> = Vec::new();
        let mut owners: Vec<usize> = Vec::new();
        for (row, m) in rows.iter().enumerate() {
            let headers = m.map_or(&[][..], |m| m.headers.as_slice());
            lengths.push(headers.len());
            for (k, v) in headers {
                keys.push(Some(k.as_str()));
                values.push(v.as_deref());
                owners.push(row);
            }
        }
        let mut value_failed: Vec<Option<String>> = vec![None; values.len()];
        let values = self.bytes_array(&values, "header value", &mut value_failed);
        for (i, why) in value_failed.into_iter().enumerate() {
            if let Some(why) = why {
                failed[owners[i]].get_or_insert(why);
            }
        }
        let entries = StructArray::new(
            self.header_fields(),
            vec![Arc::new(StringArray::from(keys)) as ArrayRef, values],
            None,
        );
        let DataType::List(element) = self.field(MessagePart::Headers).data_type().clone() else {
            unreachable!("the headers column is a list");
        };
        Arc::new(ListArray::new(
            element,
            OffsetBuffer::from_lengths(lengths),
            Arc::new(entries),
            None,
        ))
    }

    /// Bytes as the columns store them; a value that is not UTF-8 where they hold text is
    /// null, its row failed.
    fn bytes_array(
        &self,
        values: &[Option<&[u8]>],
        what: &str,
        failed: &mut [Option<String>],
    ) -> ArrayRef {
        match self.bytes {
            BytesAs::Binary => Arc::new(BinaryArray::from(values.to_vec())),
            BytesAs::String => {
                let text: Vec<Option<&str>> = values
                    .iter()
                    .enumerate()
                    .map(|(row, v)| {
                        let v = (*v)?;
                        match std::str::from_utf8(v) {
                            Ok(s) => Some(s),
                            Err(_) => {
                                failed[row].get_or_insert_with(|| {
                                    format!("the message's {what} is not UTF-8 text (--kafka-bytes binary stores it as it is)")
                                });
                                None
                            }
                        }
                    })
                    .collect();
                Arc::new(StringArray::from(text))
            }
        }
    }
}
