//! Algorithm 1: heuristic parameter initialisation (partition, BDP chunking, pipelining,
//! channel count and its split, initial cores and frequency).

use super::Sla;
use serde::{Deserialize, Serialize};

/// Smallest chunk we cut (ours): on a short path the BDP is a few KiB, and requests that
/// small cost more CPU per byte than they save.
pub const MIN_CHUNK: u64 = 256 * 1024;
/// Upper bound on pipelining (the AdaptiveGridFTPClient heuristic caps it at 100).
pub const MAX_PIPELINING: usize = 100;

/// What is known of the path.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct NetParams {
    /// Round-trip time, seconds.
    pub rtt_s: f64,
    /// Bottleneck bandwidth in bits/s, when known (`--bandwidth`).
    pub bandwidth_bps: Option<f64>,
    /// Average TCP window of one stream, bytes (iperf-style estimate; `--window`).
    pub window_bytes: u64,
    /// Most channels the tuners may open.
    pub max_ch: usize,
}

impl NetParams {
    /// The bandwidth-delay product in bytes; without a known bandwidth, one window (what a
    /// single stream keeps in flight).
    pub fn bdp_bytes(&self) -> u64 {
        match self.bandwidth_bps {
            Some(b) => (b * self.rtt_s / 8.0).round() as u64,
            None => self.window_bytes,
        }
    }
    /// tputChannel = avgWinSize / RTT, bits/s.
    pub fn channel_tput_bps(&self) -> f64 {
        self.window_bytes as f64 * 8.0 / self.rtt_s.max(1e-6)
    }
}

/// Size classes of partitionFiles() (thresholds are ours; the paper does not give them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum PartitionClass {
    /// size < BDP/8
    Small,
    /// BDP/8 ≤ size < BDP
    Medium,
    /// size ≥ BDP: split into BDP chunks
    Large,
}

/// How files of a partition are cut into requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum RequestSplit {
    /// One request per file.
    Whole,
    /// Chunks of this many bytes (Algorithm 1: BDP).
    Chunk(u64),
    /// Each file in this many equal parts (fixed parallelism of the baselines).
    Parts(usize),
}

/// One partition of the dataset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Partition {
    pub class: PartitionClass,
    /// Indices into the dataset's file list (not serialized: can be long).
    #[serde(skip)]
    pub files: Vec<usize>,
    pub n_files: usize,
    pub bytes: u64,
    pub split: RequestSplit,
    /// Requests in flight per channel.
    pub pipelining: usize,
}

/// The initial transfer parameters Algorithm 1 chooses: partitions, channels, cores, frequency.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TransferPlan {
    pub bdp_bytes: u64,
    pub partitions: Vec<Partition>,
    /// numChannels of line 9.
    pub num_ch: usize,
    /// ccLevel per partition.
    pub channels: Vec<usize>,
    /// Initial active cores and frequency index (0 = lowest) for the CPU scaler.
    pub cores: usize,
    pub freq_idx: usize,
}

/// Runs Algorithm 1 on file sizes.
///
/// `n_cores` is the number of cores the transfer may use, `top_freq_idx` the highest index of
/// the frequency ladder (unused by the paper's lines 14–20, which start every SLA at the
/// minimum frequency).
pub fn initial_plan(sizes: &[u64], net: &NetParams, sla: Sla, n_cores: usize) -> TransferPlan {
    let bdp = net.bdp_bytes().max(MIN_CHUNK);
    let mut parts: Vec<Partition> = Vec::new();
    for class in [
        PartitionClass::Small,
        PartitionClass::Medium,
        PartitionClass::Large,
    ] {
        let files: Vec<usize> = (0..sizes.len())
            .filter(|&i| classify(sizes[i], bdp) == class)
            .collect();
        if files.is_empty() {
            continue;
        }
        let bytes: u64 = files.iter().map(|&i| sizes[i]).sum();
        let avg = bytes as f64 / files.len() as f64;
        // lines 3-5: split files larger than BDP into BDP chunks
        let (split, avg_req) = if avg > bdp as f64 {
            let chunks: u64 = files.iter().map(|&i| sizes[i].div_ceil(bdp).max(1)).sum();
            (RequestSplit::Chunk(bdp), bytes as f64 / chunks as f64)
        } else {
            (RequestSplit::Whole, avg)
        };
        // line 6: ppLevel = ceil(BDP / avgFileSize)
        let pp = ((bdp as f64 / avg_req.max(1.0)).ceil() as usize).clamp(1, MAX_PIPELINING);
        parts.push(Partition {
            class,
            n_files: files.len(),
            files,
            bytes,
            split,
            pipelining: pp,
        });
    }
    let num_ch = channel_count(net);
    let channels = channel_split(&parts, num_ch);
    // lines 14-20 (target throughput is not covered by the paper; we start it like energy)
    let cores = match sla {
        Sla::MaxThroughput => n_cores.max(1),
        Sla::MinEnergy | Sla::Target(_) => 1,
    };
    TransferPlan {
        bdp_bytes: bdp,
        partitions: parts,
        num_ch,
        channels,
        cores,
        freq_idx: 0,
    }
}

/// Algorithm 1 lines 10-13: `ccLevel_i = ceil(weight_i × numChannels)`, weight = the
/// partition's share of the bytes; at least one channel each.
pub fn channel_split(parts: &[Partition], num_ch: usize) -> Vec<usize> {
    let total: u64 = parts.iter().map(|p| p.bytes).sum();
    parts
        .iter()
        .map(|p| {
            if total == 0 {
                1
            } else {
                ((p.bytes as f64 / total as f64) * num_ch as f64)
                    .ceil()
                    .max(1.0) as usize
            }
        })
        .collect()
}

/// Algorithm 1 lines 8-9: the channels the link needs, `ceil(bandwidth / channel throughput)`,
/// where a channel carries at most its TCP window per RTT.
pub fn channel_count(net: &NetParams) -> usize {
    match net.bandwidth_bps {
        Some(bw) => (bw / net.channel_tput_bps()).ceil() as usize,
        None => 4, // ours: slow start measures the path from here
    }
    .clamp(1, net.max_ch.max(1))
}

/// The size class of a file of `size` bytes on a path of `bdp` bytes (partitionFiles()).
pub fn classify(size: u64, bdp: u64) -> PartitionClass {
    if size < bdp / 8 {
        PartitionClass::Small
    } else if size < bdp {
        PartitionClass::Medium
    } else {
        PartitionClass::Large
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cloudlab() -> NetParams {
        // CloudLab of Table I: 1 Gbps, 36 ms → BDP 4.5 MB; 4 MiB windows.
        NetParams {
            rtt_s: 0.036,
            bandwidth_bps: Some(1e9),
            window_bytes: 1 << 20,
            max_ch: 64,
        }
    }

    #[test]
    fn table2_shapes_on_cloudlab() {
        // 40 small (100 KB), 10 medium (2.4 MB), 2 large (222 MB) files.
        let mut sizes = vec![100_000u64; 40];
        sizes.extend(vec![2_400_000; 10]);
        sizes.extend(vec![222_000_000; 2]);
        let p = initial_plan(&sizes, &cloudlab(), Sla::MaxThroughput, 2);
        assert_eq!(p.bdp_bytes, 4_500_000);
        assert_eq!(p.partitions.len(), 3);
        assert_eq!(p.partitions[0].class, PartitionClass::Small);
        assert_eq!(p.partitions[0].files.len(), 40);
        // ceil(4.5 MB / 100 kB) = 45
        assert_eq!(p.partitions[0].pipelining, 45);
        assert_eq!(p.partitions[0].split, RequestSplit::Whole);
        // ceil(4.5 / 2.4) = 2
        assert_eq!(p.partitions[1].pipelining, 2);
        assert_eq!(p.partitions[2].split, RequestSplit::Chunk(4_500_000));
        // 222 MB = 49.33 chunks → 50 per file, avg chunk 4.44 MB → pp = ceil(1.0135) = 2
        assert_eq!(p.partitions[2].pipelining, 2);
        // one channel: 1 MiB / 36 ms = 233 Mbit/s → ceil(1e9 / 233e6) = 5 channels
        assert_eq!(p.num_ch, 5);
        // weights: 4 MB, 24 MB, 444 MB of 472 MB → ceil(0.042, 0.254, 4.70) = 1, 1, 5
        assert_eq!(p.channels, vec![1, 1, 5]);
        assert_eq!(p.cores, 2);
        assert_eq!(p.freq_idx, 0);
        let e = initial_plan(&sizes, &cloudlab(), Sla::MinEnergy, 2);
        assert_eq!(e.cores, 1);
    }

    #[test]
    fn tiny_bdp_is_clamped_and_unknown_bandwidth_starts_at_four() {
        let net = NetParams {
            rtt_s: 0.0001,
            bandwidth_bps: None,
            window_bytes: 64 * 1024,
            max_ch: 3,
        };
        let p = initial_plan(&[10 << 20, 1000], &net, Sla::MinEnergy, 2);
        assert_eq!(p.bdp_bytes, MIN_CHUNK);
        assert_eq!(p.num_ch, 3, "4 clamped to max_ch");
        assert_eq!(
            p.partitions.last().unwrap().split,
            RequestSplit::Chunk(MIN_CHUNK)
        );
    }

    #[test]
    fn empty_dataset() {
        let p = initial_plan(&[], &cloudlab(), Sla::MinEnergy, 1);
        assert!(p.partitions.is_empty());
        assert!(p.channels.is_empty());
    }
}
