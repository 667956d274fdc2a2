//! Link settings of the emulated path and the named profiles.

use anyhow::{anyhow, bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// What the emulated path looks like.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkConfig {
    /// Bottleneck rate in bits per second, the same in both directions (TBF on each TUN egress).
    pub rate_bps: u64,
    /// Round-trip propagation delay; half of it is added to each direction by the delay line.
    pub rtt_us: u64,
    /// MTU of both TUN devices. A jumbo MTU keeps the packet rate, and so the delay line's CPU
    /// cost, low on 2 vCPUs (research WANs such as CloudLab's commonly run 9000 too).
    pub mtu: u32,
    /// TCP congestion control set in both namespaces (the hosts default to bbr; the paper's
    /// 2019 testbeds most likely ran cubic).
    pub cc: String,
    /// TBF queue limit in bytes (the bottleneck buffer).
    pub queue_bytes: u64,
}

impl LinkConfig {
    /// A link with the given rate and RTT, MTU 9000, cubic, and a bottleneck buffer of one BDP
    /// (at least 1 MiB), the usual router sizing rule.
    pub fn new(rate_bps: u64, rtt: Duration) -> Self {
        let mut c = LinkConfig {
            rate_bps,
            rtt_us: rtt.as_micros() as u64,
            mtu: 9000,
            cc: "cubic".into(),
            queue_bytes: 0,
        };
        c.queue_bytes = c.bdp_bytes().max(1 << 20);
        c
    }

    /// Round-trip time.
    pub fn rtt(&self) -> Duration {
        Duration::from_micros(self.rtt_us)
    }

    /// Delay added to each direction.
    pub fn one_way(&self) -> Duration {
        Duration::from_micros(self.rtt_us / 2)
    }

    /// Bandwidth-delay product in bytes.
    pub fn bdp_bytes(&self) -> u64 {
        (self.rate_bps as u128 * self.rtt_us as u128 / 8 / 1_000_000) as u64
    }

    /// TBF bucket size: 1 ms worth of bytes, at least 4 MTU (TBF needs burst ≥ MTU, and a bucket
    /// of only a few packets makes TBF's timer the bottleneck).
    pub fn burst_bytes(&self) -> u64 {
        (self.rate_bps / 8 / 1000).max(4 * self.mtu as u64)
    }

    /// Checks the settings make a link this host can emulate.
    pub fn validate(&self) -> Result<()> {
        if self.rate_bps < 1_000_000 || self.rate_bps > 100_000_000_000 {
            bail!(
                "rate {} is out of range: use 1mbit … 100gbit (e.g. --rate 1gbit)",
                fmt_rate(self.rate_bps)
            );
        }
        if self.rtt_us > 10_000_000 {
            bail!(
                "RTT {} ms is out of range: use 0 … 10 s (e.g. --rtt 36ms)",
                self.rtt_us / 1000
            );
        }
        if !(1280..=65535).contains(&self.mtu) {
            bail!("MTU {} is out of range: use 1280 … 65535", self.mtu);
        }
        if self.cc.is_empty()
            || !self
                .cc
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_')
        {
            bail!(
                "congestion control {:?} is not a name such as cubic, bbr or reno",
                self.cc
            );
        }
        if self.queue_bytes < 2 * self.mtu as u64 {
            bail!(
                "queue of {} bytes is smaller than two packets: use at least {}",
                self.queue_bytes,
                2 * self.mtu
            );
        }
        Ok(())
    }

    /// One line for humans.
    pub fn describe(&self) -> String {
        format!(
            "rate {}, RTT {:.1} ms ({:.1} ms each way), BDP {:.2} MB, MTU {}, cc {}, queue {:.2} MB",
            fmt_rate(self.rate_bps),
            self.rtt_us as f64 / 1000.0,
            self.rtt_us as f64 / 2000.0,
            self.bdp_bytes() as f64 / 1e6,
            self.mtu,
            self.cc,
            self.queue_bytes as f64 / 1e6
        )
    }
}

/// A named link.
#[derive(Debug, Clone)]
pub struct Profile {
    pub name: &'static str,
    pub rate_bps: u64,
    pub rtt_ms: u64,
    pub about: &'static str,
}

/// Rate of the profiles. The delay line itself holds more on the 2-vCPU development VM (16
/// streams reached 2 Gbit/s with other builds running; see docs/testbed.md and
/// `scripts/testbed-validate.sh`), but the transfer tools, nginx and the delay line share those
/// two cores, so the profiles keep the paper's 1 Gbit/s, which leaves them headroom.
pub const MAX_RATE_BPS: u64 = 1_000_000_000;

/// The paper's CloudLab (1 Gbps, 36 ms) and DIDCLab (1 Gbps, 44 ms) testbeds. Their 1 Gbps holds
/// on 2 vCPUs, so only the 10 Gbps Chameleon testbed is out of reach (it is offered scaled to
/// the same 1 Gbps, keeping its 32 ms RTT).
pub const PROFILES: &[Profile] = &[
    Profile {
        name: "cloudlab",
        rate_bps: MAX_RATE_BPS,
        rtt_ms: 36,
        about: "CloudLab-like: 1 Gbps, 36 ms RTT (BDP 4.5 MB), as in the paper",
    },
    Profile {
        name: "didclab",
        rate_bps: MAX_RATE_BPS,
        rtt_ms: 44,
        about: "DIDCLab-like: 1 Gbps, 44 ms RTT (BDP 5.5 MB), as in the paper",
    },
    Profile {
        name: "chameleon-scaled",
        rate_bps: MAX_RATE_BPS,
        rtt_ms: 32,
        about: "Chameleon-like RTT 32 ms, rate scaled from 10 Gbps to 1 Gbps (2 vCPUs)",
    },
];

/// Looks up a profile by name.
pub fn profile(name: &str) -> Result<LinkConfig> {
    let p = PROFILES.iter().find(|p| p.name == name).with_context(|| {
        let names: Vec<_> = PROFILES.iter().map(|p| p.name).collect();
        format!("unknown profile {name:?}: use one of {}", names.join(", "))
    })?;
    Ok(LinkConfig::new(p.rate_bps, Duration::from_millis(p.rtt_ms)))
}

/// Parses a rate such as `1gbit`, `500mbit`, `800M`, `1.5G` (bits per second, SI prefixes, as tc
/// writes them) or `1000000` (plain bits per second).
pub fn parse_rate(s: &str) -> Result<u64> {
    let t = s.trim().to_ascii_lowercase();
    let t = t
        .strip_suffix("bps")
        .or_else(|| t.strip_suffix("bit"))
        .unwrap_or(&t);
    let (num, mult) = match t.chars().last() {
        Some('k') => (&t[..t.len() - 1], 1e3),
        Some('m') => (&t[..t.len() - 1], 1e6),
        Some('g') => (&t[..t.len() - 1], 1e9),
        _ => (t, 1.0),
    };
    let v: f64 = num
        .parse()
        .ok()
        .filter(|v: &f64| v.is_finite() && *v > 0.0)
        .with_context(|| format!("rate {s:?} is not a rate: write e.g. 1gbit, 500mbit or 800M"))?;
    Ok((v * mult).round() as u64)
}

/// Parses a duration such as `36ms`, `0.5s`, `250us` or `36` (milliseconds).
///
/// The grammar is `wattio_transfer::units::parse_duration`'s; only the error message is the
/// testbed's own.
pub fn parse_duration(s: &str) -> Result<Duration> {
    wattio_transfer::units::parse_duration(s)
        .map_err(|_| anyhow!("duration {s:?} is not a duration: write e.g. 36ms or 0.5s"))
}

/// Formats bits per second the way tc reads it back (`1gbit`, `500mbit`).
pub fn fmt_rate(bps: u64) -> String {
    if bps % 1_000_000_000 == 0 {
        format!("{}gbit", bps / 1_000_000_000)
    } else if bps % 1_000_000 == 0 {
        format!("{}mbit", bps / 1_000_000)
    } else if bps % 1000 == 0 {
        format!("{}kbit", bps / 1000)
    } else {
        format!("{bps}bit")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_parse_like_tc() {
        assert_eq!(parse_rate("1gbit").unwrap(), 1_000_000_000);
        assert_eq!(parse_rate("500mbit").unwrap(), 500_000_000);
        assert_eq!(parse_rate("800M").unwrap(), 800_000_000);
        assert_eq!(parse_rate("1.5G").unwrap(), 1_500_000_000);
        assert_eq!(parse_rate("64kbit").unwrap(), 64_000);
        assert_eq!(parse_rate("2000000").unwrap(), 2_000_000);
        assert!(parse_rate("fast").is_err());
        assert!(parse_rate("-1g").is_err());
        assert!(parse_rate("").is_err());
    }

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("36ms").unwrap(), Duration::from_millis(36));
        assert_eq!(parse_duration("0.5s").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("250us").unwrap(), Duration::from_micros(250));
        assert_eq!(parse_duration("44").unwrap(), Duration::from_millis(44));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("-3ms").is_err());
    }

    #[test]
    fn bdp_matches_the_papers_table() {
        // Table I: CloudLab 1 Gbps × 36 ms = 4.5 MB, DIDCLab 1 Gbps × 44 ms = 5.5 MB.
        assert_eq!(profile("cloudlab").unwrap().bdp_bytes(), 4_500_000);
        assert_eq!(profile("didclab").unwrap().bdp_bytes(), 5_500_000);
        assert!(profile("nowhere")
            .unwrap_err()
            .to_string()
            .contains("cloudlab"));
    }

    #[test]
    fn validation_names_the_bad_setting() {
        let mut c = LinkConfig::new(1_000_000_000, Duration::from_millis(36));
        c.validate().unwrap();
        c.mtu = 100;
        assert!(c.validate().unwrap_err().to_string().contains("MTU"));
        let mut c = LinkConfig::new(10, Duration::from_millis(36));
        assert!(c.validate().unwrap_err().to_string().contains("rate"));
        c.rate_bps = 1_000_000_000;
        c.cc = "cubic; rm".into();
        assert!(c.validate().unwrap_err().to_string().contains("congestion"));
    }

    #[test]
    fn fmt_rate_round_trips() {
        for r in [1_000_000_000u64, 250_000_000, 64_000, 1_234_567] {
            assert_eq!(parse_rate(&fmt_rate(r)).unwrap(), r);
        }
    }
}
