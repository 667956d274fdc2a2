//! `dcmi`: the two BMC answers the `ipmi` mechanism reads in-band, decoded from their bytes.
//!
//! - DCMI Get Power Reading (DCMI 1.5 §6.6.1; NetFn Group Extension 0x2C, command 0x02, request
//!   `DC 01 00 00`: group DCMI, mode 1 "system power statistics"). The answer: completion code,
//!   group id 0xDC, current, minimum, maximum and average power (two bytes each, least
//!   significant first, whole watts), the BMC's IPMI timestamp (four bytes, seconds), the
//!   statistics reporting time period (four bytes, milliseconds) and the power reading state
//!   (bit 6: active): 19 bytes with the completion code.
//! - IPMI Get Device ID (IPMI 2.0 §20.1; NetFn App 0x06, command 0x01, no request data): which
//!   BMC answers, for `probe`'s note. At least 12 bytes with the completion code.
//!
//! Every field is read with a bounds check: a short answer, a completion code other than 0 or
//! an answer of another group is refused with what it was, never read past its end.

use std::fmt;
use std::time::Duration;

/// NetFn Group Extension (IPMI 2.0 table 5-1): DCMI's commands are addressed through it.
pub(crate) const NETFN_GROUP_EXTENSION: u8 = 0x2C;
/// DCMI Get Power Reading.
pub(crate) const CMD_GET_POWER_READING: u8 = 0x02;
/// DCMI's group extension id, the first byte of every DCMI request and answer.
pub(crate) const DCMI_GROUP_ID: u8 = 0xDC;
/// Get Power Reading's request: group DCMI, mode 1 (system power statistics), two reserved bytes.
pub(crate) const POWER_READING_REQUEST: [u8; 4] = [DCMI_GROUP_ID, 0x01, 0x00, 0x00];
/// NetFn Application.
pub(crate) const NETFN_APP: u8 = 0x06;
/// IPMI Get Device ID.
pub(crate) const CMD_GET_DEVICE_ID: u8 = 0x01;

/// Get Power Reading's answer length, completion code included (DCMI 1.5 table 6-16).
const POWER_READING_LEN: usize = 19;
/// Get Device ID's answer length without the optional auxiliary firmware revision.
const DEVICE_ID_LEN: usize = 12;
/// Power reading state: bit 6 set while power measurement is active.
const READING_ACTIVE: u8 = 1 << 6;

/// What one DCMI power reading says.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DcmiReading {
    pub instantaneous_w: f64,
    pub average_w: f64,
    /// The period the average covers (`None` when the BMC gives none).
    pub sampling_period: Option<Duration>,
}

/// Why an answer gives no power reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DcmiRefusal {
    /// The BMC answered with this completion code instead of a reading.
    Completion(u8),
    /// The answer succeeded but is not DCMI's: its group id (`None`: it has none).
    NotDcmi(Option<u8>),
    /// A DCMI answer shorter than a power reading: its length, completion code included.
    Short(usize),
    /// The BMC says its power measurement is not active.
    Deactivated,
}

impl fmt::Display for DcmiRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            DcmiRefusal::Completion(cc) => write!(
                f,
                "no DCMI power reading on this BMC (completion code 0x{cc:02X}: {})",
                completion_meaning(cc)
            ),
            DcmiRefusal::NotDcmi(Some(g)) => write!(
                f,
                "no DCMI power reading on this BMC (its answer is of group 0x{g:02X}, not DCMI's 0x{DCMI_GROUP_ID:02X})"
            ),
            DcmiRefusal::NotDcmi(None) => f.write_str(
                "no DCMI power reading on this BMC (it answered with a completion code alone)",
            ),
            DcmiRefusal::Short(n) => write!(
                f,
                "no DCMI power reading on this BMC (its answer has {n} bytes, a power reading {POWER_READING_LEN})"
            ),
            DcmiRefusal::Deactivated => f.write_str(
                "the BMC's DCMI power reading is deactivated (power reading state bit 6 is clear)",
            ),
        }
    }
}

impl DcmiRefusal {
    /// What to do about it, for the error's fix.
    pub(crate) fn fix(&self) -> &'static str {
        match *self {
            // Node busy, timeout, BMC initialising: the same request may succeed later.
            DcmiRefusal::Completion(0xC0 | 0xC3 | 0xD2) => {
                "the BMC is busy or starting: ask again later (wattio probe)"
            }
            DcmiRefusal::Completion(0xD4) => {
                "the BMC refuses this user: run as root on the machine itself (the kernel's system interface)"
            }
            DcmiRefusal::Deactivated => {
                "some BMCs need power measurement activated in their settings (ipmitool dcmi power activate)"
            }
            _ => "a BMC without DCMI power management cannot report the machine's power this way",
        }
    }
}

/// A completion code's meaning (IPMI 2.0 table 5-2), lower case for a message.
pub(crate) fn completion_meaning(cc: u8) -> &'static str {
    match cc {
        0x00 => "normal",
        0xC0 => "node busy",
        0xC1 => "invalid command",
        0xC2 => "command invalid for the given LUN",
        0xC3 => "timeout while processing the command",
        0xC4 => "out of space",
        0xC5 => "reservation cancelled or invalid",
        0xC6 => "request data truncated",
        0xC7 => "request data length invalid",
        0xC8 => "request data field length limit exceeded",
        0xC9 => "parameter out of range",
        0xCA => "cannot return the number of requested data bytes",
        0xCB => "requested sensor, data or record not present",
        0xCC => "invalid data field in request",
        0xCD => "command illegal for the specified sensor or record type",
        0xCE => "command response could not be provided",
        0xCF => "cannot execute a duplicated request",
        0xD0 => "SDR repository in update mode",
        0xD1 => "device in firmware update mode",
        0xD2 => "BMC initialisation in progress",
        0xD3 => "destination unavailable",
        0xD4 => "insufficient privilege level",
        0xD5 => "command not supported in the present state",
        0xD6 => "command sub-function disabled or unavailable",
        0xFF => "unspecified error",
        0x01..=0x7E => "device-specific (OEM) code",
        0x80..=0xBE => "command-specific code",
        _ => "reserved code",
    }
}

/// A little-endian field of `bytes` at `at`, `N` bytes long (bounds checked by the caller's
/// length check; `None` past the end all the same).
fn le<const N: usize>(bytes: &[u8], at: usize) -> Option<u32> {
    let field = bytes.get(at..at + N)?;
    Some(
        field
            .iter()
            .rev()
            .fold(0u32, |v, &b| (v << 8) | u32::from(b)),
    )
}

/// Decodes Get Power Reading's answer, completion code first, as the kernel hands it over.
pub(crate) fn decode_power_reading(answer: &[u8]) -> Result<DcmiReading, DcmiRefusal> {
    match answer.first() {
        None => return Err(DcmiRefusal::Short(0)),
        Some(&0) => {}
        Some(&cc) => return Err(DcmiRefusal::Completion(cc)),
    }
    match answer.get(1) {
        Some(&DCMI_GROUP_ID) => {}
        other => return Err(DcmiRefusal::NotDcmi(other.copied())),
    }
    if answer.len() < POWER_READING_LEN {
        return Err(DcmiRefusal::Short(answer.len()));
    }
    let watts = |at| le::<2>(answer, at).map(f64::from).unwrap_or(0.0);
    if answer[18] & READING_ACTIVE == 0 {
        return Err(DcmiRefusal::Deactivated);
    }
    let period_ms = le::<4>(answer, 14).unwrap_or(0);
    Ok(DcmiReading {
        instantaneous_w: watts(2),
        average_w: watts(8),
        sampling_period: (period_ms != 0).then(|| Duration::from_millis(u64::from(period_ms))),
    })
}

/// Who the BMC is, from Get Device ID.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BmcIdentity {
    pub device_id: u8,
    pub device_revision: u8,
    /// Major revision, binary.
    pub firmware_major: u8,
    /// Minor revision, two BCD digits.
    pub firmware_minor_bcd: u8,
    /// BCD: bits 3:0 the major digit, bits 7:4 the minor one (0x02 is 2.0, 0x51 is 1.5).
    pub ipmi_version: u8,
    /// The IANA private enterprise number of the maker (20 bits).
    pub manufacturer_id: u32,
    pub product_id: u16,
}

impl fmt::Display for BmcIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "IPMI {}.{}, manufacturer id {} (IANA enterprise number), product id 0x{:04X}, device id 0x{:02X} revision {}, firmware {}.{:02X}",
            self.ipmi_version & 0x0F,
            self.ipmi_version >> 4,
            self.manufacturer_id,
            self.product_id,
            self.device_id,
            self.device_revision,
            self.firmware_major,
            self.firmware_minor_bcd,
        )
    }
}

/// Decodes Get Device ID's answer, completion code first.
pub(crate) fn decode_device_id(answer: &[u8]) -> Result<BmcIdentity, String> {
    match answer.first() {
        None => return Err("an empty answer".into()),
        Some(&0) => {}
        Some(&cc) => {
            return Err(format!(
                "completion code 0x{cc:02X}: {}",
                completion_meaning(cc)
            ))
        }
    }
    if answer.len() < DEVICE_ID_LEN {
        return Err(format!(
            "an answer of {} bytes, Get Device ID's has at least {DEVICE_ID_LEN}",
            answer.len()
        ));
    }
    Ok(BmcIdentity {
        device_id: answer[1],
        device_revision: answer[2] & 0x0F,
        firmware_major: answer[3] & 0x7F,
        firmware_minor_bcd: answer[4],
        ipmi_version: answer[5],
        manufacturer_id: le::<3>(answer, 7).unwrap_or(0) & 0x000F_FFFF,
        product_id: le::<2>(answer, 10).unwrap_or(0) as u16,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A BMC at 212 W now (min 28, max 294), 184 W on average over 1000 ms, at IPMI time
    /// 0x6000_0000, reading active: written from DCMI 1.5 table 6-16.
    const GOOD: [u8; 19] = [
        0x00, 0xDC, // completion code, group DCMI
        0xD4, 0x00, // current 212 W
        0x1C, 0x00, // minimum 28 W
        0x26, 0x01, // maximum 294 W
        0xB8, 0x00, // average 184 W
        0x00, 0x00, 0x00, 0x60, // IPMI timestamp
        0xE8, 0x03, 0x00, 0x00, // statistics reporting period 1000 ms
        0x40, // power reading state: active
    ];

    #[test]
    fn decodes_a_power_reading_written_from_the_spec() {
        let r = decode_power_reading(&GOOD).unwrap();
        assert_eq!(r.instantaneous_w, 212.0);
        assert_eq!(r.average_w, 184.0);
        assert_eq!(r.sampling_period, Some(Duration::from_secs(1)));
        // Watts above 255 and periods above 65 s use their high bytes.
        let mut big = GOOD;
        big[8..10].copy_from_slice(&1234u16.to_le_bytes());
        big[14..18].copy_from_slice(&86_400_000u32.to_le_bytes());
        let r = decode_power_reading(&big).unwrap();
        assert_eq!(r.average_w, 1234.0);
        assert_eq!(r.sampling_period, Some(Duration::from_secs(86_400)));
        // A period of 0 is none given; longer answers (OEM bytes after the state) still read.
        big[14..18].fill(0);
        let mut longer = big.to_vec();
        longer.push(0xAA);
        assert_eq!(decode_power_reading(&longer).unwrap().sampling_period, None);
    }

    #[test]
    fn a_deactivated_reading_is_refused() {
        let mut off = GOOD;
        off[18] = 0x00;
        let e = decode_power_reading(&off).unwrap_err();
        assert_eq!(e, DcmiRefusal::Deactivated);
        assert!(e.to_string().contains("deactivated"), "{e}");
        // Other state bits do not make it active.
        off[18] = 0xBF;
        assert_eq!(decode_power_reading(&off), Err(DcmiRefusal::Deactivated));
    }

    #[test]
    fn short_answers_are_refused_without_reading_past_their_end() {
        for n in 0..GOOD.len() {
            let e = decode_power_reading(&GOOD[..n]).unwrap_err();
            match n {
                0 => assert_eq!(e, DcmiRefusal::Short(0)),
                1 => assert_eq!(e, DcmiRefusal::NotDcmi(None)),
                _ => assert_eq!(e, DcmiRefusal::Short(n)),
            }
            assert!(
                e.to_string()
                    .starts_with("no DCMI power reading on this BMC ("),
                "{e}"
            );
        }
    }

    #[test]
    fn completion_codes_and_other_groups_say_what_the_bmc_answered() {
        for (cc, meaning) in [
            (0xC1, "invalid command"),
            (0xCC, "invalid data field in request"),
            (0xD4, "insufficient privilege level"),
            (0x81, "command-specific code"),
        ] {
            let e = decode_power_reading(&[cc]).unwrap_err();
            assert_eq!(e, DcmiRefusal::Completion(cc));
            assert_eq!(
                e.to_string(),
                format!(
                    "no DCMI power reading on this BMC (completion code 0x{cc:02X}: {meaning})"
                )
            );
            // A completion code wins over whatever follows it.
            let mut with_data = GOOD;
            with_data[0] = cc;
            assert_eq!(decode_power_reading(&with_data), Err(e));
        }
        assert!(DcmiRefusal::Completion(0xD4).fix().contains("root"));
        assert!(DcmiRefusal::Completion(0xC1).fix().contains("without DCMI"));
        let mut other = GOOD;
        other[1] = 0xDD;
        let e = decode_power_reading(&other).unwrap_err();
        assert_eq!(
            e.to_string(),
            "no DCMI power reading on this BMC (its answer is of group 0xDD, not DCMI's 0xDC)"
        );
    }

    /// QEMU's `ipmi-bmc-sim,mfg_id=47488,product_id=22337,fwrev1=3,fwrev2=20`, as its
    /// `get_device_id` builds the answer (IPMI 2.0 table 20-2).
    const DEVICE_ID: [u8; 12] = [
        0x00, 0x20, 0x00, 0x03, 0x14, 0x02, 0x07, 0x80, 0xB9, 0x00, 0x41, 0x57,
    ];

    #[test]
    fn decodes_get_device_id() {
        let id = decode_device_id(&DEVICE_ID).unwrap();
        assert_eq!(id.manufacturer_id, 47488);
        assert_eq!(id.product_id, 0x5741);
        assert_eq!(
            id.to_string(),
            "IPMI 2.0, manufacturer id 47488 (IANA enterprise number), product id 0x5741, device id 0x20 revision 0, firmware 3.14"
        );
        let mut v15 = DEVICE_ID.to_vec();
        v15[5] = 0x51;
        // The optional auxiliary firmware revision after it is ignored.
        v15.extend([1, 2, 3, 4]);
        assert!(decode_device_id(&v15)
            .unwrap()
            .to_string()
            .starts_with("IPMI 1.5,"));
        assert!(decode_device_id(&DEVICE_ID[..11])
            .unwrap_err()
            .contains("11 bytes"));
        assert_eq!(
            decode_device_id(&[0xC1]).unwrap_err(),
            "completion code 0xC1: invalid command"
        );
        assert!(decode_device_id(&[]).is_err());
    }
}
