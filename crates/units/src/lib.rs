//! # wattio-units
//!
//! The one grammar of rates, byte sizes and durations in wattio. Every command-line flag,
//! profile and configuration value that carries one of these quantities is read by this crate
//! (clap takes [`BitRate`] and [`ByteSize`] through `FromStr` and durations through
//! [`parse_duration`]) and written back by its `Display`/[`format_duration`], so what wattio
//! prints can be pasted back into any flag.
//!
//! ## Numbers
//!
//! A quantity is a decimal number followed by a unit, optionally separated by spaces:
//! `800mbit`, `1.5 GiB`, `0.036s`, `.5s`. No sign, no exponent, at most 38 digits. Arithmetic
//! is exact (decimal, not binary floating point): the result is rounded once, half up, to
//! the type's resolution (1 bit/s, 1 byte, 1 ns), so `1.1MB` is exactly 1 100 000 bytes.
//!
//! ## Prefixes
//!
//! `k`, `M`, `G`, `T` are the SI prefixes (10³, 10⁶, 10⁹, 10¹²) and `Ki`, `Mi`, `Gi`, `Ti` the
//! IEC ones (2¹⁰ … 2⁴⁰, IEC 80000-13). Prefix letters are case-insensitive (`800m` and
//! `800M` are the same rate; a rate has no milli).
//!
//! ## Bits and bytes
//!
//! The one case that matters is the unit's `b`: lowercase `b` (and `bit`) is **bits**,
//! uppercase `B` is **bytes** — `Mbps` is megabits per second, `MBps` and `MB/s` megabytes per
//! second.
//!
//! ## Rates ([`BitRate`], bits per second)
//!
//! | written | means | as in |
//! |---|---|---|
//! | `800000`, `800M`, `1.5g` | bits/s (a bare number or prefix is bits) | iperf3 `-b`, tc |
//! | `800mbit`, `1gbit`, `64kbit`, `800Mbit/s`, `800Mbps`, `800Mb/s` | bits/s, SI | tc, networking |
//! | `1mibit`, `1Mibps` | bits/s, IEC | tc |
//! | `100MB/s`, `100MBps`, `100MB`, `5MiB/s`, `512KiB/s` | bytes/s (× 8) | |
//!
//! A rate is more than 0. wattio differs from tc(8) in one spelling: tc reads `bps` and `kbps`
//! as *bytes* per second, wattio as bits (the usual meaning of Mbps); `Bps` is bytes in both.
//! `Display` writes tc's own form (`1gbit`, `500mbit`, `1234bit`), which tc and wattio both
//! read back unchanged.
//!
//! ## Sizes ([`ByteSize`], bytes)
//!
//! | written | means |
//! |---|---|
//! | `4096`, `4096B` | bytes |
//! | `4KiB`, `4MiB`, `1GiB` | IEC: 2¹⁰, 2²⁰, 2³⁰ bytes |
//! | `4k`, `4M`, `1G` (a bare prefix) | IEC as well, as GNU coreutils, dd, fio and curl read them |
//! | `4kB`, `4KB`, `4MB`, `1GB` | SI: 10³, 10⁶, 10⁹ bytes (GNU coreutils' reading of `KB`) |
//!
//! A size in bits (`4Mb`, `4Mbit`) is refused with the byte spellings to use instead.
//! `Display` writes the largest IEC unit that holds the value exactly (`4MiB`), else the
//! largest SI one (`4500kB`), else bytes (`1234B`).
//!
//! ## Durations ([`parse_duration`], [`format_duration`])
//!
//! One or more terms `number unit`, summed: `36ms`, `0.5s`, `250us`, `2m`, `1h30m`, `1m 30.5s`.
//! Units (case-insensitive): `ns`, `us` (or `µs`), `ms`, `s`, `m` or `min`, `h`. A number without
//! a unit is refused: tools disagree on what `36` means (tc: µs, ping: s, perf: ms), so wattio
//! asks. Flags that took a plain number of seconds before they took durations read it with
//! [`parse_duration_or_seconds`] (a bare `2` is two seconds, so old scripts keep their
//! meaning; [`parse_duration_bare`] for another unit). [`format_duration`] writes the largest
//! unit that holds the value exactly (`1500ms`, `90m`, `36ms`); [`format_duration_rounded`]
//! writes estimates and progress to the second (`4m05s`).
//!
//! ## Errors
//!
//! Every error is one line naming the quantity, the input and the fix, e.g.
//! `duration '36': no unit; write 36ms or 36s`.
//!
//! ```
//! use wattio_units::{parse_duration, BitRate, ByteSize};
//! use std::time::Duration;
//! let link: BitRate = "800M".parse().unwrap();
//! assert_eq!(link.bits_per_second(), 800_000_000);
//! assert_eq!("100MB/s".parse::<BitRate>().unwrap(), link);
//! assert_eq!(link.to_string(), "800mbit");
//! assert_eq!("4MiB".parse::<ByteSize>().unwrap().bytes(), 4 << 20);
//! assert_eq!(parse_duration("1m30s").unwrap(), Duration::from_secs(90));
//! assert!(parse_duration("36").unwrap_err().to_string().contains("write 36ms or 36s"));
//! ```

mod duration;
mod error;
mod number;
mod rate;
mod size;

pub use duration::{
    format_duration, format_duration_rounded, parse_duration, parse_duration_bare,
    parse_duration_or_seconds, BareUnit,
};
pub use error::{Quantity, UnitError};
pub use rate::BitRate;
pub use size::ByteSize;
