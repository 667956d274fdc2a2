//! Decoding of the NVMe data structures wattio reads: the Identify Controller data structure
//! with its power-state descriptors, and the Autonomous Power State Transition table.
//!
//! Layouts from the NVM Express Base Specification 2.0: §5.17.2.1 "Identify Controller data
//! structure (CNS 01h)" (NPSS at byte 263, the model number at bytes 24..63, the power-state
//! descriptors from byte 2048, 32 bytes each) and its "Power State Descriptor Data Structure"
//! figure; the Set Features feature descriptions "Power Management (Feature Identifier 02h)"
//! and "Autonomous Power State Transition (Feature Identifier 0Ch)".

use serde::{Deserialize, Serialize};

use crate::figures::{FiguresSource, PowerFigures, PowerState};

/// Size of the Identify Controller data structure.
pub const IDENTIFY_LEN: usize = 4096;
/// Offset of NPSS, the zero-based number of power states supported.
const NPSS_AT: usize = 263;
/// APSTA: Autonomous Power State Transition Attributes, bit 0 = supported.
const APSTA_AT: usize = 265;
/// Offset of the first power-state descriptor (PSD0).
const PSD_AT: usize = 2048;
/// Size of one power-state descriptor.
const PSD_LEN: usize = 32;
/// The model number field (MN), ASCII padded with spaces.
const MODEL_AT: std::ops::Range<usize> = 24..64;
/// The most power states a controller can describe (PSD0…PSD31).
pub const MAX_STATES: usize = 32;
/// Size of the APST data structure: 32 entries of 8 bytes.
pub const APST_LEN: usize = 256;

/// What the Identify Controller data says of the drive: its model and power states.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NvmeIdentify {
    /// The model number (MN), trimmed.
    pub model: String,
    /// The power states, PS0 first (index = state number), from the drive's descriptors.
    pub figures: PowerFigures,
    /// Whether the controller supports autonomous power state transitions (APSTA, byte 265
    /// bit 0): without it, Get Features 0Ch is not asked (the kernel checks the same bit,
    /// drivers/nvme/host/core.c `nvme_configure_apst`).
    pub apst_supported: bool,
}

/// One APST transition: after `idle_ms` idle in state `from`, the drive goes to `to`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApstEntry {
    /// The state the entry is for (its index in the table).
    pub from: u8,
    /// ITPS: the idle transition power state.
    pub to: u8,
    /// ITPT: the idle time before the transition, ms.
    pub idle_ms: u32,
}

/// The Autonomous Power State Transition setting of a controller.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApstTable {
    /// APSTE: whether the drive makes the transitions.
    pub enabled: bool,
    /// The table's entries with a non-zero idle time, by state.
    pub entries: Vec<ApstEntry>,
}

impl ApstTable {
    /// `ps0→ps3 after 100 ms, ps3→ps4 after 2000 ms`, or `no transitions`.
    pub fn summary(&self) -> String {
        if self.entries.is_empty() {
            return "no transitions".into();
        }
        let parts: Vec<String> = self
            .entries
            .iter()
            .map(|e| format!("ps{}→ps{} after {} ms", e.from, e.to, e.idle_ms))
            .collect();
        parts.join(", ")
    }
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// A 2-bit power scale (IPS, APS): `None` where the field is not reported (00b) or reserved
/// (11b).
fn scaled(value: u16, scale_bits: u8) -> Option<f64> {
    match scale_bits & 0b11 {
        0b01 => Some(f64::from(value) * 0.0001),
        0b10 => Some(f64::from(value) * 0.01),
        _ => None,
    }
}

/// One 32-byte power-state descriptor as state `id`.
pub fn decode_descriptor(id: u8, psd: &[u8; PSD_LEN]) -> PowerState {
    let flags = psd[3];
    // MP is in 0.01 W, or in 0.0001 W when MXPS (byte 3 bit 0) is set.
    let unit = if flags & 0x01 != 0 { 0.0001 } else { 0.01 };
    PowerState {
        id,
        name: format!("ps{id}"),
        max_w: f64::from(u16_at(psd, 0)) * unit,
        idle_w: scaled(u16_at(psd, 16), psd[18] >> 6),
        active_w: scaled(u16_at(psd, 20), psd[22] >> 6),
        non_operational: flags & 0x02 != 0,
        entry_latency_us: u64::from(u32_at(psd, 4)),
        exit_latency_us: u64::from(u32_at(psd, 8)),
    }
}

/// Decodes the Identify Controller data structure of `device`; a short buffer or an NPSS past
/// PSD31 is an error (one line naming the field).
pub fn decode_identify(data: &[u8]) -> Result<NvmeIdentify, String> {
    if data.len() < IDENTIFY_LEN {
        return Err(format!(
            "Identify Controller data is {} bytes, not {IDENTIFY_LEN}: not an NVMe controller's answer (or a truncated stand-in)",
            data.len()
        ));
    }
    let count = usize::from(data[NPSS_AT]) + 1;
    if count > MAX_STATES {
        return Err(format!(
            "Identify Controller NPSS (byte {NPSS_AT}) says {count} power states; at most {MAX_STATES} exist"
        ));
    }
    let mut states = Vec::with_capacity(count);
    for i in 0..count {
        let at = PSD_AT + i * PSD_LEN;
        let mut psd = [0u8; PSD_LEN];
        psd.copy_from_slice(&data[at..at + PSD_LEN]);
        states.push(decode_descriptor(i as u8, &psd));
    }
    let model = String::from_utf8_lossy(&data[MODEL_AT]).trim().to_string();
    Ok(NvmeIdentify {
        apst_supported: data[APSTA_AT] & 1 == 1,
        model,
        figures: PowerFigures {
            states,
            source: FiguresSource::NvmeDescriptors,
        },
    })
}

/// Decodes the APST feature: `dword0` the Get Features result (bit 0 APSTE), `table` its
/// 256-byte data (entry i: bits 7:3 ITPS, bits 31:8 ITPT in ms).
pub fn decode_apst(dword0: u32, table: &[u8]) -> ApstTable {
    let entries = table
        .chunks_exact(8)
        .take(MAX_STATES)
        .enumerate()
        .filter_map(|(i, e)| {
            let v = u32::from_le_bytes([e[0], e[1], e[2], e[3]]);
            let idle_ms = v >> 8;
            (idle_ms != 0).then_some(ApstEntry {
                from: i as u8,
                to: ((v >> 3) & 0x1f) as u8,
                idle_ms,
            })
        })
        .collect();
    ApstTable {
        enabled: dword0 & 1 != 0,
        entries,
    }
}

/// The current power state from the Power Management feature's result (bits 4:0 PS).
pub fn decode_power_state(dword0: u32) -> u8 {
    (dword0 & 0x1f) as u8
}

/// An IDLP/ACTP value and its scale: 0.0001 W units (01b) where the figure fits 16 bits,
/// else 0.01 W units (10b).
fn power_field(w: f64) -> (u16, u8) {
    let fine = (w * 10_000.0).round();
    if fine <= 65535.0 {
        (fine.max(0.0) as u16, 0b01)
    } else {
        ((w * 100.0).round().clamp(0.0, 65535.0) as u16, 0b10)
    }
}

/// Encodes a power state as a 32-byte descriptor (the inverse of [`decode_descriptor`]) in
/// 0.01 W units (or 0.0001 W with MXPS where the figure needs it), for stand-in controllers.
pub fn encode_descriptor(state: &PowerState) -> [u8; PSD_LEN] {
    let mut psd = [0u8; PSD_LEN];
    let fine = (state.max_w * 100.0).fract().abs() > 1e-9 || state.max_w < 0.01;
    let (mp, mxps) = if fine {
        ((state.max_w * 10_000.0).round(), 1u8)
    } else {
        ((state.max_w * 100.0).round(), 0u8)
    };
    psd[0..2].copy_from_slice(&(mp.clamp(0.0, 65535.0) as u16).to_le_bytes());
    psd[3] = mxps | if state.non_operational { 0x02 } else { 0 };
    psd[4..8]
        .copy_from_slice(&(state.entry_latency_us.min(u64::from(u32::MAX)) as u32).to_le_bytes());
    psd[8..12]
        .copy_from_slice(&(state.exit_latency_us.min(u64::from(u32::MAX)) as u32).to_le_bytes());
    // Idle and active power when given, else "not reported" (scale 00b).
    if let Some(w) = state.idle_w {
        let (value, scale) = power_field(w);
        psd[16..18].copy_from_slice(&value.to_le_bytes());
        psd[18] = scale << 6;
    }
    if let Some(w) = state.active_w {
        let (value, scale) = power_field(w);
        psd[20..22].copy_from_slice(&value.to_le_bytes());
        psd[22] = scale << 6;
    }
    psd
}

/// An Identify Controller data structure with `model` and `states` (at most 32, at least 1).
pub fn encode_identify(model: &str, states: &[PowerState]) -> Vec<u8> {
    let mut data = vec![0u8; IDENTIFY_LEN];
    let mut mn = [b' '; 40];
    for (d, s) in mn.iter_mut().zip(model.bytes()) {
        *d = s;
    }
    data[MODEL_AT].copy_from_slice(&mn);
    let n = states.len().clamp(1, MAX_STATES);
    data[NPSS_AT] = (n - 1) as u8;
    // A stand-in supports APST (its table may still be off).
    data[APSTA_AT] = 1;
    for (i, s) in states.iter().take(n).enumerate() {
        let at = PSD_AT + i * PSD_LEN;
        data[at..at + PSD_LEN].copy_from_slice(&encode_descriptor(s));
    }
    data
}

/// The APST data structure of `entries` (entry `from` at index `from`).
pub fn encode_apst(entries: &[ApstEntry]) -> Vec<u8> {
    let mut table = vec![0u8; APST_LEN];
    for e in entries.iter().filter(|e| usize::from(e.from) < MAX_STATES) {
        let v = (e.idle_ms.min(0x00ff_ffff) << 8) | (u32::from(e.to & 0x1f) << 3);
        let at = usize::from(e.from) * 8;
        table[at..at + 4].copy_from_slice(&v.to_le_bytes());
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptors_decode_both_max_power_scales_nops_and_unreported_idle() {
        // MP 0x0320 = 800 × 0.01 W = 8.00 W; ENLAT 5 µs, EXLAT 7 µs; IDLP 0x1388 = 5000 in
        // 0.0001 W units (IPS 01b) = 0.5 W; ACTP 0x00fa = 250 × 0.01 W (APS 10b) = 2.5 W.
        let mut psd = [0u8; 32];
        psd[0] = 0x20;
        psd[1] = 0x03;
        psd[4] = 5;
        psd[8] = 7;
        psd[16] = 0x88;
        psd[17] = 0x13;
        psd[18] = 0x40;
        psd[20] = 0xfa;
        psd[22] = 0x80;
        let s = decode_descriptor(0, &psd);
        assert!((s.max_w - 8.0).abs() < 1e-12);
        assert!((s.idle_w.unwrap() - 0.5).abs() < 1e-12);
        assert!((s.active_w.unwrap() - 2.5).abs() < 1e-12);
        assert_eq!((s.entry_latency_us, s.exit_latency_us), (5, 7));
        assert!(!s.non_operational);

        // MXPS and NOPS set: MP 0x01f4 = 500 × 0.0001 W = 0.05 W; IPS 00b: idle power not
        // reported even though IDLP holds a value; APS 11b (reserved): not reported either.
        let mut psd = [0u8; 32];
        psd[0] = 0xf4;
        psd[1] = 0x01;
        psd[3] = 0x03;
        psd[4..8].copy_from_slice(&2000u32.to_le_bytes());
        psd[8..12].copy_from_slice(&8000u32.to_le_bytes());
        psd[16] = 0x10;
        psd[20] = 0x10;
        psd[22] = 0xc0;
        let s = decode_descriptor(4, &psd);
        assert!((s.max_w - 0.05).abs() < 1e-12);
        assert!(s.non_operational);
        assert_eq!((s.idle_w, s.active_w), (None, None));
        assert_eq!((s.entry_latency_us, s.exit_latency_us), (2000, 8000));
        assert_eq!(s.name, "ps4");
    }

    #[test]
    fn identify_gives_npss_plus_one_states_and_the_model() {
        let mut data = vec![0u8; 4096];
        data[24..24 + 11].copy_from_slice(b"WATTIO NVMe");
        for b in &mut data[35..64] {
            *b = b' ';
        }
        data[263] = 1; // two states
        data[2048] = 100; // PS0 MP 1.00 W
        data[2048 + 32] = 3; // PS1 MP 0.03 W
        data[2048 + 32 + 3] = 0x02; // PS1 non-operational
        data[2048 + 64] = 9; // a third descriptor NPSS does not count
        let id = decode_identify(&data).unwrap();
        assert_eq!(id.model, "WATTIO NVMe");
        assert_eq!(id.figures.states.len(), 2);
        assert!((id.figures.states[0].max_w - 1.0).abs() < 1e-12);
        assert!((id.figures.states[1].max_w - 0.03).abs() < 1e-12);
        assert!(id.figures.states[1].non_operational);
    }

    #[test]
    fn identify_that_cannot_be_right_is_one_line_error() {
        let e = decode_identify(&[0u8; 100]).unwrap_err();
        assert!(e.contains("100 bytes") && !e.contains('\n'), "{e}");
        let mut data = vec![0u8; 4096];
        data[263] = 40;
        let e = decode_identify(&data).unwrap_err();
        assert!(e.contains("41 power states") && !e.contains('\n'), "{e}");
    }

    #[test]
    fn apst_entries_decode_itps_and_itpt() {
        let mut table = vec![0u8; 256];
        // Entry 0: ITPS 3 (bits 7:3 = 0b00011 → 0x18), ITPT 100 ms (bits 31:8).
        table[0..4].copy_from_slice(&((100u32 << 8) | (3 << 3)).to_le_bytes());
        // Entry 3: ITPS 4, ITPT 2000 ms.
        table[24..28].copy_from_slice(&((2000u32 << 8) | (4 << 3)).to_le_bytes());
        let t = decode_apst(1, &table);
        assert!(t.enabled);
        assert_eq!(
            t.entries,
            [
                ApstEntry {
                    from: 0,
                    to: 3,
                    idle_ms: 100
                },
                ApstEntry {
                    from: 3,
                    to: 4,
                    idle_ms: 2000
                }
            ]
        );
        assert_eq!(t.summary(), "ps0→ps3 after 100 ms, ps3→ps4 after 2000 ms");
        assert!(!decode_apst(0, &table).enabled);
        assert_eq!(encode_apst(&t.entries), table);
        assert_eq!(decode_power_state(0xe3), 3);
    }

    #[test]
    fn encoded_descriptors_decode_to_the_same_figures() {
        let s = PowerState {
            id: 3,
            name: "ps3".into(),
            max_w: 0.05,
            idle_w: Some(0.05),
            active_w: None,
            non_operational: true,
            entry_latency_us: 1500,
            exit_latency_us: 9000,
        };
        assert_eq!(decode_descriptor(3, &encode_descriptor(&s)), s);
    }
}
