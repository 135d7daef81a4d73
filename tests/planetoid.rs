//! Planetoid loading against the raw files staged in `data/` (from `../shared/data/planetoid/raw`).
//!
//! Expected values come from PyG's documented dataset statistics and from an independent
//! re-implementation of `read_planetoid_data` over the same pickles (Python stdlib
//! `pickle` with stub classes for numpy/scipy). Missing data is a failure, not a skip.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use ipu_playground::gnn::data::{
    add_self_loops, fixed_sizes, fixed_sizes_for_epochs, fixed_sizes_from_parts, induced_subgraphs,
    load_planetoid_bytes, load_planetoid_dir, normalize_features, pad_fixed, planetoid, to_undirected, whole_graph,
    GraphData, PlanetoidOptions, RandomNodeLoader, Source, Split, PLANETOID_FILES,
};

/// The staged raw files (`scripts/stage-data.sh`, run by `make test` first), else the
/// shared copy. Missing data fails the tests: a skipped check would assert nothing.
fn raw_dir() -> Option<PathBuf> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    for dir in [root.join("data"), root.join("../shared/data/planetoid/raw")] {
        if dir.join("ind.pubmed.graph").is_file() {
            return Some(dir);
        }
    }
    panic!("Planetoid raw data not found in data/ or ../shared/data/planetoid/raw: run scripts/stage-data.sh");
}

struct Expected {
    name: &'static str,
    nodes: usize,
    features: usize,
    classes: usize,
    edges: usize,
    train_public: usize,
    train_full: usize,
    nnz: usize,
    x_sum: f64,
    /// sum over rows of row_index * row_sum
    x_weighted_sum: f64,
    /// sum over rows of row_index * (sum of the row's column ids)
    x_col_checksum: u64,
    class_counts: &'static [usize],
    first_edges: &'static [(u32, u32)],
    last_edges: &'static [(u32, u32)],
    /// sum of (src*31 + dst*7) % 1_000_003 over edges, and sum of k * (src + 2 dst)
    edge_checksums: (u64, u64),
    y_first: &'static [i32],
    test_first: &'static [(usize, i32)],
}

const CORA: Expected = Expected {
    name: "Cora",
    nodes: 2708,
    features: 1433,
    classes: 7,
    edges: 10556,
    train_public: 140,
    train_full: 1208,
    nnz: 49216,
    x_sum: 49216.0,
    x_weighted_sum: 66204708.0,
    x_col_checksum: 52432241815,
    class_counts: &[351, 217, 418, 818, 426, 298, 180],
    first_edges: &[(633, 0), (1862, 0), (2582, 0), (2, 1), (652, 1), (654, 1), (1, 2), (332, 2)],
    last_edges: &[(598, 2707), (1473, 2707), (2706, 2707)],
    edge_checksums: (525168284, 267029687011),
    y_first: &[3, 4, 4, 0, 3, 2, 0, 3, 3, 2, 0, 0, 4, 3, 3, 3, 2, 3, 1, 3],
    test_first: &[(2692, 3), (2532, 1), (2050, 6), (1715, 2), (2362, 4)],
};

const CITESEER: Expected = Expected {
    name: "CiteSeer",
    nodes: 3327,
    features: 3703,
    classes: 6,
    edges: 9104,
    train_public: 120,
    train_full: 1827,
    nnz: 105165,
    x_sum: 105165.0,
    x_weighted_sum: 174708694.0,
    x_col_checksum: 317451632061,
    class_counts: &[264, 590, 668, 701, 596, 508],
    first_edges: &[(628, 0), (158, 1), (486, 1), (1097, 1), (2919, 1), (2933, 1), (3285, 2), (1431, 3)],
    last_edges: &[(2820, 3324), (1643, 3325), (33, 3326)],
    edge_checksums: (564486048, 247152758919),
    y_first: &[3, 1, 5, 5, 3, 1, 3, 0, 3, 5, 2, 4, 2, 1, 2, 3, 2, 4, 4, 0],
    test_first: &[(2488, 2), (2644, 0), (3261, 1), (2804, 3), (3176, 0)],
};

const PUBMED: Expected = Expected {
    name: "PubMed",
    nodes: 19717,
    features: 500,
    classes: 3,
    edges: 88648,
    train_public: 60,
    train_full: 18217,
    nnz: 988031,
    x_sum: 38716.295095,
    x_weighted_sum: 381674562.887770,
    x_col_checksum: 1815342253754,
    class_counts: &[4103, 7739, 7875],
    first_edges: &[(1378, 0), (1544, 0), (6092, 0), (7636, 0), (14442, 0), (2943, 1), (8359, 1), (10199, 1)],
    last_edges: &[(12278, 19714), (4284, 19715), (16030, 19716)],
    edge_checksums: (32848898106, 140749757107368),
    y_first: &[1, 1, 0, 2, 1, 2, 2, 1, 2, 1, 2, 2, 2, 2, 2, 0, 1, 2, 1, 2],
    test_first: &[(18747, 1), (19392, 2), (19181, 2), (18843, 2), (19221, 0)],
};

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-6 * b.abs().max(1.0)
}

fn check(g: &GraphData, e: &Expected) {
    let name = e.name;
    assert_eq!(g.name, name);
    assert_eq!(
        (g.num_nodes, g.num_features, g.num_classes, g.num_edges()),
        (e.nodes, e.features, e.classes, e.edges),
        "{name}: nodes / features / classes / edges"
    );
    assert_eq!((g.x.nrows, g.x.ncols), (e.nodes, e.features));
    for v in [g.y.len(), g.train_mask.len(), g.val_mask.len(), g.test_mask.len()] {
        assert_eq!(v, e.nodes);
    }

    // Features.
    assert_eq!(g.x.nnz(), e.nnz, "{name}: nnz");
    let x_sum: f64 = g.x.values.iter().map(|&v| v as f64).sum();
    assert!(close(x_sum, e.x_sum), "{name}: x sum {x_sum} != {}", e.x_sum);
    let mut weighted = 0.0;
    let mut cols = 0u64;
    for r in 0..g.num_nodes {
        let (c, v) = g.x.row(r);
        assert!(c.windows(2).all(|w| w[0] < w[1]), "{name}: row {r} columns not sorted");
        weighted += r as f64 * v.iter().map(|&v| v as f64).sum::<f64>();
        cols += r as u64 * c.iter().map(|&c| c as u64).sum::<u64>();
    }
    assert!(close(weighted, e.x_weighted_sum), "{name}: weighted x sum {weighted} != {}", e.x_weighted_sum);
    assert_eq!(cols, e.x_col_checksum, "{name}: feature column checksum");

    // Labels.
    assert_eq!(g.class_counts(), e.class_counts, "{name}: class counts");
    assert_eq!(&g.y[..20], e.y_first, "{name}: first labels");
    for &(i, c) in e.test_first {
        assert_eq!(g.y[i], c, "{name}: label of test node {i}");
        assert!(g.test_mask[i]);
    }

    // Edges: no self loops, sorted by (dst, src) without duplicates, symmetric.
    let pairs: Vec<(u32, u32)> = g.edge_src.iter().copied().zip(g.edge_dst.iter().copied()).collect();
    assert!(pairs.iter().all(|(s, d)| s != d), "{name}: self loop left");
    assert!(pairs.windows(2).all(|w| (w[0].1, w[0].0) < (w[1].1, w[1].0)), "{name}: edges not sorted by (dst, src)");
    let set: std::collections::HashSet<(u32, u32)> = pairs.iter().copied().collect();
    assert!(pairs.iter().all(|&(s, d)| set.contains(&(d, s))), "{name}: graph not symmetric");
    assert_eq!(&pairs[..e.first_edges.len()], e.first_edges, "{name}: first edges");
    assert_eq!(&pairs[pairs.len() - e.last_edges.len()..], e.last_edges, "{name}: last edges");
    let c1: u64 = pairs.iter().map(|&(s, d)| (s as u64 * 31 + d as u64 * 7) % 1_000_003).sum();
    let c2: u64 = pairs.iter().enumerate().map(|(k, &(s, d))| k as u64 * (s as u64 + 2 * d as u64)).sum();
    assert_eq!((c1, c2), e.edge_checksums, "{name}: edge checksums");

    // Public split.
    assert_eq!(g.split_sizes(), (e.train_public, 500, 1000), "{name}: public split");
    assert!(g.train_mask[..e.train_public].iter().all(|&m| m));
    assert!(g.val_mask[e.train_public..e.train_public + 500].iter().all(|&m| m));
    let per_class = (0..g.num_classes)
        .map(|c| (0..g.num_nodes).filter(|&i| g.train_mask[i] && g.y[i] == c as i32).count())
        .collect::<Vec<_>>();
    assert_eq!(per_class, vec![20; g.num_classes], "{name}: 20 training nodes per class");
    for i in 0..g.num_nodes {
        let roles = [g.train_mask[i], g.val_mask[i], g.test_mask[i]];
        assert!(roles.iter().filter(|&&m| m).count() <= 1, "{name}: node {i} in two splits");
    }
}

fn load(dir: &Path, name: &str, split: Split) -> GraphData {
    load_planetoid_dir(dir, name, split).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn cora_matches_pyg() {
    let Some(dir) = raw_dir() else { return };
    let g = load(&dir, "cora", Split::Public);
    check(&g, &CORA);
    let full = load(&dir, "CORA", Split::Full);
    assert_eq!(full.split_sizes(), (CORA.train_full, 500, 1000));
    assert_eq!((full.x, full.y, full.edge_src), (g.x, g.y, g.edge_src));
}

#[test]
fn citeseer_matches_pyg() {
    let Some(dir) = raw_dir() else { return };
    let g = load(&dir, "CiteSeer", Split::Public);
    check(&g, &CITESEER);
    // The 15 padding nodes of CiteSeer's test range have no features, label 0 and no mask.
    let empty: Vec<usize> = (0..g.num_nodes).filter(|&r| g.x.row(r).0.is_empty()).collect();
    assert_eq!(empty.len(), 15);
    for &r in &empty {
        assert_eq!(g.y[r], 0);
        assert!(!g.train_mask[r] && !g.val_mask[r] && !g.test_mask[r]);
        assert!(r >= 2312);
    }
    let full = load(&dir, "citeseer", Split::Full);
    assert_eq!(full.split_sizes(), (CITESEER.train_full, 500, 1000));
}

#[test]
fn pubmed_matches_pyg_and_transforms() {
    let Some(dir) = raw_dir() else { return };
    let g = load(&dir, "PubMed", Split::Public);
    check(&g, &PUBMED);
    let full = load(&dir, "pubmed", Split::Full);
    assert_eq!(full.split_sizes(), (PUBMED.train_full, 500, 1000));

    // AddSelfLoops appends one loop per node, nothing removed.
    let mut t = g.clone();
    add_self_loops(&mut t);
    assert_eq!(t.num_edges(), 88_648 + 19_717);
    assert_eq!(t.num_edges(), 108_365);
    assert_eq!(t.edge_src[88_648..], (0..19_717).collect::<Vec<u32>>()[..]);

    // NormalizeFeatures: every PubMed row sums to more than 1, so all rows sum to 1 after.
    let mut n = g.clone();
    normalize_features(&mut n);
    assert_eq!(n.x.nnz(), g.x.nnz());
    for r in 0..n.num_nodes {
        let s: f64 = n.x.row(r).1.iter().map(|&v| v as f64).sum();
        assert!((s - 1.0).abs() < 1e-5, "row {r} sums to {s}");
    }

    // ToUndirected on an already symmetric graph: same edges, now sorted by source.
    let mut u = g.clone();
    to_undirected(&mut u);
    assert_eq!(u.num_edges(), g.num_edges());
    let mut a: Vec<(u32, u32)> = g.edge_src.iter().copied().zip(g.edge_dst.iter().copied()).collect();
    a.sort_unstable();
    let b: Vec<(u32, u32)> = u.edge_src.iter().copied().zip(u.edge_dst.iter().copied()).collect();
    assert_eq!(a, b);

    // Fixed sizes for RevGNN-style training: 10 random parts with self loops.
    let sizes = fixed_sizes(&t, 10).unwrap();
    let loader = RandomNodeLoader::new(10, true, 0).unwrap();
    let exact = fixed_sizes_for_epochs(&t, &loader, 20).unwrap();
    assert_eq!(sizes.max_nodes, 1972 + 1);
    assert_eq!(exact.max_nodes, 1972 + 1);
    assert!(exact.max_edges <= sizes.max_edges);
    println!("PubMed, 10 random parts: bound {} edges, exact over 20 epochs {}", sizes.max_edges, exact.max_edges);
}

#[test]
fn random_split_counts() {
    let Some(dir) = raw_dir() else { return };
    let split = Split::Random { num_train_per_class: 20, num_val: 500, num_test: 1000, seed: 3 };
    let g = load(&dir, "Cora", split.clone());
    assert_eq!(g.split_sizes(), (140, 500, 1000));
    for c in 0..7 {
        assert_eq!((0..g.num_nodes).filter(|&i| g.train_mask[i] && g.y[i] == c).count(), 20);
    }
    assert_eq!(g, load(&dir, "Cora", split));
}

#[test]
fn bytes_path_equals_dir_path_and_reports_corruption() {
    let Some(dir) = raw_dir() else { return };
    let mut files: HashMap<String, Vec<u8>> = HashMap::new();
    for suffix in PLANETOID_FILES {
        let key = if suffix == "graph" { "ind.cora.graph".to_string() } else { suffix.to_string() };
        files.insert(key, std::fs::read(dir.join(format!("ind.cora.{suffix}"))).unwrap());
    }
    let from_bytes = load_planetoid_bytes("Cora", &files, Split::Full).unwrap();
    assert_eq!(from_bytes, load(&dir, "Cora", Split::Full));

    // Truncated feature file: the pickle error names the file.
    let x = files.get("allx").unwrap().clone();
    files.insert("allx".into(), x[..x.len() / 2].to_vec());
    let e = load_planetoid_bytes("cora", &files, Split::Public).unwrap_err();
    assert!(e.to_string().starts_with("ind.cora.allx: truncated pickle"), "{e}");
    // Corrupt label file: first opcode replaced.
    files.insert("allx".into(), x);
    let mut y = files.get("ally").unwrap().clone();
    y[2] = 0x95;
    files.insert("ally".into(), y);
    let e = load_planetoid_bytes("cora", &files, Split::Public).unwrap_err();
    assert_eq!(e.to_string(), "ind.cora.ally: unsupported pickle opcode 0x95 ('FRAME') at byte 2");
    // Missing file.
    files.remove("ty");
    let e = load_planetoid_bytes("cora", &files, Split::Public).unwrap_err();
    assert!(e.to_string().contains("missing file ind.cora.ty"), "{e}");
    let e = load_planetoid_dir(&dir, "Reddit", Split::Public).unwrap_err();
    assert!(e.to_string().contains("Cora, CiteSeer, PubMed"), "{e}");
}

/// The raw files of `name` as bytes, keyed by suffix.
fn raw_files(dir: &Path, name: &str) -> HashMap<String, Vec<u8>> {
    PLANETOID_FILES
        .iter()
        .map(|s| (s.to_string(), std::fs::read(dir.join(format!("ind.{name}.{s}"))).unwrap()))
        .collect()
}

/// `test.index` with line `line` (1-based) replaced by `value`.
fn with_test_index(files: &mut HashMap<String, Vec<u8>>, line: usize, value: &str) {
    let text = String::from_utf8(files["test.index"].clone()).unwrap();
    let mut lines: Vec<String> = text.lines().map(String::from).collect();
    lines[line - 1] = value.to_string();
    files.insert("test.index".into(), (lines.join("\n") + "\n").into_bytes());
}

#[test]
fn a_test_index_out_of_range_is_named_with_its_file_and_line() {
    let Some(dir) = raw_dir() else { return };
    let opts = PlanetoidOptions::default();
    // Cora: 1,708 rows in allx and 1,000 in tx; an index of 99999 used to grow the graph.
    let mut files = raw_files(&dir, "cora");
    with_test_index(&mut files, 1000, "99999");
    let e = planetoid("Cora", Source::Files(&files), &opts).unwrap_err().to_string();
    assert_eq!(
        e,
        "ind.cora.test.index: line 1000: test index 99999 is out of range for the 2708 nodes (1708 in \
         ind.cora.allx + 1000 in ind.cora.tx)"
    );
    with_test_index(&mut files, 3, "2708");
    let e = planetoid("cora", Source::Files(&files), &opts).unwrap_err().to_string();
    assert!(e.starts_with("ind.cora.test.index: line 1000: test index 99999"), "{e}");
    let mut files = raw_files(&dir, "pubmed");
    with_test_index(&mut files, 7, "19717");
    let e = planetoid("PubMed", Source::Files(&files), &opts).unwrap_err().to_string();
    assert!(
        e.starts_with("ind.pubmed.test.index: line 7: test index 19717 is out of range for the 19717 nodes"),
        "{e}"
    );
    // CiteSeer widens its test range (PyG does, for CiteSeer only), but not without bound.
    let mut files = raw_files(&dir, "citeseer");
    with_test_index(&mut files, 10, "99999");
    let e = planetoid("CiteSeer", Source::Files(&files), &opts).unwrap_err().to_string();
    assert!(
        e.starts_with("ind.citeseer.test.index: line 10: test index 99999 would widen the test range 2312..=99999"),
        "{e}"
    );
}

#[test]
fn the_dataset_entry_point_applies_split_and_transforms() {
    let Some(dir) = raw_dir() else { return };
    let g = planetoid("PubMed", Source::Dir(&dir), &PlanetoidOptions::rev_gnn()).unwrap();
    let mut want = load(&dir, "PubMed", Split::Full);
    add_self_loops(&mut want);
    assert_eq!(g, want);
    assert_eq!(g.num_edges(), 88_648 + 19_717);
    let opts = PlanetoidOptions::from_json(r#"{"transform": ["NormalizeFeatures", "ToUndirected"]}"#).unwrap();
    let g = planetoid("Cora", Source::Files(&raw_files(&dir, "cora")), &opts).unwrap();
    let mut want = load(&dir, "Cora", Split::Public);
    normalize_features(&mut want);
    to_undirected(&mut want);
    assert_eq!(g, want);
}

#[test]
fn loader_over_cora() {
    let Some(dir) = raw_dir() else { return };
    let mut g = load(&dir, "Cora", Split::Public);
    add_self_loops(&mut g);
    let sizes = fixed_sizes(&g, 10).unwrap();
    assert_eq!(sizes.max_nodes, 271 + 1);
    let mut loader = RandomNodeLoader::new(10, true, 7).unwrap();
    let exact = fixed_sizes_for_epochs(&g, &loader, 3).unwrap();
    assert!(exact.max_edges <= sizes.max_edges);
    let mut max_seen = 0;
    for _ in 0..3 {
        let parts = loader.parts(&g).unwrap();
        assert_eq!(parts.len(), 10);
        assert_eq!(parts.iter().map(|p| p.len()).sum::<usize>(), 2708);
        let tight = fixed_sizes_from_parts(&g, &parts);
        assert!(tight.max_nodes <= sizes.max_nodes && tight.max_edges <= sizes.max_edges);
        for sub in induced_subgraphs(&g, &parts) {
            // Every self loop survives; other edges only when both ends are in the part.
            assert!(sub.num_edges() >= sub.data.num_nodes);
            max_seen = max_seen.max(sub.num_edges());
            let n = sub.data.num_nodes;
            let b = pad_fixed(sub, sizes.max_nodes, sizes.max_edges).unwrap();
            assert_eq!(b.num_real_nodes, n);
            assert_eq!(b.sub.data.x.nrows, sizes.max_nodes);
            assert_eq!(b.sub.data.edge_src.len(), sizes.max_edges);
        }
    }
    assert_eq!(exact.max_edges, max_seen);
    println!("Cora, 10 random parts: bound {} edges, largest part seen {max_seen}", sizes.max_edges);
    // Whole graph as one batch for evaluation.
    let w = whole_graph(&g);
    assert_eq!((w.data.num_nodes, w.num_edges()), (2708, 10556 + 2708));
    let a = w.mean_adjacency();
    assert_eq!(a.nnz(), 10556 + 2708);
    for r in 0..a.nrows {
        let s: f32 = a.row(r).1.iter().sum();
        assert!((s - 1.0).abs() < 1e-5);
    }
}

#[test]
fn files_of_another_dataset_are_named_as_such() {
    let Some(dir) = raw_dir() else { return };
    let opts = PlanetoidOptions::default();
    // PubMed's files under the name "Cora": every size differs from Cora's, and the sizes
    // are recognised as PubMed's.
    let e = planetoid("Cora", Source::Files(&raw_files(&dir, "pubmed")), &opts).unwrap_err().to_string();
    assert_eq!(
        e,
        "Cora: the raw files do not hold Cora: they have 19717 nodes (allx + the test rows) where Cora has 2708, \
         500 features (ind.cora.allx columns) where Cora has 1433, 3 classes (ind.cora.ally columns) where Cora \
         has 7 (these are PubMed's sizes: were PubMed's files given?)"
    );
    for name in ["PubMed", "citeseer"] {
        let e = planetoid(name, Source::Files(&raw_files(&dir, "cora")), &opts).unwrap_err().to_string();
        assert!(e.contains("the raw files do not hold") && e.contains("they have 2708 nodes"), "{e}");
        assert!(e.ends_with("(these are Cora's sizes: were Cora's files given?)"), "{e}");
    }
    // Cora's own files still load under every spelling of the name.
    assert_eq!(planetoid("cora", Source::Files(&raw_files(&dir, "cora")), &opts).unwrap().num_nodes, 2708);
}
