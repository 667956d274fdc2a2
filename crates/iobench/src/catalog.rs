//! The study's use cases, methods, file sizes and buffer sizes — the Rust mirror of the Maven
//! module's `Catalog` and `Size` (a test checks the two agree when the jar is built).

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// A use case of the paper.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    /// Read the text file by chunks or lines (Table III).
    Read,
    /// Read the whole file at once (Figure 1).
    Readall,
    /// Read 100 bytes, move 10,000 bytes on, to the end of the binary file (Table IV).
    Seek,
    /// Write the text file (Table V): the paper's protocol, the window closing before the kernel
    /// writes the data back.
    Write,
    /// Write the text file with each write method, then fsync it inside the window: the flushed
    /// variant beside the paper's unflushed one.
    Writesync,
    /// RQ2: our Fasta generator with a swappable write method.
    Fasta,
    /// RQ2: our K-nucleotide counter with a swappable read method (input: Fasta's output).
    Knucleotide,
    /// RQ2: Zip4j compressing the text file, read with a swappable method.
    Zip4j,
    /// RQ2: javax.crypto AES decryption of the encrypted text file, read with a swappable method.
    Crypto,
}

impl Op {
    /// The micro-benchmark use cases (the default of `--ops`).
    pub const ALL: [Op; 5] = [Op::Read, Op::Readall, Op::Seek, Op::Write, Op::Writesync];
    /// The RQ2 programs (`--apps`).
    pub const APPS: [Op; 4] = [Op::Fasta, Op::Knucleotide, Op::Zip4j, Op::Crypto];
    /// Everything, in report order.
    pub const EVERY: [Op; 9] = [
        Op::Read,
        Op::Readall,
        Op::Seek,
        Op::Write,
        Op::Writesync,
        Op::Fasta,
        Op::Knucleotide,
        Op::Zip4j,
        Op::Crypto,
    ];

    /// Whether the use case writes the text file (the flushed variant too).
    pub fn writes(self) -> bool {
        matches!(self, Op::Write | Op::Writesync)
    }

    /// One of the RQ2 programs.
    pub fn is_app(self) -> bool {
        Op::APPS.contains(&self)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Op::Read => "read",
            Op::Readall => "readall",
            Op::Seek => "seek",
            Op::Write => "write",
            Op::Writesync => "writesync",
            Op::Fasta => "fasta",
            Op::Knucleotide => "knucleotide",
            Op::Zip4j => "zip4j",
            Op::Crypto => "crypto",
        }
    }

    /// The JMH benchmark class of this use case.
    pub fn bench_class(self) -> &'static str {
        match self {
            Op::Read => "io.wattio.iobench.ReadBench",
            Op::Readall => "io.wattio.iobench.ReadAllBench",
            Op::Seek => "io.wattio.iobench.SeekBench",
            Op::Write => "io.wattio.iobench.WriteBench",
            Op::Writesync => "io.wattio.iobench.WriteSyncBench",
            _ => "io.wattio.iobench.AppsBench",
        }
    }

    /// What the use case does, for table titles.
    pub fn title(self) -> &'static str {
        match self {
            Op::Read => "read by chunks/lines",
            Op::Readall => "read the whole file",
            Op::Seek => "seek (100 B read, 10,000 B skipped)",
            Op::Write => "write (unflushed, the paper's protocol)",
            Op::Writesync => "write, then fsync (flushed)",
            Op::Fasta => "Fasta (write 60-column nucleotide lines)",
            Op::Knucleotide => "K-nucleotide (read Fasta's output, count k-mers)",
            Op::Zip4j => "Zip4j (compress the text file)",
            Op::Crypto => "javax.crypto (AES-decrypt the text file)",
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Op {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Op::EVERY
            .into_iter()
            .find(|o| o.as_str().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| {
                format!("unknown use case '{s}': use read, readall, seek, write, fasta, knucleotide, zip4j or crypto")
            })
    }
}

/// One method of one use case.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MethodInfo {
    pub op: Op,
    /// Name used on the command line and as the JMH benchmark method.
    pub name: &'static str,
    /// The paper's acronym (Table II).
    pub acronym: &'static str,
    /// Takes the buffer size (varied by `--buffer-sweep`).
    pub buffered: bool,
}

const fn m(op: Op, name: &'static str, acronym: &'static str, buffered: bool) -> MethodInfo {
    MethodInfo {
        op,
        name,
        acronym,
        buffered,
    }
}

/// Every method of every use case, in the order of the Java catalog.
pub const CATALOG_METHODS: &[MethodInfo] = &[
    m(Op::Read, "apache", "APACHE", false),
    m(Op::Read, "bfilereader", "BFILEREADER", true),
    m(Op::Read, "biostream", "BIOSTREAM", true),
    m(Op::Read, "channel", "CHANNEL", true),
    m(Op::Read, "filereader", "FILEREADER", true),
    m(Op::Read, "guava", "GUAVA", false),
    m(Op::Read, "iostream", "IOSTREAM", true),
    m(Op::Read, "niof", "NIOF", false),
    m(Op::Read, "omchannel", "OMCHANNEL", true),
    m(Op::Read, "raf", "RAF", false),
    m(Op::Read, "scanner", "SCANNER", false),
    m(Op::Readall, "apache", "APACHE", false),
    m(Op::Readall, "apachebytes", "APACHE", false),
    m(Op::Readall, "guava", "GUAVA", false),
    m(Op::Readall, "iostream", "IOSTREAM", false),
    m(Op::Readall, "niof", "NIOF", false),
    m(Op::Seek, "channel", "CHANNEL", false),
    m(Op::Seek, "iostream", "IOSTREAM", false),
    m(Op::Seek, "raf", "RAF", false),
    m(Op::Write, "apache", "APACHE", false),
    m(Op::Write, "bfilewriter", "BFILEWRITER", true),
    m(Op::Write, "biostream", "BIOSTREAM", true),
    m(Op::Write, "channel", "CHANNEL", true),
    m(Op::Write, "filewriter", "FILEWRITER", false),
    m(Op::Write, "guava", "GUAVA", false),
    m(Op::Write, "iostream", "IOSTREAM", false),
    m(Op::Write, "niof", "NIOF", false),
    m(Op::Write, "raf", "RAF", false),
    m(Op::Writesync, "apache", "APACHE", false),
    m(Op::Writesync, "bfilewriter", "BFILEWRITER", true),
    m(Op::Writesync, "biostream", "BIOSTREAM", true),
    m(Op::Writesync, "channel", "CHANNEL", true),
    m(Op::Writesync, "filewriter", "FILEWRITER", false),
    m(Op::Writesync, "guava", "GUAVA", false),
    m(Op::Writesync, "iostream", "IOSTREAM", false),
    m(Op::Writesync, "niof", "NIOF", false),
    m(Op::Writesync, "raf", "RAF", false),
    m(Op::Fasta, "iostream", "IOSTREAM", false),
    m(Op::Fasta, "biostream", "BIOSTREAM", false),
    m(Op::Fasta, "bfilewriter", "BFILEWRITER", false),
    m(Op::Fasta, "filewriter", "FILEWRITER", false),
    m(Op::Fasta, "channel", "CHANNEL", false),
    m(Op::Knucleotide, "biostream", "BIOSTREAM", false),
    m(Op::Knucleotide, "bfilereader", "BFILEREADER", false),
    m(Op::Knucleotide, "filereader", "FILEREADER", false),
    m(Op::Knucleotide, "niof", "NIOF", false),
    m(Op::Knucleotide, "channel", "CHANNEL", false),
    m(Op::Zip4j, "iostream", "IOSTREAM", false),
    m(Op::Zip4j, "biostream", "BIOSTREAM", false),
    m(Op::Zip4j, "niof", "NIOF", false),
    m(Op::Zip4j, "channel", "CHANNEL", false),
    m(Op::Zip4j, "omchannel", "OMCHANNEL", false),
    m(Op::Crypto, "iostream", "IOSTREAM", false),
    m(Op::Crypto, "biostream", "BIOSTREAM", false),
    m(Op::Crypto, "niof", "NIOF", false),
    m(Op::Crypto, "channel", "CHANNEL", false),
    m(Op::Crypto, "omchannel", "OMCHANNEL", false),
];

/// Whether a run belongs to the main comparison (not the buffer sweep). The programs read with
/// their own fixed chunk size, reported in the buffer column.
pub(crate) fn is_main(op: Op, buffer: u32) -> bool {
    op.is_app() || buffer == DEFAULT_BUFFER
}

/// The methods of `op`.
pub(crate) fn methods_of(op: Op) -> impl Iterator<Item = &'static MethodInfo> {
    CATALOG_METHODS.iter().filter(move |m| m.op == op)
}

/// The method `name` of `op`, if the study has it.
pub(crate) fn find(op: Op, name: &str) -> Option<&'static MethodInfo> {
    CATALOG_METHODS
        .iter()
        .find(|m| m.op == op && m.name == name)
}

/// Table I of the paper.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Size {
    Tiny,
    Small,
    Medium,
    Medlarge,
    Large,
}

impl Size {
    pub const ALL: [Size; 5] = [
        Size::Tiny,
        Size::Small,
        Size::Medium,
        Size::Medlarge,
        Size::Large,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Size::Tiny => "tiny",
            Size::Small => "small",
            Size::Medium => "medium",
            Size::Medlarge => "medlarge",
            Size::Large => "large",
        }
    }

    /// (lines, line length including the '\n').
    pub fn shape(self) -> (u64, u64) {
        match self {
            Size::Tiny => (1_000, 100),
            Size::Small => (100_000, 150),
            Size::Medium => (1_000_000, 200),
            Size::Medlarge => (8_000_000, 400),
            Size::Large => (40_000_000, 400),
        }
    }

    /// File size in bytes (each of the text and the binary file).
    pub fn bytes(self) -> u64 {
        let (l, n) = self.shape();
        l * n
    }
}

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Size {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let t = s.trim().to_ascii_lowercase();
        let t = if t == "medium-large" {
            "medlarge".to_string()
        } else {
            t
        };
        Size::ALL
            .into_iter()
            .find(|z| z.as_str() == t)
            .ok_or_else(|| {
                format!("unknown size '{s}': use tiny, small, medium, medlarge or large")
            })
    }
}

/// The default buffer (the JDK's `BufferedReader` default, used by the paper).
pub(crate) const DEFAULT_BUFFER: u32 = 8192;

/// Buffer sizes of the sweep (Figure 5 of the paper: 1 KiB to 1 MiB).
pub(crate) const SWEEP_BUFFERS: [u32; 7] = [1024, 2048, 4096, 8192, 16384, 131_072, 1_048_576];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_one() {
        assert_eq!(Size::Tiny.bytes(), 100_000);
        assert_eq!(Size::Small.bytes(), 15_000_000);
        assert_eq!(Size::Medium.bytes(), 200_000_000);
        assert_eq!(Size::Medlarge.bytes(), 3_200_000_000);
        assert_eq!(Size::Large.bytes(), 16_000_000_000);
    }

    #[test]
    fn counts_per_use_case() {
        assert_eq!(methods_of(Op::Read).count(), 11);
        assert_eq!(methods_of(Op::Readall).count(), 5);
        assert_eq!(methods_of(Op::Seek).count(), 3);
        assert_eq!(methods_of(Op::Write).count(), 9);
        for app in Op::APPS {
            assert_eq!(methods_of(app).count(), 5);
            assert!(app.is_app());
        }
    }

    #[test]
    fn parsing() {
        assert_eq!("Medium-Large".parse::<Size>(), Ok(Size::Medlarge));
        assert!("huge".parse::<Size>().unwrap_err().contains("tiny, small"));
        assert_eq!("SEEK".parse::<Op>(), Ok(Op::Seek));
        assert!("fsync".parse::<Op>().is_err());
        assert!(find(Op::Read, "omchannel").unwrap().buffered);
        assert!(find(Op::Seek, "scanner").is_none());
    }
}
