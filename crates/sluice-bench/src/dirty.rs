//! The benchmark's input with bad lines among the good: the same files, the same number of
//! lines, 30% of them replaced by records no table takes (each a dead letter), for the
//! memory check of a stream of bad records ((r) against (c), and on Kafka).

use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::alternatives::BenchError;

/// Of every ten lines, these are replaced by a bad one.
const BAD_OF_TEN: [usize; 3] = [1, 4, 7];

/// A bad record in place of `line`, of about its size: cut short (`malformed_json`), its
/// time spoiled (`bad_time`), or inside an array (`not_one_object`), in turn.
fn spoiled(line: &str, kind: usize) -> String {
    match kind % 3 {
        0 => {
            let mut cut = line.len() / 2;
            while !line.is_char_boundary(cut) {
                cut -= 1;
            }
            line[..cut].to_string()
        }
        1 => line.replacen("\"ts\":\"", "\"ts\":\"never ", 1),
        _ => format!("[{line}]"),
    }
}

/// Writes `input`'s files into `out` (replaced) with 30% of their lines bad; the lines
/// written and how many are bad.
pub fn write_dirty(input: &Path, out: &Path) -> Result<(u64, u64), BenchError> {
    if out.exists() {
        std::fs::remove_dir_all(out)?;
    }
    std::fs::create_dir_all(out)?;
    let mut files: Vec<PathBuf> = std::fs::read_dir(input)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    files.sort();
    let (mut lines, mut bad) = (0u64, 0u64);
    for file in files {
        let name = file.file_name().ok_or("an input file without a name")?;
        let mut w = BufWriter::new(std::fs::File::create(out.join(name))?);
        for line in BufReader::new(std::fs::File::open(&file)?).lines() {
            let line = line?;
            if BAD_OF_TEN.contains(&((lines % 10) as usize)) {
                writeln!(w, "{}", spoiled(&line, bad as usize))?;
                bad += 1;
            } else {
                writeln!(w, "{line}")?;
            }
            lines += 1;
        }
        w.flush()?;
    }
    Ok((lines, bad))
}
