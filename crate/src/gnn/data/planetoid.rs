//! The Planetoid citation graphs (Cora, CiteSeer, PubMed) from their original raw files,
//! assembled exactly as PyG's `read_planetoid_data` and `Planetoid(split=…)` do.
//!
//! What matches PyG (`torch_geometric/io/planetoid.py`, `datasets/planetoid.py`):
//!
//! * Features: `x = vstack(allx, tx)`, then the test rows are put back in graph order with
//!   `x[test_index] = x[sorted(test_index)]`, so every test index must be a node of
//!   `allx` + `tx` (an index out of range is an error naming the file, line and index, as
//!   PyG's indexing fails). CiteSeer has isolated test nodes that are missing from
//!   `tx`/`ty`; for CiteSeer only, as in PyG, `tx`/`ty` are first widened with zero rows
//!   to cover `range(min(test_index), max(test_index) + 1)`, row `k` of `tx` going to
//!   `sorted_test_index[k] - min` (at most as many zero rows as test rows: more is an
//!   error, not a graph grown to the largest index). Features stay sparse ([`CsrMatrix`],
//!   canonical: sorted columns, no stored zeros).
//! * Labels: `y = argmax(vstack(ally, ty))` per row, the first maximum winning like
//!   `torch.max(dim=1)`, so an all-zero row (CiteSeer's padding nodes) is class 0; then
//!   `y[test_index] = y[sorted(test_index)]`. `num_classes = max(y) + 1` as PyG infers it.
//! * Edges: every `(key, neighbour)` pair of the graph dict, self loops removed, then
//!   coalesced with `sort_by_row=False`: sorted by (target, source), duplicates dropped.
//! * Splits: `public` = train `range(len(y))`, val `range(len(y), len(y) + 500)`, test
//!   `test_index`; `full` = train on every node not in val or test; `random` = for each
//!   class (in order) `num_train_per_class` random nodes of that class, then from the
//!   remaining nodes in a random order the first `num_val` validate and the next
//!   `num_test` test. PyG draws with `torch.randperm`; we use [`Rng`] seeded with `seed`,
//!   so the random split is reproducible but not the same nodes as PyG's.
//!
//! Counts (checked in `tests/planetoid.rs`): Cora 2,708 nodes / 1,433 features / 7 classes /
//! 10,556 edges; CiteSeer 3,327 / 3,703 / 6 / 9,104; PubMed 19,717 / 500 / 3 / 88,648.

use crate::{Error, Result};
use std::collections::HashMap;
use std::path::Path;

use super::graph::GraphData;
use super::numpy::{adjacency_from_value, csr_from_value, ndarray_from_value, NdArray};
use super::pickle::parse;
use super::transforms::{coalesce, remove_self_loops};
use crate::rng::Rng;
use crate::tensor::CsrMatrix;

/// The dataset names, spelled as PyG does (lookup is case-insensitive).
pub const PLANETOID_NAMES: [&str; 3] = ["Cora", "CiteSeer", "PubMed"];

/// The sizes PyG reports for each dataset (`num_nodes`, `num_features`, `num_classes`), in
/// [`PLANETOID_NAMES`] order: files given under a name must hold that dataset.
pub const PLANETOID_SIZES: [(usize, usize, usize); 3] = [(2_708, 1_433, 7), (3_327, 3_703, 6), (19_717, 500, 3)];

/// The raw file suffixes: file `k` is `ind.<name lowercased>.<PLANETOID_FILES[k]>`.
pub const PLANETOID_FILES: [&str; 8] = ["x", "tx", "allx", "y", "ty", "ally", "graph", "test.index"];

/// Which nodes train, validate and test.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Split {
    /// The fixed split of the Planetoid paper: 20 labelled nodes per class, 500 val, 1,000 test.
    Public,
    /// Public val/test; every other node trains.
    Full,
    /// Random per-class training nodes, then random val/test from the rest.
    Random { num_train_per_class: usize, num_val: usize, num_test: usize, seed: u64 },
}

/// The eight raw files of one dataset, as bytes, in [`PLANETOID_FILES`] order.
#[derive(Clone, Copy, Debug)]
pub struct PlanetoidRaw<'a> {
    pub x: &'a [u8],
    pub tx: &'a [u8],
    pub allx: &'a [u8],
    pub y: &'a [u8],
    pub ty: &'a [u8],
    pub ally: &'a [u8],
    pub graph: &'a [u8],
    pub test_index: &'a [u8],
}

/// The canonical spelling of a dataset name, case-insensitively; the error lists the
/// valid names.
pub fn canonical_name(name: &str) -> Result<&'static str> {
    PLANETOID_NAMES.iter().copied().find(|n| n.eq_ignore_ascii_case(name)).ok_or_else(|| {
        Error::data(format!("unknown Planetoid dataset '{name}'; valid names are {}", PLANETOID_NAMES.join(", ")))
    })
}

/// The raw file name for a dataset and suffix, e.g. `ind.cora.test.index`.
pub fn raw_file_name(name: &str, suffix: &str) -> String {
    format!("ind.{}.{}", name.to_ascii_lowercase(), suffix)
}

/// Loads a dataset from a directory holding the raw `ind.<name>.*` files (native only).
pub fn load_planetoid_dir(dir: &Path, name: &str, split: Split) -> Result<GraphData> {
    let canon = canonical_name(name)?;
    let mut files = Vec::with_capacity(PLANETOID_FILES.len());
    for suffix in PLANETOID_FILES {
        let path = dir.join(raw_file_name(canon, suffix));
        let bytes = std::fs::read(&path).map_err(|e| Error::data(format!("cannot read {}: {e}", path.display())))?;
        files.push(bytes);
    }
    load_planetoid_raw(canon, &raw_from_slices(&files), split)
}

/// Loads a dataset from fetched bytes (the wasm path). `files` is keyed by suffix (`"x"`,
/// `"tx"`, …, `"test.index"`) or by full file name (`"ind.cora.x"`).
pub fn load_planetoid_bytes(name: &str, files: &HashMap<String, Vec<u8>>, split: Split) -> Result<GraphData> {
    let canon = canonical_name(name)?;
    let mut slices = Vec::with_capacity(PLANETOID_FILES.len());
    for suffix in PLANETOID_FILES {
        let full = raw_file_name(canon, suffix);
        let bytes = files.get(suffix).or_else(|| files.get(&full)).ok_or_else(|| {
            Error::data(format!("missing file {full} (expected under key \"{suffix}\" or \"{full}\")"))
        })?;
        slices.push(bytes.as_slice());
    }
    load_planetoid_raw(canon, &raw_from_slices(&slices), split)
}

/// Checks that the files hold the dataset they are named as: its node, feature and class
/// counts as PyG knows them (PubMed's files under the name "Cora" are an error).
fn check_dataset_size(
    canon: &str,
    nodes: usize,
    features: usize,
    classes: usize,
    fallx: &str,
    fally: &str,
) -> Result<()> {
    let k = PLANETOID_NAMES.iter().position(|&n| n == canon).expect("a canonical name");
    let (want_nodes, want_features, want_classes) = PLANETOID_SIZES[k];
    let mut wrong = Vec::new();
    if nodes != want_nodes {
        wrong.push(format!("{nodes} nodes (allx + the test rows) where {canon} has {want_nodes}"));
    }
    if features != want_features {
        wrong.push(format!("{features} features ({fallx} columns) where {canon} has {want_features}"));
    }
    if classes != want_classes {
        wrong.push(format!("{classes} classes ({fally} columns) where {canon} has {want_classes}"));
    }
    if wrong.is_empty() {
        return Ok(());
    }
    let like = PLANETOID_SIZES
        .iter()
        .zip(PLANETOID_NAMES)
        .find(|(&(n, f, c), _)| (n, f, c) == (nodes, features, classes))
        .map_or(String::new(), |(_, name)| format!(" (these are {name}'s sizes: were {name}'s files given?)"));
    Err(Error::data(format!("{canon}: the raw files do not hold {canon}: they have {}{like}", wrong.join(", "))))
}

fn raw_from_slices<T: AsRef<[u8]>>(f: &[T]) -> PlanetoidRaw<'_> {
    PlanetoidRaw {
        x: f[0].as_ref(),
        tx: f[1].as_ref(),
        allx: f[2].as_ref(),
        y: f[3].as_ref(),
        ty: f[4].as_ref(),
        ally: f[5].as_ref(),
        graph: f[6].as_ref(),
        test_index: f[7].as_ref(),
    }
}

/// Assembles a dataset from its raw files; both loaders above end here.
pub fn load_planetoid_raw(name: &str, raw: &PlanetoidRaw<'_>, split: Split) -> Result<GraphData> {
    let canon = canonical_name(name)?;
    let file = |suffix: &str| raw_file_name(canon, suffix);
    let fx = file("x");
    let ftx = file("tx");
    let fallx = file("allx");
    let fy = file("y");
    let fty = file("ty");
    let fally = file("ally");

    let x = csr_from_value(&parse(raw.x, &fx)?, &fx)?;
    let tx = csr_from_value(&parse(raw.tx, &ftx)?, &ftx)?;
    let allx = csr_from_value(&parse(raw.allx, &fallx)?, &fallx)?;
    let y = labels(raw.y, &fy)?;
    let ty = labels(raw.ty, &fty)?;
    let ally = labels(raw.ally, &fally)?;
    let graph = adjacency_from_value(&parse(raw.graph, &file("graph"))?, &file("graph"))?;
    let ftest = file("test.index");
    let (test_index, test_lines) = parse_test_index(raw.test_index, &ftest)?;

    let shape_err = |what: String| Error::data(format!("{canon}: inconsistent raw files: {what}"));
    for (m, f) in [(&x, &fx), (&tx, &ftx)] {
        if m.ncols != allx.ncols {
            return Err(shape_err(format!("{f} has {} columns but {fallx} has {}", m.ncols, allx.ncols)));
        }
    }
    if x.nrows != y.rows {
        return Err(shape_err(format!("{fx} has {} rows but {fy} has {}", x.nrows, y.rows)));
    }
    if allx.nrows != ally.rows {
        return Err(shape_err(format!("{fallx} has {} rows but {fally} has {}", allx.nrows, ally.rows)));
    }
    if tx.nrows != ty.rows || tx.nrows != test_index.len() {
        return Err(shape_err(format!(
            "{ftx} has {} rows, {fty} {} rows and the test index {} entries",
            tx.nrows,
            ty.rows,
            test_index.len()
        )));
    }
    if ty.classes != ally.classes || y.classes != ally.classes {
        return Err(shape_err(format!(
            "label widths differ: {fy} {}, {fty} {}, {fally} {}",
            y.classes, ty.classes, ally.classes
        )));
    }
    if test_index.is_empty() {
        return Err(shape_err("the test index is empty".into()));
    }

    let mut sorted_test = test_index.clone();
    sorted_test.sort_unstable();
    if let Some(w) = sorted_test.windows(2).find(|w| w[0] == w[1]) {
        return Err(shape_err(format!("test index {} appears twice", w[0])));
    }
    let (t_min, t_max) = (sorted_test[0], *sorted_test.last().unwrap());
    // The line of the file holding `index` (for the error messages).
    let line_of = |index: usize| test_index.iter().position(|&t| t == index).map_or(0, |k| test_lines[k]);
    // CiteSeer: tx/ty widened to range(t_min, t_max + 1), rows without a test node zero.
    let ext_len = if canon == "CiteSeer" {
        let ext = t_max - t_min + 1;
        if ext > 2 * tx.nrows {
            return Err(Error::data(format!(
                "{ftest}: line {}: test index {t_max} would widen the test range {t_min}..={t_max} to {ext} rows for \
                 {} test rows (CiteSeer's missing test nodes are filled with zero rows, at most as many as the test \
                 rows)",
                line_of(t_max),
                tx.nrows
            )));
        }
        ext
    } else {
        tx.nrows
    };
    let num_nodes = allx.nrows + ext_len;
    if t_max >= num_nodes {
        let range = if canon == "CiteSeer" {
            format!("{} in {fallx} + {ext_len} in the test range {t_min}..={t_max}", allx.nrows)
        } else {
            format!("{} in {fallx} + {} in {ftx}", allx.nrows, tx.nrows)
        };
        return Err(Error::data(format!(
            "{ftest}: line {}: test index {t_max} is out of range for the {num_nodes} nodes ({range})",
            line_of(t_max)
        )));
    }

    check_dataset_size(canon, num_nodes, allx.ncols, ally.classes, &fallx, &fally)?;

    /// Where a row of the stacked matrices comes from.
    #[derive(Clone, Copy)]
    enum Src {
        All(usize),
        Test(usize),
        Zero,
    }
    let ext: Vec<Src> = if canon == "CiteSeer" {
        let mut ext = vec![Src::Zero; ext_len];
        for (k, &s) in sorted_test.iter().enumerate() {
            ext[s - t_min] = Src::Test(k);
        }
        ext
    } else {
        (0..tx.nrows).map(Src::Test).collect()
    };
    let stacked: Vec<Src> = (0..allx.nrows).map(Src::All).chain(ext).collect();
    let mut rows = stacked.clone();
    for (&t, &s) in test_index.iter().zip(&sorted_test) {
        rows[t] = stacked[s];
    }

    // Features: gather rows.
    let mut indptr = Vec::with_capacity(num_nodes + 1);
    indptr.push(0);
    let mut indices = Vec::with_capacity(allx.nnz() + tx.nnz());
    let mut values = Vec::with_capacity(allx.nnz() + tx.nnz());
    for &src in &rows {
        let (c, v) = match src {
            Src::All(i) => allx.row(i),
            Src::Test(k) => tx.row(k),
            Src::Zero => (&[][..], &[][..]),
        };
        indices.extend_from_slice(c);
        values.extend_from_slice(v);
        indptr.push(indices.len());
    }
    let features = CsrMatrix { nrows: num_nodes, ncols: allx.ncols, indptr, indices, values };

    // Labels.
    let label: Vec<i32> = rows
        .iter()
        .map(|&src| match src {
            Src::All(i) => ally.argmax[i],
            Src::Test(k) => ty.argmax[k],
            Src::Zero => 0,
        })
        .collect();
    let num_classes = label.iter().copied().max().unwrap_or(-1) as usize + 1;

    // Edges.
    let mut src = Vec::new();
    let mut dst = Vec::new();
    for (key, neighbours) in &graph {
        for &n in neighbours {
            for v in [*key, n] {
                if v < 0 || v as u64 >= num_nodes as u64 {
                    return Err(Error::data(format!(
                        "{}: node {v} in edge {key} -> {n} is out of range for {num_nodes} nodes",
                        file("graph")
                    )));
                }
            }
            src.push(*key as u32);
            dst.push(n as u32);
        }
    }
    let (src, dst) = remove_self_loops(&src, &dst);
    let (edge_src, edge_dst) = coalesce(num_nodes, &src, &dst, false);

    // Public split.
    let num_train = y.rows;
    if num_train + 500 > num_nodes {
        return Err(shape_err(format!("{num_train} training + 500 validation nodes exceed {num_nodes} nodes")));
    }
    let mut train_mask = vec![false; num_nodes];
    let mut val_mask = vec![false; num_nodes];
    let mut test_mask = vec![false; num_nodes];
    train_mask[..num_train].iter_mut().for_each(|m| *m = true);
    val_mask[num_train..num_train + 500].iter_mut().for_each(|m| *m = true);
    for &t in &test_index {
        test_mask[t] = true;
    }

    let mut data = GraphData {
        name: canon.to_string(),
        num_nodes,
        num_features: allx.ncols,
        num_classes,
        x: features,
        y: label,
        edge_src,
        edge_dst,
        train_mask,
        val_mask,
        test_mask,
    };
    apply_split(&mut data, &split);
    Ok(data)
}

/// Re-draws the masks of `data` for `split`, as `Planetoid(split=…)` does after loading
/// (`Public` leaves the masks as they are).
pub fn apply_split(data: &mut GraphData, split: &Split) {
    match *split {
        Split::Public => {}
        Split::Full => {
            for i in 0..data.num_nodes {
                data.train_mask[i] = !(data.val_mask[i] || data.test_mask[i]);
            }
        }
        Split::Random { num_train_per_class, num_val, num_test, seed } => {
            let mut rng = Rng::new(seed);
            data.train_mask.iter_mut().for_each(|m| *m = false);
            for c in 0..data.num_classes {
                let idx: Vec<usize> = (0..data.num_nodes).filter(|&i| data.y[i] == c as i32).collect();
                let perm = rng.permutation(idx.len());
                for &p in perm.iter().take(num_train_per_class) {
                    data.train_mask[idx[p]] = true;
                }
            }
            let remaining: Vec<usize> = (0..data.num_nodes).filter(|&i| !data.train_mask[i]).collect();
            let perm = rng.permutation(remaining.len());
            let order: Vec<usize> = perm.iter().map(|&p| remaining[p]).collect();
            data.val_mask.iter_mut().for_each(|m| *m = false);
            data.test_mask.iter_mut().for_each(|m| *m = false);
            let val_end = num_val.min(order.len());
            let test_end = num_val.saturating_add(num_test).min(order.len());
            for &i in &order[..val_end] {
                data.val_mask[i] = true;
            }
            for &i in &order[val_end..test_end] {
                data.test_mask[i] = true;
            }
        }
    }
}

/// One-hot label matrix reduced to its per-row argmax.
struct Labels {
    rows: usize,
    classes: usize,
    argmax: Vec<i32>,
}

fn labels(bytes: &[u8], file: &str) -> Result<Labels> {
    let a: NdArray = ndarray_from_value(&parse(bytes, file)?, file)?;
    if a.shape.len() != 2 || a.shape[1] == 0 {
        return Err(Error::data(format!("{file}: labels must be a 2-D one-hot matrix, have shape {:?}", a.shape)));
    }
    let (rows, classes) = (a.shape[0], a.shape[1]);
    let argmax = (0..rows)
        .map(|r| {
            // First maximum wins, like torch.max(dim=1).
            let mut best = 0;
            for c in 1..classes {
                if a.get2(r, c) > a.get2(r, best) {
                    best = c;
                }
            }
            best as i32
        })
        .collect();
    Ok(Labels { rows, classes, argmax })
}

/// `ind.<name>.test.index`: one non-negative integer per line; the indices and their
/// (1-based) line numbers.
fn parse_test_index(bytes: &[u8], file: &str) -> Result<(Vec<usize>, Vec<usize>)> {
    let text = std::str::from_utf8(bytes).map_err(|e| Error::data(format!("{file}: not UTF-8 text: {e}")))?;
    let mut out = (Vec::new(), Vec::new());
    for (i, l) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let shown: String = l.trim().chars().take(40).collect();
        let v = l
            .trim()
            .parse::<usize>()
            .map_err(|_| Error::data(format!("{file}: line {}: '{shown}' is not a node index", i + 1)))?;
        out.0.push(v);
        out.1.push(i + 1);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_case_insensitive() {
        assert_eq!(canonical_name("cora").unwrap(), "Cora");
        assert_eq!(canonical_name("CITESEER").unwrap(), "CiteSeer");
        assert_eq!(canonical_name("pubmed").unwrap(), "PubMed");
        let e = canonical_name("reddit").unwrap_err();
        assert!(e.to_string().contains("'reddit'") && e.to_string().contains("Cora, CiteSeer, PubMed"), "{e}");
        assert_eq!(raw_file_name("CiteSeer", "test.index"), "ind.citeseer.test.index");
    }

    #[test]
    fn test_index_parsing() {
        assert_eq!(parse_test_index(b"3\n1\r\n\n2\n", "f").unwrap(), (vec![3, 1, 2], vec![1, 2, 4]));
        let e = parse_test_index(b"3\nx\n", "ind.t.test.index").unwrap_err();
        assert_eq!(e.to_string(), "ind.t.test.index: line 2: 'x' is not a node index");
    }

    #[test]
    fn missing_bytes_are_named() {
        let files = HashMap::new();
        let e = load_planetoid_bytes("Cora", &files, Split::Public).unwrap_err();
        assert!(e.to_string().contains("missing file ind.cora.x"), "{e}");
        let e = load_planetoid_dir(Path::new("/nonexistent-dir"), "cora", Split::Public).unwrap_err();
        assert!(e.to_string().contains("/nonexistent-dir/ind.cora.x"), "{e}");
        let e = load_planetoid_bytes("Pubmeds", &files, Split::Public).unwrap_err();
        assert!(e.to_string().contains("valid names"), "{e}");
    }

    fn toy() -> GraphData {
        let n = 10;
        GraphData {
            name: "toy".into(),
            num_nodes: n,
            num_features: 1,
            num_classes: 2,
            x: CsrMatrix::from_triplets(n, 1, &[], &[], &[]),
            y: vec![0, 1, 0, 1, 0, 1, 0, 1, 0, 0],
            edge_src: vec![],
            edge_dst: vec![],
            train_mask: vec![true, true, false, false, false, false, false, false, false, false],
            val_mask: vec![false, false, true, true, false, false, false, false, false, false],
            test_mask: vec![false, false, false, false, true, true, true, false, false, false],
        }
    }

    #[test]
    fn full_split_trains_everything_else() {
        let mut g = toy();
        apply_split(&mut g, &Split::Full);
        assert_eq!(g.split_sizes(), (5, 2, 3));
        assert!(!g.train_mask[2] && !g.train_mask[4] && g.train_mask[0] && g.train_mask[9]);
    }

    #[test]
    fn random_split_is_seeded_and_disjoint() {
        let split = Split::Random { num_train_per_class: 2, num_val: 3, num_test: 10, seed: 5 };
        let mut a = toy();
        apply_split(&mut a, &split);
        let mut b = toy();
        apply_split(&mut b, &split);
        assert_eq!(a, b);
        // 2 per class train, 3 val, the remaining 3 test (asked for 10).
        assert_eq!(a.split_sizes(), (4, 3, 3));
        for c in 0..2 {
            assert_eq!((0..10).filter(|&i| a.train_mask[i] && a.y[i] == c).count(), 2);
        }
        for i in 0..10 {
            assert!([a.train_mask[i], a.val_mask[i], a.test_mask[i]].iter().filter(|&&m| m).count() <= 1);
        }
        let mut c = toy();
        apply_split(&mut c, &Split::Random { num_train_per_class: 2, num_val: 3, num_test: 10, seed: 6 });
        assert_ne!((a.train_mask, a.val_mask), (c.train_mask, c.val_mask));
    }
}
