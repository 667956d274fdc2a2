//! The grammar as users write it: every spelling the crate documentation lists, the errors,
//! and round trips of what `Display`/`format_duration` write. Expected values are written out
//! by hand, never computed by the crate.

use proptest::prelude::*;
use std::time::Duration;
use wattio_units::{
    format_duration, format_duration_rounded, parse_duration, parse_duration_bare,
    parse_duration_or_seconds, BareUnit, BitRate, ByteSize, Quantity, UnitError,
};

fn rate(s: &str) -> u64 {
    s.parse::<BitRate>()
        .unwrap_or_else(|e| panic!("{s}: {e}"))
        .bits_per_second()
}

fn size(s: &str) -> u64 {
    s.parse::<ByteSize>()
        .unwrap_or_else(|e| panic!("{s}: {e}"))
        .bytes()
}

fn rate_err(s: &str) -> String {
    s.parse::<BitRate>().unwrap_err().to_string()
}

fn size_err(s: &str) -> String {
    s.parse::<ByteSize>().unwrap_err().to_string()
}

fn duration_err(s: &str) -> String {
    parse_duration(s).unwrap_err().to_string()
}

#[test]
fn rates_in_bits() {
    // The testbed's tc-style spellings and the transfer tool's, which used to disagree.
    assert_eq!(rate("800M"), 800_000_000);
    assert_eq!(rate("800m"), 800_000_000);
    assert_eq!(rate("800mbit"), 800_000_000);
    assert_eq!(rate("800Mbit/s"), 800_000_000);
    assert_eq!(rate("800Mbps"), 800_000_000);
    assert_eq!(rate("800mb/s"), 800_000_000);
    assert_eq!(rate("800 Mb"), 800_000_000);
    assert_eq!(rate("1gbit"), 1_000_000_000);
    assert_eq!(rate("1.5G"), 1_500_000_000);
    assert_eq!(rate("1.5gbps"), 1_500_000_000);
    assert_eq!(rate("64kbit"), 64_000);
    assert_eq!(rate("100kbps"), 100_000);
    assert_eq!(rate("2T"), 2_000_000_000_000);
    assert_eq!(rate("2000000"), 2_000_000);
    assert_eq!(rate("250bit"), 250);
    assert_eq!(rate("250 bits/s"), 250);
    assert_eq!(rate("1mibit"), 1_048_576);
    assert_eq!(rate("1Kibps"), 1024);
    assert_eq!(rate("  40mbit \n"), 40_000_000);
}

#[test]
fn rates_in_bytes() {
    assert_eq!(rate("100MB/s"), 800_000_000);
    assert_eq!(rate("100MBps"), 800_000_000);
    assert_eq!(rate("100MB"), 800_000_000);
    assert_eq!(rate("2MB/s"), 16_000_000);
    assert_eq!(rate("1MiB/s"), 8_388_608);
    assert_eq!(rate("5MiB/s"), 41_943_040);
    // Lowercase b is bits, whatever the prefix's case.
    assert_eq!(rate("5mib/s"), 5_242_880);
    assert_eq!(rate("512KiB/s"), 4_194_304);
    assert_eq!(rate("1GiB/s"), 8_589_934_592);
    assert_eq!(rate("10B/s"), 80);
    assert_eq!(rate("10Bps"), 80);
}

#[test]
fn rate_accessors() {
    let r: BitRate = "2MB/s".parse().unwrap();
    assert_eq!(r.bytes_per_second(), 2_000_000.0);
    assert_eq!(BitRate::from_bits_per_second(0), None);
    assert_eq!(
        BitRate::from_bits_per_second(7).map(BitRate::bits_per_second),
        Some(7)
    );
}

#[test]
fn bad_rates_say_what_to_write() {
    assert_eq!(
        rate_err("fast"),
        "rate 'fast': does not start with a number; write e.g. 800mbit, 1gbit or 100MB/s"
    );
    assert!(rate_err("10furlongs")
        .starts_with("rate '10furlongs': unknown unit 'furlongs'; write bits per second"));
    assert_eq!(rate_err("0mbit"), "rate '0mbit': must be more than 0 bit/s");
    assert_eq!(
        rate_err("0.0001bit"),
        "rate '0.0001bit': must be more than 0 bit/s"
    );
    assert_eq!(
        rate_err("-1g"),
        "rate '-1g': cannot be negative; write e.g. 800mbit, 1gbit or 100MB/s"
    );
    assert_eq!(
        rate_err(""),
        "rate '': empty; write e.g. 800mbit, 1gbit or 100MB/s"
    );
    assert_eq!(
        rate_err("99999999999999T"),
        "rate '99999999999999T': is more than 2^64 - 1 bit/s"
    );
    assert!(rate_err("1e9").contains("unknown unit 'e9'"));
    assert!(rate_err("1.2.3M").contains("does not start with a number"));
    let e = "x".parse::<BitRate>().unwrap_err();
    assert_eq!((e.quantity(), e.input()), (Quantity::Rate, "x"));
}

#[test]
fn rates_are_written_as_tc_writes_them() {
    let shown = |bits| BitRate::from_bits_per_second(bits).unwrap().to_string();
    assert_eq!(shown(1_000_000_000), "1gbit");
    assert_eq!(shown(500_000_000), "500mbit");
    assert_eq!(shown(1_500_000_000), "1500mbit");
    assert_eq!(shown(64_000), "64kbit");
    assert_eq!(shown(1_234_567), "1234567bit");
    assert_eq!(shown(3_000_000_000_000), "3tbit");
}

#[test]
fn sizes() {
    assert_eq!(size("1000000"), 1_000_000);
    assert_eq!(size("4096B"), 4096);
    assert_eq!(size("4MiB"), 4_194_304);
    assert_eq!(size("4 MiB"), 4_194_304);
    assert_eq!(size("4M"), 4_194_304);
    assert_eq!(size("4m"), 4_194_304);
    assert_eq!(size("512k"), 524_288);
    assert_eq!(size("512K"), 524_288);
    assert_eq!(size("512KiB"), 524_288);
    assert_eq!(size("1GiB"), 1_073_741_824);
    assert_eq!(size("1G"), 1_073_741_824);
    assert_eq!(size("2TiB"), 2_199_023_255_552);
    assert_eq!(size("4MB"), 4_000_000);
    assert_eq!(size("4kB"), 4_000);
    assert_eq!(size("4KB"), 4_000);
    assert_eq!(size("1.1MB"), 1_100_000);
    assert_eq!(size("1.5KiB"), 1536);
    assert_eq!(size("4.5MB"), 4_500_000);
    assert_eq!(size("0"), 0);
}

#[test]
fn bad_sizes_say_what_to_write() {
    assert_eq!(
        size_err("4Mb"),
        "size '4Mb': 'Mb' is bits; a size is in bytes: write 4MB (10^6 bytes) or 4MiB (2^20 bytes)"
    );
    assert!(size_err("4 mbit").contains("'mbit' is bits"));
    assert!(
        size_err("4 parsecs").starts_with("size '4 parsecs': unknown unit 'parsecs'; use B, KiB")
    );
    assert_eq!(
        size_err("big"),
        "size 'big': does not start with a number; write e.g. 4MiB, 512KiB or 1GB"
    );
    assert_eq!(
        size_err("20000000TiB"),
        "size '20000000TiB': is more than 2^64 - 1 bytes"
    );
    assert!(size_err("-4k").contains("cannot be negative"));
}

#[test]
fn sizes_are_written_in_the_largest_exact_unit() {
    let shown = |b| ByteSize::from_bytes(b).to_string();
    assert_eq!(shown(0), "0B");
    assert_eq!(shown(1234), "1234B");
    assert_eq!(shown(1024), "1KiB");
    assert_eq!(shown(4_194_304), "4MiB");
    assert_eq!(shown(1_572_864), "1536KiB");
    assert_eq!(shown(4_500_000), "4500kB");
    assert_eq!(shown(5_000_000), "5MB");
    assert_eq!(shown(1_073_741_824), "1GiB");
}

#[test]
fn durations() {
    let ms = Duration::from_millis;
    assert_eq!(parse_duration("36ms").unwrap(), ms(36));
    assert_eq!(parse_duration("0.036s").unwrap(), ms(36));
    assert_eq!(parse_duration("0.5s").unwrap(), ms(500));
    assert_eq!(parse_duration(".5s").unwrap(), ms(500));
    assert_eq!(parse_duration("250us").unwrap(), Duration::from_micros(250));
    assert_eq!(parse_duration("250µs").unwrap(), Duration::from_micros(250));
    assert_eq!(parse_duration("7ns").unwrap(), Duration::from_nanos(7));
    assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
    assert_eq!(parse_duration("2min").unwrap(), Duration::from_secs(120));
    assert_eq!(parse_duration("1h30m").unwrap(), Duration::from_secs(5400));
    assert_eq!(parse_duration("1m 30.5s").unwrap(), ms(90_500));
    assert_eq!(parse_duration("1h02m").unwrap(), Duration::from_secs(3720));
    assert_eq!(parse_duration("60S").unwrap(), Duration::from_secs(60));
    assert_eq!(parse_duration("10MS").unwrap(), ms(10));
    assert_eq!(parse_duration("0s").unwrap(), Duration::ZERO);
}

#[test]
fn bad_durations_say_what_to_write() {
    assert_eq!(
        duration_err("36"),
        "duration '36': no unit; write 36ms or 36s"
    );
    assert_eq!(
        duration_err("1m30"),
        "duration '1m30': no unit after 30; write 30ms or 30s"
    );
    assert_eq!(
        duration_err("soon"),
        "duration 'soon': does not start with a number; write e.g. 36ms, 0.5s or 1m30s"
    );
    assert!(duration_err("-3ms").contains("cannot be negative"));
    assert_eq!(
        duration_err("3 days"),
        "duration '3 days': unknown unit 'days'; use ns, us, ms, s, m (minutes) or h"
    );
    assert!(duration_err("99999999999999999999h").contains("longer than 2^64 - 1 seconds"));
    // Control characters never reach the terminal raw.
    assert_eq!(
        duration_err("5\u{1b}[2J"),
        "duration '5\\u{1b}[2J': unknown unit '\\u{1b}['; use ns, us, ms, s, m (minutes) or h"
    );
}

#[test]
fn flags_that_took_seconds_read_a_bare_number_as_seconds() {
    let ms = Duration::from_millis;
    assert_eq!(parse_duration_or_seconds("2").unwrap(), ms(2000));
    assert_eq!(parse_duration_or_seconds("0.5").unwrap(), ms(500));
    assert_eq!(parse_duration_or_seconds(" .25 ").unwrap(), ms(250));
    assert_eq!(parse_duration_or_seconds("500ms").unwrap(), ms(500));
    assert_eq!(parse_duration_or_seconds("2s").unwrap(), ms(2000));
    assert_eq!(parse_duration_or_seconds("1m30s").unwrap(), ms(90_000));
    assert_eq!(
        parse_duration_bare("1.5", BareUnit::Milliseconds).unwrap(),
        Duration::from_micros(1500)
    );
    assert_eq!(
        parse_duration_bare("20", BareUnit::Minutes).unwrap(),
        Duration::from_secs(1200)
    );
    assert_eq!(
        parse_duration_bare("90s", BareUnit::Minutes).unwrap(),
        Duration::from_secs(90)
    );
    let err = |s: &str| parse_duration_or_seconds(s).unwrap_err().to_string();
    assert_eq!(
        err("soon"),
        "duration 'soon': does not start with a number; write e.g. 2 (seconds), 500ms, 2s or 1m30s"
    );
    assert_eq!(
        err(""),
        "duration '': empty; write e.g. 2 (seconds), 500ms, 2s or 1m30s"
    );
    assert_eq!(
        err("2x"),
        "duration '2x': unknown unit 'x'; use ns, us, ms, s, m (minutes) or h"
    );
    // Only a whole value may go without a unit.
    assert_eq!(
        err("1m30"),
        "duration '1m30': no unit after 30; write 30ms or 30s"
    );
    assert!(err("-2").contains("cannot be negative"));
    assert!(err("99999999999999999999").contains("longer than 2^64 - 1 seconds"));
}

#[test]
fn estimates_are_written_to_the_second_in_at_most_two_units() {
    assert_eq!(
        format_duration_rounded(Duration::from_millis(12_600)),
        "13s"
    );
    assert_eq!(format_duration_rounded(Duration::from_secs(245)), "4m05s");
    assert_eq!(format_duration_rounded(Duration::from_secs(3720)), "1h02m");
    // 3 h 59 min 59.6 s rounds up to 4 h; minutes past the hour are dropped, not rounded.
    assert_eq!(
        format_duration_rounded(Duration::from_millis(14_399_600)),
        "4h00m"
    );
    assert_eq!(format_duration_rounded(Duration::from_secs(3719)), "1h01m");
    assert_eq!(parse_duration("4m05s").unwrap(), Duration::from_secs(245));
}

#[test]
fn durations_are_written_in_the_largest_exact_unit() {
    assert_eq!(format_duration(Duration::ZERO), "0s");
    assert_eq!(format_duration(Duration::from_secs(7200)), "2h");
    assert_eq!(format_duration(Duration::from_secs(5400)), "90m");
    assert_eq!(format_duration(Duration::from_secs(61)), "61s");
    assert_eq!(format_duration(Duration::from_millis(36)), "36ms");
    assert_eq!(format_duration(Duration::from_millis(1500)), "1500ms");
    assert_eq!(format_duration(Duration::from_micros(250)), "250us");
    assert_eq!(
        format_duration(Duration::from_nanos(1_000_000_007)),
        "1000000007ns"
    );
}

#[test]
fn errors_are_std_errors_for_clap_and_anyhow() {
    fn is_error<E: std::error::Error + Send + Sync + 'static>(_: &E) {}
    is_error::<UnitError>(&"x".parse::<ByteSize>().unwrap_err());
}

/// `(spelling, bits per unit)`: the rate table of the crate documentation.
const RATE_UNITS: &[(&str, u64)] = &[
    ("", 1),
    ("bit", 1),
    ("bps", 1),
    ("k", 1_000),
    ("kbit", 1_000),
    ("Kbps", 1_000),
    ("M", 1_000_000),
    ("mbit", 1_000_000),
    ("Mb/s", 1_000_000),
    ("G", 1_000_000_000),
    ("Gbit/s", 1_000_000_000),
    ("Kibit", 1_024),
    ("Mibit", 1_048_576),
    ("B/s", 8),
    ("kB/s", 8_000),
    ("MBps", 8_000_000),
    ("GB/s", 8_000_000_000),
    ("KiB/s", 8_192),
    ("MiB/s", 8_388_608),
    ("GiB/s", 8_589_934_592),
];

/// `(spelling, bytes per unit)`: the size table of the crate documentation.
const SIZE_UNITS: &[(&str, u64)] = &[
    ("", 1),
    ("B", 1),
    ("k", 1_024),
    ("K", 1_024),
    ("KiB", 1_024),
    ("M", 1_048_576),
    ("MiB", 1_048_576),
    ("G", 1_073_741_824),
    ("GiB", 1_073_741_824),
    ("kB", 1_000),
    ("KB", 1_000),
    ("MB", 1_000_000),
    ("GB", 1_000_000_000),
];

/// `(spelling, nanoseconds per unit)`.
const DURATION_UNITS: &[(&str, u64)] = &[
    ("ns", 1),
    ("us", 1_000),
    ("µs", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("min", 60_000_000_000),
    ("h", 3_600_000_000_000),
];

proptest! {
    #[test]
    fn rate_display_parses_back(bits in 1u64..) {
        let r = BitRate::from_bits_per_second(bits).unwrap();
        prop_assert_eq!(r.to_string().parse::<BitRate>().unwrap(), r);
    }

    #[test]
    fn size_display_parses_back(bytes in any::<u64>()) {
        let s = ByteSize::from_bytes(bytes);
        prop_assert_eq!(s.to_string().parse::<ByteSize>().unwrap(), s);
    }

    #[test]
    fn duration_format_parses_back(secs in 0u64..=u64::MAX / 2, nanos in 0u32..1_000_000_000) {
        let d = Duration::new(secs, nanos);
        prop_assert_eq!(parse_duration(&format_duration(d)).unwrap(), d);
    }

    #[test]
    fn whole_rates_scale_by_their_unit(n in 1u64..1_000_000, i in 0..RATE_UNITS.len()) {
        let (unit, per) = RATE_UNITS[i];
        prop_assert_eq!(rate(&format!("{n}{unit}")), n * per);
        prop_assert_eq!(rate(&format!("{n} {unit}")), n * per);
    }

    #[test]
    fn whole_sizes_scale_by_their_unit(n in 0u64..1_000_000, i in 0..SIZE_UNITS.len()) {
        let (unit, per) = SIZE_UNITS[i];
        prop_assert_eq!(size(&format!("{n}{unit}")), n * per);
    }

    #[test]
    fn whole_durations_scale_by_their_unit(n in 0u64..1_000_000, i in 0..DURATION_UNITS.len()) {
        let (unit, per) = DURATION_UNITS[i];
        let want = Duration::from_nanos(n * per);
        prop_assert_eq!(parse_duration(&format!("{n}{unit}")).unwrap(), want);
        prop_assert_eq!(parse_duration(&format!("{n}{}", unit.to_uppercase())).unwrap(), want);
    }

    #[test]
    fn tenths_are_exact(n in 0u64..1_000_000, tenth in 0u64..10) {
        // n.t MB is exactly n·10^6 + t·10^5 bytes: no binary floating point on the way.
        prop_assert_eq!(size(&format!("{n}.{tenth}MB")), n * 1_000_000 + tenth * 100_000);
        prop_assert_eq!(
            parse_duration(&format!("{n}.{tenth}s")).unwrap(),
            Duration::from_millis(n * 1000 + tenth * 100)
        );
    }

    #[test]
    fn compound_durations_add_up(h in 0u64..100, m in 0u64..60, s in 0u64..60, ms in 0u64..1000) {
        prop_assert_eq!(
            parse_duration(&format!("{h}h{m}m{s}s{ms}ms")).unwrap(),
            Duration::from_millis(((h * 60 + m) * 60 + s) * 1000 + ms)
        );
    }

    #[test]
    fn bytes_are_eight_bits(n in 1u64..1_000_000, p in prop::sample::select(vec!["", "k", "M", "Ki", "Mi"])) {
        prop_assert_eq!(rate(&format!("{n}{p}B/s")), 8 * rate(&format!("{n}{p}b/s")));
    }

    #[test]
    fn any_text_gives_a_value_or_a_one_line_error(s in "\\PC{0,12}") {
        for e in [
            s.parse::<BitRate>().err(),
            s.parse::<ByteSize>().err(),
            parse_duration(&s).err(),
        ].into_iter().flatten() {
            let msg = e.to_string();
            prop_assert!(!msg.contains('\n'), "{}", msg);
        }
    }
}
