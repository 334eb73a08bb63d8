//! CSV files: records (which may span lines inside quotes) read as rows of text fields named
//! by the file's header ([`TextRows`]), each field meaning what it would as a JSON value, so
//! CSV rows go through the one decoder JSON lines do: the same types, time formats, schema
//! evolution and dead letters (decoding reads the fields into columns directly, and as JSON
//! objects where it cannot decide a chunk that way).
//!
//! - A record's position is the byte offset of its first byte (in the decompressed stream of
//!   a compressed file); the header is not a record.
//! - A field is a JSON number or boolean when its text is one (`42`, `-1.5e3`, `true`), so a
//!   new table's types are inferred as for JSON; any other text is a JSON string, read into
//!   the column's type exactly as JSON text is (`"2026-10-03T14:00:00Z"` into a timestamp).
//!   `007` is text (not a JSON number). An empty field is null.
//! - Column names come from the header (without a header: `_c0`, `_c1`, ...); an empty name
//!   is `_c<i>`, a repeated one `<name>_<i>` (i: the column's index from 0).
//! - A record with more or fewer fields than the header is a dead letter
//!   `wrong_field_count`; its raw text is the record as read.
//! - A quote that never closes (the file ends inside a quoted field) makes its record a dead
//!   letter `unterminated_quote`, read to the end of the line the quote opened on; the
//!   records after that line are read (they were swallowed into the open field).

use std::sync::Arc;

use crate::reject::{Reject, RejectReason};
use crate::text_rows::{json_string, TextRows, TextRowsBuilder};

/// How CSV records are written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CsvOptions {
    /// The field delimiter (`,`; `\t` for TSV).
    pub delimiter: u8,
    /// The quote character (`"`).
    pub quote: u8,
    /// The escape character inside quoted fields; `None`: a quote is escaped by doubling it
    /// (`""`), as RFC 4180 has it.
    pub escape: Option<u8>,
    /// The first record of every file names the columns.
    pub header: bool,
}

impl Default for CsvOptions {
    fn default() -> Self {
        CsvOptions {
            delimiter: b',',
            quote: b'"',
            escape: None,
            header: true,
        }
    }
}

impl CsvOptions {
    /// The end of the last complete record in `data` (which starts at a record's start):
    /// after its line end, outside quotes. `None` if no record ends in `data`.
    pub fn last_record_end(&self, data: &[u8]) -> Option<usize> {
        self.record_end(data, false)
    }

    /// The end of the first complete record in `data` (which starts at a record's start).
    pub fn first_record_end(&self, data: &[u8]) -> Option<usize> {
        self.record_end(data, true)
    }

    /// Whether `record` (one record without its line end) is whole: its quotes close, and
    /// it has at least `fields` fields if that is known (more is a dead letter
    /// `wrong_field_count` however it goes on; fewer may be a record still being written).
    pub fn is_whole_record(&self, record: &[u8], fields: Option<usize>) -> bool {
        if unterminated_quote_end(self, record).is_some() {
            return false;
        }
        let mut parsed = csv::ByteRecord::new();
        match self.reader(record).read_byte_record(&mut parsed) {
            Ok(true) => fields.is_none_or(|n| parsed.len() >= n),
            _ => false,
        }
    }

    /// The record parser of these options.
    fn parser(&self) -> csv_core::Reader {
        csv_core::ReaderBuilder::new()
            .delimiter(self.delimiter)
            .quote(self.quote)
            .escape(self.escape)
            .double_quote(self.escape.is_none())
            .build()
    }

    /// Where records end in `data`, found by the parser that splits them (so a quote in the
    /// middle of a field, a doubled quote or an escape is judged as the fields are).
    fn record_end(&self, data: &[u8], first: bool) -> Option<usize> {
        let mut parser = self.parser();
        let mut output = vec![0u8; 64 << 10];
        let mut ends = vec![0usize; 1024];
        let (mut at, mut last) = (0usize, None);
        loop {
            let (result, nin, _, _) = parser.read_record(&data[at..], &mut output, &mut ends);
            at += nin;
            match result {
                csv_core::ReadRecordResult::Record => {
                    last = Some(at);
                    if first {
                        return last;
                    }
                }
                // The fields' bytes are not kept: only where the record ends matters.
                csv_core::ReadRecordResult::OutputFull
                | csv_core::ReadRecordResult::OutputEndsFull => {}
                csv_core::ReadRecordResult::InputEmpty | csv_core::ReadRecordResult::End => {
                    return last
                }
            }
        }
    }

    fn reader<'d>(&self, data: &'d [u8]) -> csv::Reader<&'d [u8]> {
        csv::ReaderBuilder::new()
            .has_headers(false)
            .flexible(true)
            .delimiter(self.delimiter)
            .quote(self.quote)
            .escape(self.escape)
            .double_quote(self.escape.is_none())
            .from_reader(data)
    }

    /// The column names of a header record (`data`: the record's bytes, a byte-order mark
    /// left out).
    pub fn header(&self, data: &[u8]) -> Header {
        let mut record = csv::ByteRecord::new();
        let mut reader = self.reader(data);
        let fields: Vec<String> = match reader.read_byte_record(&mut record) {
            Ok(true) => record
                .iter()
                .map(|f| String::from_utf8_lossy(f).into_owned())
                .collect(),
            _ => Vec::new(),
        };
        Header::named(fields)
    }
}

/// The column names of a CSV file, and each as JSON text (`"name"`) ready to be written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    names: Arc<[String]>,
    keys: Arc<[Vec<u8>]>,
}

impl Header {
    /// Names as given, made unique and non-empty (see the module doc).
    pub fn named(given: Vec<String>) -> Header {
        let mut names: Vec<String> = Vec::with_capacity(given.len());
        for (i, n) in given.into_iter().enumerate() {
            let name = if n.is_empty() {
                format!("_c{i}")
            } else if names.contains(&n) {
                format!("{n}_{i}")
            } else {
                n
            };
            names.push(name);
        }
        let keys = names
            .iter()
            .map(|n| {
                let mut k = Vec::with_capacity(n.len() + 2);
                json_string(n.as_bytes(), &mut k);
                k
            })
            .collect();
        Header {
            names: names.into(),
            keys,
        }
    }

    /// `_c0` .. `_c<n-1>`: the names of a file without a header.
    pub fn positional(n: usize) -> Header {
        Header::named((0..n).map(|i| format!("_c{i}")).collect())
    }

    pub fn names(&self) -> &[String] {
        &self.names
    }
}

/// The records of `data` (whole records, the first at offset `start`) as rows of text
/// fields, and the records that are dead letters. `header`: the file's columns (`None` for a
/// file without a header: each record is named positionally, and the first record fixes the
/// field count).
pub(crate) struct Converted {
    /// `None` when no record is a row.
    pub rows: Option<TextRows>,
    pub bad: Vec<Reject>,
}

/// [`Converted`] as it is built.
struct Converting {
    rows: Option<TextRowsBuilder>,
    bad: Vec<Reject>,
    /// Bytes of the data it is built from (to size the columns).
    bytes: usize,
}

impl Converting {
    fn finish(self, header: &Option<Header>) -> Converted {
        let rows = match (self.rows, header) {
            (Some(rows), Some(h)) if rows.rows() > 0 => {
                Some(rows.finish(h.names.clone(), h.keys.clone()))
            }
            _ => None,
        };
        Converted {
            rows,
            bad: self.bad,
        }
    }
}

pub(crate) fn convert(
    options: &CsvOptions,
    header: &mut Option<Header>,
    file: u32,
    start: i64,
    data: &[u8],
) -> Converted {
    convert_records(options, header, file, start, data, true).0
}

/// [`convert`] in one pass of the parser over `data` (which starts at a record): the whole
/// records, and the bytes they take. Without `eof`, a last record without its line end is
/// left (more of it may follow); with it, it is a record too.
pub(crate) fn convert_records(
    options: &CsvOptions,
    header: &mut Option<Header>,
    file: u32,
    start: i64,
    data: &[u8],
    eof: bool,
) -> (Converted, usize) {
    let mut out = Converting {
        rows: None,
        bad: Vec::new(),
        bytes: data.len(),
    };
    let used = parse_records(options, header, (file, start, data), eof, &mut out);
    (out.finish(header), used)
}

/// [`convert_records`] into `out`.
fn parse_records(
    options: &CsvOptions,
    header: &mut Option<Header>,
    (file, start, data): (u32, i64, &[u8]),
    eof: bool,
    out: &mut Converting,
) -> usize {
    let mut parser = options.parser();
    let (mut fields, mut ends) = (vec![0u8; 4096], vec![0usize; 64]);
    let (mut at, mut record_at, mut written, mut n_ends) = (0usize, 0usize, 0usize, 0usize);
    let mut consumed = 0;
    loop {
        let input = &data[at..];
        let (result, nin, nout, nend) =
            parser.read_record(input, &mut fields[written..], &mut ends[n_ends..]);
        // (Field ends count from the record's first output byte, across calls.)
        at += nin;
        written += nout;
        n_ends += nend;
        match result {
            csv_core::ReadRecordResult::OutputFull => fields.resize(fields.len() * 2, 0),
            csv_core::ReadRecordResult::OutputEndsFull => ends.resize(ends.len() * 2, 0),
            csv_core::ReadRecordResult::Record => {
                // A record that runs to the end of the data may be one whose quote never
                // closes: it ends with the line its quote opened on, and parsing starts
                // again after it (the records it would swallow are read).
                let unterminated = (eof && at == data.len())
                    .then(|| unterminated_quote_end(options, &data[record_at..at]))
                    .flatten();
                if let Some(cut) = unterminated {
                    let why = RejectReason::UnterminatedQuote(format!(
                        "a quoted field is never closed (the file ends inside it); the record is read to the end of the line the quote opened on ({cut} bytes), and the records after it are read"
                    ));
                    let end = record_at + cut;
                    out.bad.push(bad_record(
                        file,
                        start,
                        data,
                        first_byte(data, record_at, end),
                        end,
                        why,
                    ));
                    parser.reset();
                    (at, record_at, consumed, written, n_ends) = (end, end, end, 0, 0);
                    continue;
                }
                let record = Fields {
                    bytes: &fields[..written],
                    ends: &ends[..n_ends],
                };
                take_record(out, header, (file, start, data), (record_at, at), &record);
                (record_at, consumed, written, n_ends) = (at, at, 0, 0);
            }
            csv_core::ReadRecordResult::InputEmpty if eof && input.is_empty() => {
                // The end of the input has been said (an empty read): nothing is left.
                return data.len();
            }
            csv_core::ReadRecordResult::InputEmpty if eof => {}
            csv_core::ReadRecordResult::InputEmpty => return consumed,
            csv_core::ReadRecordResult::End => return data.len(),
        }
    }
}

/// The fields of one record as the parser wrote them: their bytes, and where each ends.
struct Fields<'a> {
    bytes: &'a [u8],
    ends: &'a [usize],
}

impl Fields<'_> {
    fn len(&self) -> usize {
        self.ends.len()
    }

    fn iter(&self) -> impl Iterator<Item = &[u8]> + '_ {
        let mut from = 0;
        self.ends.iter().map(move |&end| {
            let field = &self.bytes[from..end];
            from = end;
            field
        })
    }
}

/// Where the bad record of `record` (one record's bytes, blank lines before it included,
/// read to the end of the data) ends if it ends inside a quoted field: after the line end of
/// the line that field's quote opened on, or at the end of `record` if no line end follows
/// it. `None` if every quote it opens closes. The quoting rules are csv_core's (a quote
/// opens a field only as its first byte; doubled or escaped quotes inside one).
fn unterminated_quote_end(options: &CsvOptions, record: &[u8]) -> Option<usize> {
    #[derive(Clone, Copy, PartialEq, Eq)]
    enum At {
        FieldStart,
        Unquoted,
        Quoted,
        Escaped,
        QuoteInQuoted,
    }
    let (mut at, mut opened) = (At::FieldStart, 0);
    for (i, &b) in record.iter().enumerate() {
        let line_end = b == b'\n' || b == b'\r';
        at = match at {
            At::FieldStart if b == options.quote => {
                opened = i;
                At::Quoted
            }
            At::Quoted if b == options.quote => At::QuoteInQuoted,
            At::Quoted if options.escape == Some(b) => At::Escaped,
            At::Quoted => At::Quoted,
            At::Escaped => At::Quoted,
            At::QuoteInQuoted if b == options.quote && options.escape.is_none() => At::Quoted,
            // A delimiter or a line end (blank lines before the record) starts a field.
            _ if b == options.delimiter || line_end => At::FieldStart,
            _ => At::Unquoted,
        };
    }
    if !matches!(at, At::Quoted | At::Escaped) {
        return None;
    }
    Some(memchr::memchr(b'\n', &record[opened..]).map_or(record.len(), |i| opened + i + 1))
}

/// The first byte of the record spanning `data[from..end]`: blank lines before it are not
/// part of it.
fn first_byte(data: &[u8], from: usize, end: usize) -> usize {
    let mut from = from;
    while from < end && matches!(data[from], b'\n' | b'\r') {
        from += 1;
    }
    from
}

/// One parsed record (`span`: its bytes in `data`, blank lines before it included) as a row,
/// or a dead letter `wrong_field_count`.
fn take_record(
    out: &mut Converting,
    header: &mut Option<Header>,
    (file, start, data): (u32, i64, &[u8]),
    (from, end): (usize, usize),
    record: &Fields,
) {
    let from = first_byte(data, from, end);
    if from == end {
        return; // blank lines at the end of the data: no record
    }
    let names = header.get_or_insert_with(|| Header::positional(record.len()));
    if record.len() != names.keys.len() {
        let why = RejectReason::WrongFieldCount(format!(
            "the record has {} fields, the header {} ({})",
            record.len(),
            names.keys.len(),
            names.names.join(",")
        ));
        out.bad.push(bad_record(file, start, data, from, end, why));
        return;
    }
    let fields = names.keys.len();
    out.rows
        .get_or_insert_with(|| TextRowsBuilder::new(fields, out.bytes))
        .push(start + from as i64, record.iter());
}

fn bad_record(
    file: u32,
    start: i64,
    data: &[u8],
    from: usize,
    to: usize,
    reason: RejectReason,
) -> Reject {
    let raw = &data[from.min(data.len())..to.min(data.len())];
    let raw = raw.strip_suffix(b"\n").unwrap_or(raw);
    let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
    let raw = &raw[..raw.len().min(crate::RAW_BYTES_MAX)];
    Reject {
        file,
        offset: start + from as i64,
        reason,
        raw: String::from_utf8_lossy(raw).into_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(c: &Converted) -> Vec<String> {
        c.rows
            .iter()
            .flat_map(|r| r.json_lines())
            .map(|(_, l)| String::from_utf8(l).unwrap())
            .collect()
    }

    fn offsets(c: &Converted) -> Vec<i64> {
        c.rows.as_ref().map_or_else(Vec::new, |r| r.offsets.clone())
    }

    #[test]
    fn records_become_json_objects_at_their_byte_offsets() {
        let o = CsvOptions::default();
        let mut header = Some(o.header(b"id,ts,note,,id\n"));
        assert_eq!(
            header.as_ref().unwrap().names(),
            ["id", "ts", "note", "_c3", "id_4"]
        );
        let data = b"1,2026-10-03T14:00:00Z,\"a, \"\"quoted\"\"\nline\",x,007\n\n2,true,,,1e3\r\n";
        let c = convert(&o, &mut header, 1, 15, data);
        assert_eq!(
            lines(&c),
            [
                r#"{"id":1,"ts":"2026-10-03T14:00:00Z","note":"a, \"quoted\"\nline","_c3":"x","id_4":"007"}"#,
                r#"{"id":2,"ts":true,"id_4":1e3}"#,
            ]
        );
        let second = data.windows(3).position(|w| w == b"\n2,").unwrap() as i64 + 1;
        assert_eq!(offsets(&c), [15, 15 + second]);
        assert!(c.bad.is_empty());
    }

    #[test]
    fn a_record_with_the_wrong_field_count_is_a_dead_letter() {
        let o = CsvOptions::default();
        let mut header = Some(o.header(b"a,b\n"));
        let c = convert(&o, &mut header, 3, 4, b"1,2\n1,2,3\n9\n4,5\n");
        assert_eq!(lines(&c), [r#"{"a":1,"b":2}"#, r#"{"a":4,"b":5}"#]);
        assert_eq!(offsets(&c), [4, 16]);
        let bad: Vec<_> = c
            .bad
            .iter()
            .map(|r| (r.offset, r.reason.as_str(), r.raw.as_str()))
            .collect();
        assert_eq!(
            bad,
            [
                (8, "wrong_field_count", "1,2,3"),
                (14, "wrong_field_count", "9")
            ]
        );
    }

    /// A quote that never closes swallowed every record after it into one field: its record
    /// is a dead letter to the end of the quote's line, and the records after it are rows.
    #[test]
    fn an_unterminated_quote_is_a_dead_letter_and_the_records_after_it_are_read() {
        let o = CsvOptions::default();
        let mut header = Some(o.header(b"id,note\n"));
        let data = b"1,\"ok\nquoted\"\n2,\"open\n3,x\n4,y\n";
        let (c, used) = convert_records(&o, &mut header, 1, 8, data, true);
        assert_eq!(used, data.len());
        assert_eq!(
            lines(&c),
            [
                r#"{"id":1,"note":"ok\nquoted"}"#,
                r#"{"id":3,"note":"x"}"#,
                r#"{"id":4,"note":"y"}"#
            ]
        );
        let bad: Vec<_> = c
            .bad
            .iter()
            .map(|r| (r.offset, r.reason.as_str(), r.raw.as_str()))
            .collect();
        assert_eq!(bad, [(8 + 14, "unterminated_quote", "2,\"open")]);
        assert_eq!(offsets(&c), [8, 8 + 22, 8 + 26]);
        // Not at the end of the data (more may come): the record waits.
        let (c, used) = convert_records(&o, &mut header, 1, 8, data, false);
        assert_eq!((lines(&c).len(), used), (1, 14));
        // On a line before the last, which has no line end; a later quote would close it
        // (`5,"a` then `6,"b` is one record, whose field holds `a\n6,` and `b`).
        let (c, _) = convert_records(&o, &mut header, 1, 0, b"5,\"a\n6,b", true);
        assert_eq!(c.bad.len(), 1);
        assert_eq!(lines(&c), [r#"{"id":6,"note":"b"}"#]);
        let (c, _) = convert_records(&o, &mut header, 1, 0, b"5,\"a\n6,\"b", true);
        assert_eq!((c.bad.len(), lines(&c).len()), (0, 1));
        let escaped = CsvOptions {
            escape: Some(b'\\'),
            ..CsvOptions::default()
        };
        assert_eq!(unterminated_quote_end(&escaped, b"7,\"a\\\"\n"), Some(7));
        assert_eq!(unterminated_quote_end(&escaped, b"7,\"a\\\"\""), None);
        assert_eq!(unterminated_quote_end(&o, b"7,\"a\"\"\n8"), Some(7));
        assert_eq!(
            unterminated_quote_end(&o, b"7,a\"b\n"),
            None,
            "not a quoted field"
        );
    }

    #[test]
    fn record_ends_are_found_outside_quotes() {
        let o = CsvOptions::default();
        assert_eq!(o.last_record_end(b"a,\"b\nc\"\nd,\"e\n"), Some(8));
        assert_eq!(o.last_record_end(b"a,\"b\n"), None);
        assert_eq!(o.first_record_end(b"a,\"b\nc\"\nd\ne\n"), Some(8));
        let escaped = CsvOptions {
            escape: Some(b'\\'),
            ..CsvOptions::default()
        };
        assert_eq!(escaped.last_record_end(b"\"a\\\"\n\"\n"), Some(7));
        let mut header = Some(escaped.header(b"x\n"));
        let c = convert(&escaped, &mut header, 1, 0, b"\"a\\\"\n\"\n");
        assert_eq!(lines(&c), [r#"{"x":"a\"\n"}"#]);
    }

    /// Fields longer than the parser's buffers, a record cut by the end of the data (left
    /// for more to come, or a record at the end of the file), in one pass.
    #[test]
    fn long_fields_and_records_cut_by_the_end_of_the_data() {
        let o = CsvOptions::default();
        let long = "x".repeat(10_000);
        let many = vec!["1"; 200].join(",");
        let text = format!("a,b\n\"{long}\",2\n{many}\n3,4");
        let mut header = Some(o.header(b"a,b\n"));
        let (c, used) = convert_records(&o, &mut header, 1, 4, &text.as_bytes()[4..], false);
        assert_eq!(lines(&c)[0], format!(r#"{{"a":"{long}","b":2}}"#));
        assert_eq!(c.bad.len(), 1, "200 fields for a header of 2");
        assert_eq!(
            used,
            text.len() - 4 - "3,4".len(),
            "the last record may go on"
        );
        let (c, used) = convert_records(&o, &mut header, 1, 4, &text.as_bytes()[4..], true);
        assert_eq!(lines(&c).last().unwrap(), r#"{"a":3,"b":4}"#);
        assert_eq!(used, text.len() - 4);
    }
}
