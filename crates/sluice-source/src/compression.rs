//! Compressed input files: gzip and zstd, recognised by their name's extension or, failing
//! that, by their first bytes (magic numbers).
//!
//! A compressed file is read as its decompressed bytes: a position in it is an offset in
//! the decompressed stream, so a restart decompresses the file again from its start and
//! skips to the position (a compressed stream cannot be entered in the middle). Its
//! decompressed length is not known before it is read to its end: its readable length is
//! [`COMPRESSED_LEN`], and the last chunk of it ends there (see [`crate::Chunk::end`]), so
//! the table's offset of a compressed file read to its end is [`COMPRESSED_LEN`].
//!
//! A compressed file is read once it is complete: wherever it is in the source and in any
//! run, a stream cut short ([`is_cut_short`]) is still being written, so its whole records
//! are read and the rest waits, as do the files after it; a corrupt stream is read up to the
//! damage, and the rest is a dead letter `unreadable` (its good lines are rows).

use std::io::{self, Read};

/// The readable length of a compressed file, and the offset its last chunk ends at: "to the
/// end of the decompressed stream, however long".
pub const COMPRESSED_LEN: u64 = i64::MAX as u64;

/// How a file's bytes are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Compression {
    None,
    Gzip,
    Zstd,
}

const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

impl Compression {
    /// The compression a file name's extension says, if it names one.
    pub fn of_name(name: &str) -> Option<Compression> {
        let lower = name.to_ascii_lowercase();
        if lower.ends_with(".gz") || lower.ends_with(".gzip") {
            Some(Compression::Gzip)
        } else if lower.ends_with(".zst") || lower.ends_with(".zstd") {
            Some(Compression::Zstd)
        } else {
            None
        }
    }

    /// Whether the file name ends in an extension of an uncompressed format (no need to look
    /// at its first bytes).
    pub fn plain_name(name: &str) -> bool {
        let lower = name.to_ascii_lowercase();
        [".json", ".ndjson", ".jsonl", ".csv", ".tsv", ".txt"]
            .iter()
            .any(|e| lower.ends_with(e))
    }

    /// The compression a file's first bytes say.
    pub fn of_magic(head: &[u8]) -> Compression {
        if head.starts_with(&GZIP_MAGIC) {
            Compression::Gzip
        } else if head.starts_with(&ZSTD_MAGIC) {
            Compression::Zstd
        } else {
            Compression::None
        }
    }

    /// How many first bytes [`Compression::of_magic`] looks at.
    pub const MAGIC_BYTES: usize = 4;

    pub fn is_compressed(self) -> bool {
        self != Compression::None
    }

    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Zstd => "zstd",
        }
    }

    /// The decompressed stream of `stored` (read from its first byte), positioned at
    /// decompressed offset `from` (the bytes before it are decompressed and dropped).
    pub fn decompress(
        self,
        stored: Box<dyn Read + Send>,
        from: u64,
    ) -> io::Result<Box<dyn Read + Send>> {
        let mut stream: Box<dyn Read + Send> = match self {
            Compression::None => stored,
            // Multi-member: `cat a.gz b.gz` is one valid gzip file (as gzip -d reads it).
            Compression::Gzip => Box::new(flate2::read::MultiGzDecoder::new(
                io::BufReader::with_capacity(STORED_BLOCK_BYTES, stored),
            )),
            Compression::Zstd => Box::new(zstd::stream::read::Decoder::with_buffer(
                io::BufReader::with_capacity(STORED_BLOCK_BYTES, stored),
            )?),
        };
        let skipped = io::copy(&mut stream.by_ref().take(from), &mut io::sink())?;
        if skipped < from {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("the decompressed stream ends at byte {skipped}, before the published position {from}: was the file rewritten?"),
            ));
        }
        Ok(stream)
    }
}

/// Bytes read from a compressed file's storage at a time.
const STORED_BLOCK_BYTES: usize = 256 << 10;

/// Whether a read error of a decompressed stream says the stream is cut short (more bytes
/// may still come, for a file still being written) rather than corrupt.
pub fn is_cut_short(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::UnexpectedEof
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    fn read_from(c: Compression, stored: Vec<u8>, from: u64) -> io::Result<Vec<u8>> {
        let mut out = Vec::new();
        c.decompress(Box::new(io::Cursor::new(stored)), from)?
            .read_to_end(&mut out)?;
        Ok(out)
    }

    #[test]
    fn names_and_magic_bytes_say_the_compression() {
        assert_eq!(Compression::of_name("a.ndjson.gz"), Some(Compression::Gzip));
        assert_eq!(Compression::of_name("A.JSON.ZST"), Some(Compression::Zstd));
        assert_eq!(Compression::of_name("a.ndjson"), None);
        assert!(Compression::plain_name("x.CSV") && !Compression::plain_name("part-0001"));
        assert_eq!(Compression::of_magic(&gzip(b"{}")), Compression::Gzip);
        let z = zstd::encode_all(&b"{}\n"[..], 1).unwrap();
        assert_eq!(Compression::of_magic(&z), Compression::Zstd);
        assert_eq!(Compression::of_magic(b"{\"a\""), Compression::None);
    }

    #[test]
    fn a_compressed_stream_is_entered_at_a_decompressed_offset() {
        let text = b"{\"a\":1}\n{\"a\":2}\n";
        let mut two = gzip(&text[..8]);
        two.extend(gzip(&text[8..]));
        assert_eq!(read_from(Compression::Gzip, two.clone(), 0).unwrap(), text);
        assert_eq!(read_from(Compression::Gzip, two, 8).unwrap(), &text[8..]);
        let z = zstd::encode_all(&text[..], 3).unwrap();
        assert_eq!(
            read_from(Compression::Zstd, z.clone(), 3).unwrap(),
            &text[3..]
        );
        let err = read_from(Compression::Zstd, z, 99).unwrap_err();
        assert!(err.to_string().contains("before the published position 99"));
    }

    #[test]
    fn a_stream_cut_short_is_told_from_a_corrupt_one() {
        let g = gzip(&b"{\"a\":1}\n".repeat(1000));
        let err = read_from(Compression::Gzip, g[..g.len() / 2].to_vec(), 0).unwrap_err();
        assert!(is_cut_short(&err), "{err}");
        let mut bad = g.clone();
        bad[20] ^= 0xff;
        bad[21] ^= 0xff;
        let err = read_from(Compression::Gzip, bad, 0).unwrap_err();
        assert!(!is_cut_short(&err), "{err}");
    }
}
