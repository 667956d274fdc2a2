//! Link settings of the emulated path and the named profiles.

use crate::TestbedError;
use serde::{Deserialize, Serialize};
use std::time::Duration;
use wattio_units::BitRate;

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
    pub fn validate(&self) -> Result<(), TestbedError> {
        if self.rate_bps < 1_000_000 || self.rate_bps > 100_000_000_000 {
            return Err(TestbedError::RateOutOfRange(fmt_rate(self.rate_bps)));
        }
        if self.rtt_us > 10_000_000 {
            return Err(TestbedError::RttOutOfRange {
                rtt_ms: self.rtt_us / 1000,
            });
        }
        if !(1280..=65535).contains(&self.mtu) {
            return Err(TestbedError::MtuOutOfRange(self.mtu));
        }
        if self.cc.is_empty()
            || !self
                .cc
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_')
        {
            return Err(TestbedError::BadCongestionControl(self.cc.clone()));
        }
        if self.queue_bytes < 2 * self.mtu as u64 {
            return Err(TestbedError::QueueTooSmall {
                queue_bytes: self.queue_bytes,
                min_bytes: 2 * self.mtu as u64,
            });
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
pub struct LinkProfile {
    pub name: &'static str,
    pub rate_bps: u64,
    pub rtt_ms: u64,
    pub about: &'static str,
}

/// Rate of the profiles. The delay line itself holds more on the 2-vCPU development VM (16
/// streams reached 2 Gbit/s with other builds running; see docs/testbed.md and
/// `scripts/testbed-validate.sh`), but the transfer tools, nginx and the delay line share those
/// two cores, so the profiles keep the paper's 1 Gbit/s, which leaves them headroom.
pub(crate) const MAX_RATE_BPS: u64 = 1_000_000_000;

/// The paper's CloudLab (1 Gbps, 36 ms) and DIDCLab (1 Gbps, 44 ms) testbeds. Their 1 Gbps holds
/// on 2 vCPUs, so only the 10 Gbps Chameleon testbed is out of reach (it is offered scaled to
/// the same 1 Gbps, keeping its 32 ms RTT).
pub const LINK_PROFILES: &[LinkProfile] = &[
    LinkProfile {
        name: "cloudlab",
        rate_bps: MAX_RATE_BPS,
        rtt_ms: 36,
        about: "CloudLab-like: 1 Gbps, 36 ms RTT (BDP 4.5 MB), as in the paper",
    },
    LinkProfile {
        name: "didclab",
        rate_bps: MAX_RATE_BPS,
        rtt_ms: 44,
        about: "DIDCLab-like: 1 Gbps, 44 ms RTT (BDP 5.5 MB), as in the paper",
    },
    LinkProfile {
        name: "chameleon-scaled",
        rate_bps: MAX_RATE_BPS,
        rtt_ms: 32,
        about: "Chameleon-like RTT 32 ms, rate scaled from 10 Gbps to 1 Gbps (2 vCPUs)",
    },
];

/// Looks up a profile by name.
pub fn link_profile(name: &str) -> Result<LinkConfig, TestbedError> {
    let p = LINK_PROFILES
        .iter()
        .find(|p| p.name == name)
        .ok_or_else(|| {
            let names: Vec<_> = LINK_PROFILES.iter().map(|p| p.name).collect();
            TestbedError::UnknownProfile {
                name: name.to_string(),
                choices: names.join(", "),
            }
        })?;
    Ok(LinkConfig::new(p.rate_bps, Duration::from_millis(p.rtt_ms)))
}

/// Bits per second as tc reads them back (`1gbit`, `500mbit`; `0bit` for none), in
/// `wattio_units`' grammar.
pub(crate) fn fmt_rate(bps: u64) -> String {
    BitRate::from_bits_per_second(bps).map_or_else(|| "0bit".to_string(), |r| r.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bdp_matches_the_papers_table() {
        // Table I: CloudLab 1 Gbps × 36 ms = 4.5 MB, DIDCLab 1 Gbps × 44 ms = 5.5 MB.
        assert_eq!(link_profile("cloudlab").unwrap().bdp_bytes(), 4_500_000);
        assert_eq!(link_profile("didclab").unwrap().bdp_bytes(), 5_500_000);
        assert!(link_profile("nowhere")
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
    fn rates_are_written_for_tc() {
        assert_eq!(fmt_rate(1_000_000_000), "1gbit");
        assert_eq!(fmt_rate(250_000_000), "250mbit");
        assert_eq!(fmt_rate(1_234_567), "1234567bit");
        assert_eq!(fmt_rate(0), "0bit");
    }
}
