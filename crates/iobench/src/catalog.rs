//! The study's use cases, methods, file sizes and buffer sizes — the Rust mirror of the Maven
//! module's `Catalog` and `Size` (a test checks the two agree when the jar is built).

pub use wattio_results::iobench::Op;

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

pub use wattio_results::iobench::Size;

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
