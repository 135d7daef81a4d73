//! The one entry point for datasets: [`planetoid`] loads Cora, CiteSeer or PubMed from a
//! directory (native) or from the raw files' bytes (fetched in a browser, read in Node),
//! draws the split and applies the transforms, as PyG's
//! `Planetoid(root, name, split=…, transform=T.Compose([...]))` does. The Rust example, the
//! trainer's JavaScript preset and the JavaScript `datasets.Planetoid` all load through it;
//! [`PlanetoidOptions`] is their configuration, read from JSON (camelCase) by serde.

use super::graph::GraphData;
use super::planetoid::{load_planetoid_bytes, load_planetoid_dir, Split};
use super::transforms::{add_self_loops, normalize_features, to_undirected};
use crate::{Error, Result};
use serde::Deserialize;
use std::collections::HashMap;
use std::path::Path;

/// Where the eight raw files come from.
#[derive(Clone, Copy, Debug)]
pub enum Source<'a> {
    /// A directory holding `ind.<name>.<suffix>` (native only).
    Dir(&'a Path),
    /// The files' bytes, keyed by suffix (`"x"`, …, `"test.index"`) or by full file name.
    Files(&'a HashMap<String, Vec<u8>>),
}

/// PyG's `split` argument.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SplitName {
    #[default]
    Public,
    Full,
    Random,
}

/// A transform of `torch_geometric.transforms`, applied in the order given (`T.Compose`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
pub enum Transform {
    AddSelfLoops,
    NormalizeFeatures,
    ToUndirected,
}

impl Transform {
    /// Applies the transform in place.
    pub fn apply(self, data: &mut GraphData) {
        match self {
            Transform::AddSelfLoops => add_self_loops(data),
            Transform::NormalizeFeatures => normalize_features(data),
            Transform::ToUndirected => to_undirected(data),
        }
    }
}

/// `Planetoid(…)`'s options, as JSON: `{ split: "public"|"full"|"random",
/// numTrainPerClass: 20, numVal: 500, numTest: 1000, seed: 0, transform: ["AddSelfLoops", …] }`
/// (the counts and the seed only for the random split); unknown keys are errors.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct PlanetoidOptions {
    pub split: SplitName,
    pub num_train_per_class: usize,
    pub num_val: usize,
    pub num_test: usize,
    pub seed: u64,
    pub transform: Vec<Transform>,
}

impl Default for PlanetoidOptions {
    fn default() -> Self {
        PlanetoidOptions {
            split: SplitName::Public,
            num_train_per_class: 20,
            num_val: 500,
            num_test: 1000,
            seed: 0,
            transform: Vec::new(),
        }
    }
}

impl PlanetoidOptions {
    /// The protocol of PyG's `examples/rev_gnn.py` on Planetoid: the full split, self loops.
    pub fn rev_gnn() -> PlanetoidOptions {
        PlanetoidOptions { split: SplitName::Full, transform: vec![Transform::AddSelfLoops], ..Default::default() }
    }

    /// Options from JSON text; the error names the option.
    pub fn from_json(json: &str) -> Result<PlanetoidOptions> {
        let o: PlanetoidOptions = serde_json::from_str(json).map_err(|e| {
            // serde_json's position refers to the JSON text the caller never wrote.
            let msg = e.to_string();
            let msg = msg.split(" at line ").next().unwrap_or(&msg).to_string();
            Error::data(format!("Planetoid options: {msg}"))
        })?;
        if o.split != SplitName::Random && (o.num_train_per_class, o.num_val, o.num_test, o.seed) != (20, 500, 1000, 0)
        {
            return Err(Error::data(
                "Planetoid options: numTrainPerClass, numVal, numTest and seed apply to split \"random\" only",
            ));
        }
        if o.seed > crate::trace::check::MAX_SEED {
            return Err(Error::data(format!(
                "Planetoid options: seed must be at most {}, got {}",
                crate::trace::check::MAX_SEED,
                o.seed
            )));
        }
        Ok(o)
    }

    /// The core's [`Split`].
    pub fn split(&self) -> Split {
        match self.split {
            SplitName::Public => Split::Public,
            SplitName::Full => Split::Full,
            SplitName::Random => Split::Random {
                num_train_per_class: self.num_train_per_class,
                num_val: self.num_val,
                num_test: self.num_test,
                seed: self.seed,
            },
        }
    }
}

/// Loads Planetoid dataset `name` (case-insensitive) from `source`, with the split and the
/// transforms of `options`.
pub fn planetoid(name: &str, source: Source<'_>, options: &PlanetoidOptions) -> Result<GraphData> {
    let split = options.split();
    let mut data = match source {
        Source::Dir(dir) => load_planetoid_dir(dir, name, split)?,
        Source::Files(files) => load_planetoid_bytes(name, files, split)?,
    };
    for t in &options.transform {
        t.apply(&mut data);
    }
    Ok(data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_parse_with_defaults_and_name_mistakes() {
        assert_eq!(PlanetoidOptions::from_json("{}").unwrap(), PlanetoidOptions::default());
        let o = PlanetoidOptions::from_json(r#"{"split": "full", "transform": ["AddSelfLoops"]}"#).unwrap();
        assert_eq!(o, PlanetoidOptions::rev_gnn());
        let o = PlanetoidOptions::from_json(r#"{"split": "random", "numVal": 10, "seed": 3}"#).unwrap();
        assert_eq!(o.split(), Split::Random { num_train_per_class: 20, num_val: 10, num_test: 1000, seed: 3 });
        let e = PlanetoidOptions::from_json(r#"{"splt": "full"}"#).unwrap_err().to_string();
        assert!(e.starts_with("Planetoid options: unknown field `splt`, expected one of `split`"), "{e}");
        let e = PlanetoidOptions::from_json(r#"{"split": "geom-gcn"}"#).unwrap_err().to_string();
        assert!(e.contains("unknown variant `geom-gcn`, expected one of `public`, `full`, `random`"), "{e}");
        let e = PlanetoidOptions::from_json(r#"{"transform": ["AddSelfLoop"]}"#).unwrap_err().to_string();
        assert!(e.contains("unknown variant `AddSelfLoop`"), "{e}");
        let e = PlanetoidOptions::from_json(r#"{"numVal": 3}"#).unwrap_err().to_string();
        assert!(e.contains("apply to split \"random\" only"), "{e}");
        let e = PlanetoidOptions::from_json(r#"{"split": "random", "numVal": -3}"#).unwrap_err().to_string();
        assert!(e.contains("invalid value: integer `-3`"), "{e}");
    }

    #[test]
    fn missing_files_are_named() {
        let files = HashMap::new();
        let e = planetoid("Cora", Source::Files(&files), &PlanetoidOptions::default()).unwrap_err().to_string();
        assert!(e.contains("missing file ind.cora.x"), "{e}");
    }
}
