//! IPU generations and the numbers the memory and time models use.
//!
//! Every number is a named field with its source in [`Generation::sources`] (and in the plan's
//! JSON): a Graphcore datasheet or PopTorch source where one exists, a secondary page where
//! that is all there is, "derived" for arithmetic on those, and "estimate" for tunables with
//! no published figure (shared/spec/reference.md §B lists what was found and what was not).

use serde::{Deserialize, Serialize};

/// The IPU generation a plan targets (`"mk1"`, `"mk2"`, `"bow"` in JSON).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum IpuGeneration {
    /// Colossus Mk1 GC2 (C2 PCIe card), PopTorch's `ipu1` IPU Model.
    #[serde(alias = "ipu1")]
    Mk1,
    /// Colossus Mk2 GC200 (IPU-M2000, IPU-POD), PopTorch's `ipu2` IPU Model (the default).
    #[default]
    #[serde(alias = "ipu2")]
    Mk2,
    /// Bow IPU (Bow-2000): the GC200 design on wafer-on-wafer power delivery, faster clock.
    Bow,
}

impl IpuGeneration {
    /// The numbers for this generation.
    pub fn spec(self) -> Generation {
        match self {
            IpuGeneration::Mk1 => mk1(),
            IpuGeneration::Mk2 => mk2(),
            IpuGeneration::Bow => bow(),
        }
    }

    /// The name in JSON and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            IpuGeneration::Mk1 => "mk1",
            IpuGeneration::Mk2 => "mk2",
            IpuGeneration::Bow => "bow",
        }
    }
}

/// One generation's hardware numbers and the model's tunables. Bandwidths are bytes per
/// second, rates FLOP per second, memory in bytes.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Generation {
    pub name: &'static str,
    pub chip: &'static str,
    /// Tiles (cores) per IPU.
    pub tiles: usize,
    /// In-Processor Memory (SRAM) per tile.
    pub bytes_per_tile: usize,
    /// Hardware threads per tile.
    pub threads_per_tile: usize,
    /// Clock in Hz.
    pub clock_hz: f64,
    /// Peak FP16 (FP16.32) arithmetic per IPU.
    pub fp16_flops: f64,
    /// Peak FP32 arithmetic per IPU.
    pub fp32_flops: f64,
    /// Tile-local memory bandwidth per IPU.
    pub memory_bandwidth: f64,
    /// Tile-to-tile exchange bandwidth per IPU (all-to-all).
    pub exchange_bandwidth: f64,
    /// Bandwidth of a copy between two neighbouring IPUs over IPU-Links.
    pub ipu_link_bandwidth: f64,
    /// Host link bandwidth per IPU (input and output streams).
    pub host_bandwidth: f64,
    /// Streaming Memory (off-chip DRAM) bandwidth per IPU.
    pub streaming_bandwidth: f64,
    /// Bandwidth of gathers, scatters and sparse products (measured, far below memory bandwidth).
    pub gather_bandwidth: f64,
    /// Fixed cost of every op (a program step: vertex launch, control code), in cycles.
    pub op_overhead_cycles: f64,
    /// A BSP sync inside one IPU, in cycles.
    pub sync_cycles: f64,
    /// A sync across IPUs (before inter-IPU copies and pipeline steps), in cycles.
    pub ipu_sync_cycles: f64,
    /// Share of peak FLOP rate dense products reach.
    pub matmul_efficiency: f64,
    /// Share of memory bandwidth elementwise, reduction and normalisation ops reach.
    pub elementwise_efficiency: f64,
    /// Share of an op's input bytes moved by the exchange before it computes.
    pub exchange_fraction: f64,
    /// Code per tile every program has (runtime, control program, common codelets).
    pub code_bytes_per_tile: usize,
    /// Code per tile per distinct op kind (its vertex codelets).
    pub code_bytes_per_op_kind_per_tile: usize,
    /// Exchange code and buffers per tile.
    pub exchange_bytes_per_tile: usize,
    /// Smallest piece of a tensor mapped to one tile (the tile map's grain).
    pub tile_grain_bytes: usize,
    /// Most IPUs one process may use (PopTorch: more needs distributed execution).
    pub max_ipus: usize,
    /// Where each number comes from: (field, source).
    pub sources: Vec<(&'static str, &'static str)>,
}

impl Generation {
    /// In-Processor Memory per IPU.
    pub fn capacity_bytes(&self) -> u64 {
        self.tiles as u64 * self.bytes_per_tile as u64
    }

    /// Peak FLOP rate for an op computing in `half` or single precision.
    pub fn peak_flops(&self, half: bool) -> f64 {
        if half {
            self.fp16_flops
        } else {
            self.fp32_flops
        }
    }
}

const SECONDARY_LINK: &str = "320 GB/s over 10 IPU-Links per IPU (thecharlieblake.co.uk, secondary, §B); \
     a neighbour pair uses 2 of them: 64 GB/s (derived, estimate)";

fn mk2() -> Generation {
    Generation {
        name: "mk2",
        chip: "Colossus Mk2 GC200",
        tiles: 1472,
        bytes_per_tile: 638_976,
        threads_per_tile: 6,
        clock_hz: 1.33e9,
        fp16_flops: 250e12,
        fp32_flops: 62.5e12,
        memory_bandwidth: 47.5e12,
        exchange_bandwidth: 8e12,
        ipu_link_bandwidth: 64e9,
        host_bandwidth: 64e9,
        streaming_bandwidth: 16e9,
        gather_bandwidth: 1_776.0 * 1_073_741_824.0 * 1.33 / 1.85,
        op_overhead_cycles: 1_400.0,
        sync_cycles: 150.0,
        ipu_sync_cycles: 1_000.0,
        matmul_efficiency: 0.4,
        elementwise_efficiency: 0.25,
        exchange_fraction: 0.5,
        code_bytes_per_tile: 12 * 1024,
        code_bytes_per_op_kind_per_tile: 256,
        exchange_bytes_per_tile: 6 * 1024,
        tile_grain_bytes: 256,
        max_ipus: 64,
        sources: vec![
            ("tiles", "1472: PopTorch IPU Model ipu2 (popart_compiler/source/Utils.cpp), §B"),
            ("bytesPerTile", "624 KiB: PopART available_memory_proportion test on ipu2, §B"),
            ("threadsPerTile", "6: launch coverage, §B"),
            ("clockHz", "estimate: no primary figure (§B, §H); 1.33 GHz makes 250 TFLOPS = 128 FLOP/cycle/tile"),
            ("fp16Flops", "250 TFLOPS: launch coverage and M2000 datasheet (1 PFLOPS per 4 IPUs), §B"),
            ("fp32Flops", "62.5 TFLOPS: cambrian-ai.com, consistent with the IPU-POD128 datasheet, §B"),
            ("memoryBandwidth", "47.5 TB/s: io-tech.fi, thecharlieblake.co.uk (secondary), §B"),
            ("exchangeBandwidth", "8 TB/s all-to-all: thecharlieblake.co.uk (secondary), §B"),
            ("ipuLinkBandwidth", SECONDARY_LINK),
            ("hostBandwidth", "PCIe Gen4 x16, 64 GB/s (secondary), §B"),
            ("streamingBandwidth", "estimate: no primary figure; §B suggests 10-20 GB/s per IPU"),
            ("gatherBandwidth", "1,776 GiB/s measured on a Bow IPU (Gradient-Pytorch-Geometric), scaled by clock"),
            ("opOverheadCycles", "1,389 cycles for a tiny gather on a Bow IPU (measured, §B), rounded"),
            ("syncCycles", "estimate"),
            ("ipuSyncCycles", "estimate"),
            ("matmulEfficiency", "estimate: no published utilisation figure (§B)"),
            ("elementwiseEfficiency", "estimate"),
            ("exchangeFraction", "estimate"),
            ("codeBytesPerTile", "estimate (PopVision memory reports show tens of KiB of code per tile)"),
            ("codeBytesPerOpKindPerTile", "estimate"),
            ("exchangeBytesPerTile", "estimate"),
            ("tileGrainBytes", "estimate"),
            ("maxIpus", "64 per process: PopTorch CompilerImpl.cpp, §A.3"),
        ],
    }
}

fn mk1() -> Generation {
    let base = mk2();
    Generation {
        name: "mk1",
        chip: "Colossus Mk1 GC2",
        tiles: 1216,
        bytes_per_tile: 256 * 1024,
        clock_hz: 1.6e9,
        fp16_flops: 124.5e12,
        fp32_flops: 31.1e12,
        memory_bandwidth: 45e12,
        exchange_bandwidth: 8e12 * 1216.0 / 1472.0,
        ipu_link_bandwidth: 192e9,
        host_bandwidth: 16e9,
        streaming_bandwidth: 16e9,
        gather_bandwidth: 1_776.0 * 1_073_741_824.0 * (1.6 / 1.85) * (1216.0 / 1472.0),
        sources: vec![
            ("tiles", "1216: PopTorch IPU Model ipu1 (Utils.cpp), §B"),
            ("bytesPerTile", "256 KiB: Jia et al. 2019 (arXiv 1912.03413, secondary), §B"),
            ("threadsPerTile", "6, §B"),
            ("clockHz", "1.6 GHz: derived from a 6-cycle load latency of 3.75 ns (secondary), §B"),
            ("fp16Flops", "124.5 TFLOPS: Jia et al., §B"),
            ("fp32Flops", "31.1 TFLOPS: Jia et al., §B"),
            ("memoryBandwidth", "45 TB/s (secondary), §B"),
            ("exchangeBandwidth", "estimate: Mk2's 8 TB/s scaled by tiles (no Mk1 figure found)"),
            ("ipuLinkBandwidth", "192 GB/s between the C2 card's 2 IPUs (legacy_drivers_and_tools README), §B"),
            ("hostBandwidth", "estimate: PCIe Gen3 x16"),
            ("streamingBandwidth", "estimate: Mk1 has no Streaming Memory, tensors go to host memory"),
            ("gatherBandwidth", "derived: the Bow measurement scaled by clock and tiles"),
            ("opOverheadCycles", "the Bow measurement (§B), assumed equal"),
            ("syncCycles", "estimate"),
            ("ipuSyncCycles", "estimate"),
            ("matmulEfficiency", "estimate"),
            ("elementwiseEfficiency", "estimate"),
            ("exchangeFraction", "estimate"),
            ("codeBytesPerTile", "estimate"),
            ("codeBytesPerOpKindPerTile", "estimate"),
            ("exchangeBytesPerTile", "estimate"),
            ("tileGrainBytes", "estimate"),
            ("maxIpus", "64 per process: PopTorch CompilerImpl.cpp, §A.3"),
        ],
        ..base
    }
}

fn bow() -> Generation {
    let base = mk2();
    let clock = 1.85e9;
    let mut sources = base.sources.clone();
    for (k, v) in sources.iter_mut() {
        *v = match *k {
            "clockHz" => "1,850 MHz: the clock Gradient-Pytorch-Geometric's benchmark_util.py assumes for Bow, §B",
            "fp16Flops" => "350 TFLOPS: Bow-2000 datasheet (1.4 PFLOPS per 4 IPUs), §B",
            "fp32Flops" => "derived: a quarter of FP16, as on Mk2 (estimate)",
            "memoryBandwidth" => "derived: Mk2's 47.5 TB/s scaled by clock (estimate)",
            "exchangeBandwidth" => "derived: Mk2's 8 TB/s scaled by clock (estimate)",
            "gatherBandwidth" => "1,776 GiB/s measured on a Bow IPU (Gradient-Pytorch-Geometric), §B",
            "bytesPerTile" => "624 KiB as Mk2: Bow-2000 has 3.6 GB IPM per 4 IPUs (datasheet), §B",
            other => sources_of_mk2(other),
        };
    }
    Generation {
        name: "bow",
        chip: "Bow IPU",
        clock_hz: clock,
        fp16_flops: 350e12,
        fp32_flops: 87.5e12,
        memory_bandwidth: 47.5e12 * clock / 1.33e9,
        exchange_bandwidth: 8e12 * clock / 1.33e9,
        gather_bandwidth: 1_776.0 * 1_073_741_824.0,
        sources,
        ..base
    }
}

fn sources_of_mk2(field: &str) -> &'static str {
    mk2().sources.into_iter().find(|(k, _)| *k == field).map(|(_, v)| v).unwrap_or("estimate")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_mk2_capacity_is_1472_tiles_of_624_kib() {
        let g = IpuGeneration::Mk2.spec();
        assert_eq!(g.capacity_bytes(), 1472 * 624 * 1024);
        assert_eq!(IpuGeneration::Mk1.spec().tiles, 1216);
        assert!(IpuGeneration::Bow.spec().fp16_flops > g.fp16_flops);
    }

    #[test]
    fn timeline_every_hardware_number_names_its_source() {
        for gen in [IpuGeneration::Mk1, IpuGeneration::Mk2, IpuGeneration::Bow] {
            let g = gen.spec();
            let json = serde_json::to_value(&g).unwrap();
            let fields: Vec<&String> = json
                .as_object()
                .unwrap()
                .keys()
                .filter(|k| !["name", "chip", "sources"].contains(&k.as_str()))
                .collect();
            for f in fields {
                assert!(g.sources.iter().any(|(k, _)| k == f), "{}: no source for {f}", g.name);
            }
        }
    }
}
