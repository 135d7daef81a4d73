//! The trainer's configuration: [`TrainConfig`] (what the native example and tests build),
//! [`TrainConfigSpec`] (the options as a caller hands them over: a JS object, JSON), and
//! the rules both go through, with the limits that keep a constructor from running for
//! minutes or exhausting wasm's memory.
//!
//! | option | type | range | default |
//! |---|---|---|---|
//! | `epochs` | whole | 1 – [`MAX_EPOCHS`] | 200 |
//! | `layers` | whole | 1 – [`MAX_LAYERS`] | 7 |
//! | `hidden` | whole | 2 – [`MAX_HIDDEN`], divisible by `groups` | 160 |
//! | `groups` | whole | 2 – `hidden`, and `layers × groups` ≤ [`MAX_BLOCKS`] | 2 |
//! | `parts` | whole | 1 – [`MAX_PARTS`] and the number of nodes | 10 |
//! | `dropout` | number | 0 ≤ p < 1 | 0.5 |
//! | `lr` | number | 0 < lr ≤ [`MAX_LR`] | 0.003 |
//! | `weightDecay` | number | 0 – [`MAX_WEIGHT_DECAY`] | 0 |
//! | `optimizer` | string | `adam`, `adamw`, `sgd` | `adam` |
//! | `seed` | whole | 0 – 2^53 − 1 | 0 |
//! | `noRev` | boolean | | false |
//! | `half` | boolean | | false |
//!
//! and the model may have at most [`MAX_PARAMS`] trainable scalars; a training step and the
//! evaluation may keep at most [`MAX_ACTIVATION_BYTES`] of activations at once (checked on
//! the compiled graphs, before anything runs).

use crate::trace::check::{self, ArgError};
use crate::Error;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt;

/// The most epochs a trainer may be built for: the fixed part sizes are found by
/// simulating every epoch's shuffle up front (about 0.7 ms an epoch on PubMed natively).
pub const MAX_EPOCHS: usize = 5_000;
/// The most RevGNN layers (the RevGNN paper's deepest model has 1001).
pub const MAX_LAYERS: usize = 1_001;
/// The widest hidden layer.
pub const MAX_HIDDEN: usize = 4_096;
/// The most GNN blocks, `layers × groups`: each group of each layer is a block of its own
/// (its ops traced, differentiated and run one by one, for training and for evaluation), so
/// the constructor's and a step's work grow with this product, not with `hidden`. 4,096
/// holds the paper's 1,001 layers × 2 groups and 7 layers × 512 groups; 7 layers × 4,096
/// groups (each of one channel) is refused at once instead of tracing 600,000 ops.
pub const MAX_BLOCKS: usize = 4_096;
/// The most parts an epoch is cut into.
pub const MAX_PARTS: usize = 100_000;
/// The largest learning rate: larger steps only diverge.
pub const MAX_LR: f64 = 10.0;
/// The largest weight decay.
pub const MAX_WEIGHT_DECAY: f64 = 1.0;
/// The most trainable scalars (128 MiB of float32; Adam keeps two more copies, and the
/// gradients a third).
pub const MAX_PARAMS: usize = 1 << 25;
/// The most bytes of activations a training step or the evaluation may keep at once
/// (measured natively: PubMed, 112 layers without reversibility, 580 MiB).
pub const MAX_ACTIVATION_BYTES: usize = 1 << 30;
/// The largest raw dataset file handed over as bytes (PubMed's largest is 7.6 MB).
pub const MAX_FILE_BYTES: usize = 256 << 20;

/// The optimizer.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum OptimizerKind {
    Adam,
    AdamW,
    Sgd,
}

impl OptimizerKind {
    pub fn parse(s: &str) -> crate::Result<OptimizerKind> {
        match s.to_ascii_lowercase().as_str() {
            "adam" => Ok(OptimizerKind::Adam),
            "adamw" => Ok(OptimizerKind::AdamW),
            "sgd" => Ok(OptimizerKind::Sgd),
            _ => Err(Error::train(format!("unknown optimizer {s:?}: use adam, adamw or sgd"))),
        }
    }
}

/// Everything that defines a training run.
#[derive(Clone, Debug)]
pub struct TrainConfig {
    pub epochs: usize,
    pub layers: usize,
    pub hidden: usize,
    pub groups: usize,
    pub parts: usize,
    pub dropout: f32,
    pub lr: f32,
    pub weight_decay: f32,
    pub optimizer: OptimizerKind,
    pub seed: u64,
    pub no_rev: bool,
    /// Float16 weights (PyTorch's `model.half()`): every parameter and activation float16,
    /// the optimizer's update computed in float32 and rounded to half.
    pub half: bool,
}

impl Default for TrainConfig {
    /// The protocol of `examples/rev_gnn.py` on PubMed (200 epochs).
    fn default() -> Self {
        TrainConfig {
            epochs: 200,
            layers: 7,
            hidden: 160,
            groups: 2,
            parts: 10,
            dropout: 0.5,
            lr: 0.003,
            weight_decay: 0.0,
            optimizer: OptimizerKind::Adam,
            seed: 0,
            no_rev: false,
            half: false,
        }
    }
}

fn range(key: &str, ok: bool, want: &str, got: impl fmt::Display) -> Result<(), ArgError> {
    if ok {
        Ok(())
    } else {
        Err(ArgError::range(format!("{key} must be {want}, got {got}")))
    }
}

impl TrainConfig {
    /// Checks every option against its range and the limits above (the same rules for a
    /// JS config and a Rust caller); `num_nodes` bounds the parts. Model-size checks that
    /// need the data's widths are in [`TrainConfig::check_model_size`].
    pub fn check(&self, num_nodes: usize) -> Result<(), ArgError> {
        let n = |x: f32| check::js_number(x as f64);
        range("epochs", (1..=MAX_EPOCHS).contains(&self.epochs), &format!("from 1 to {MAX_EPOCHS}"), self.epochs)?;
        range("layers", (1..=MAX_LAYERS).contains(&self.layers), &format!("from 1 to {MAX_LAYERS}"), self.layers)?;
        range("hidden", (2..=MAX_HIDDEN).contains(&self.hidden), &format!("from 2 to {MAX_HIDDEN}"), self.hidden)?;
        // PyG's own words for too few groups.
        range(
            "groups",
            self.groups >= 2,
            "at least 2 (The number of groups should not be smaller than '2')",
            self.groups,
        )?;
        range("groups", self.groups <= self.hidden, "at most hidden", self.groups)?;
        // Joint with layers: the work is linear in layers × groups (see MAX_BLOCKS).
        if self.layers.saturating_mul(self.groups) > MAX_BLOCKS {
            return Err(ArgError::range(format!(
                "groups must be at most {} for {} layers (layers × groups, the GNN blocks, at most {MAX_BLOCKS}), got {}",
                MAX_BLOCKS / self.layers,
                self.layers,
                self.groups
            )));
        }
        if !self.hidden.is_multiple_of(self.groups) {
            return Err(ArgError::range(format!(
                "hidden must be divisible by groups, got hidden {} and groups {}: it is not divisible",
                self.hidden, self.groups
            )));
        }
        let max_parts = MAX_PARTS.min(num_nodes);
        range(
            "parts",
            (1..=max_parts).contains(&self.parts),
            &format!("from 1 to {max_parts} (the nodes)"),
            self.parts,
        )?;
        range("dropout", (0.0..1.0).contains(&self.dropout), "at least 0 and below 1", n(self.dropout))?;
        range(
            "lr",
            self.lr > 0.0 && self.lr as f64 <= MAX_LR,
            &format!("above 0 and at most {MAX_LR} (larger steps only diverge)"),
            n(self.lr),
        )?;
        range(
            "weightDecay",
            (0.0..=MAX_WEIGHT_DECAY).contains(&(self.weight_decay as f64)),
            &format!("from 0 to {MAX_WEIGHT_DECAY}"),
            n(self.weight_decay),
        )?;
        range("seed", self.seed <= check::MAX_SEED, &format!("at most {}", check::MAX_SEED), self.seed)?;
        Ok(())
    }

    /// Trainable scalars of the RevGNN this config builds on `in_channels` features and
    /// `out_channels` classes: lin1 (weight and bias), per layer and group a GnnBlock
    /// (LayerNorm weight and bias, SAGEConv `lin_l` with bias and `lin_r` without, each
    /// `c × c` for `c = hidden / groups`), the final LayerNorm, and lin2. A unit test
    /// checks it against the built model. `None` when the count overflows.
    pub fn param_count(&self, in_channels: usize, out_channels: usize) -> Option<u128> {
        let (h, g, l) = (self.hidden as u128, self.groups.max(1) as u128, self.layers as u128);
        let c = h / g;
        let lin1 = (in_channels as u128).checked_mul(h)?.checked_add(h)?;
        let block = 2 * c + 2 * c * c + c;
        let convs = l.checked_mul(g)?.checked_mul(block)?;
        let lin2 = h.checked_mul(out_channels as u128)?.checked_add(out_channels as u128)?;
        lin1.checked_add(convs)?.checked_add(2 * h)?.checked_add(lin2)
    }

    /// Checks the model's size before anything is built: at most [`MAX_PARAMS`] scalars.
    pub fn check_model_size(&self, in_channels: usize, out_channels: usize) -> Result<(), ArgError> {
        let count = self.param_count(in_channels, out_channels);
        if count.is_none_or(|c| c > MAX_PARAMS as u128) {
            let got = count.map_or("more than 2^128".to_string(), |c| c.to_string());
            return Err(ArgError::range(format!(
                "this RevGNN ({} layers, hidden {}, {} groups, {in_channels} features) would have {got} parameters, more \
                 than the limit of {MAX_PARAMS}: use fewer layers or a smaller hidden size",
                self.layers, self.hidden, self.groups
            )));
        }
        Ok(())
    }
}

/// One option's value as a caller gave it, before validation.
#[derive(Clone, Debug, PartialEq)]
pub enum ConfigValue {
    Number(f64),
    Text(String),
    Bool(bool),
    /// Anything else, described for the error message ("an array", "an object", "a function").
    Other(String),
}

impl ConfigValue {
    fn describe(&self) -> String {
        match self {
            ConfigValue::Number(x) => format!("the number {}", check::js_number(*x)),
            ConfigValue::Text(s) if s.chars().count() > 40 => {
                format!("a string of {} characters", s.chars().count())
            }
            ConfigValue::Text(s) => format!("the string {s:?}"),
            ConfigValue::Bool(b) => format!("the boolean {b}"),
            ConfigValue::Other(what) => what.clone(),
        }
    }
}

impl<'de> Deserialize<'de> for ConfigValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = ConfigValue;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a trainer option's value")
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<ConfigValue, E> {
                Ok(ConfigValue::Bool(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<ConfigValue, E> {
                Ok(ConfigValue::Number(v as f64))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<ConfigValue, E> {
                Ok(ConfigValue::Number(v as f64))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<ConfigValue, E> {
                Ok(ConfigValue::Number(v))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<ConfigValue, E> {
                Ok(ConfigValue::Text(v.to_string()))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<ConfigValue, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(ConfigValue::Other("an array".into()))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ConfigValue, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(ConfigValue::Other("an object".into()))
            }
        }
        d.deserialize_any(V)
    }
}

/// The trainer's options as a caller hands them over (a JS object, JSON): names to values of
/// any type; absent or null options take their defaults. [`TrainConfigSpec::to_config`]
/// checks names, types and ranges.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(transparent)]
pub struct TrainConfigSpec {
    pub options: BTreeMap<String, Option<ConfigValue>>,
}

const OPTIONS: [&str; 12] = [
    "epochs",
    "layers",
    "hidden",
    "groups",
    "parts",
    "dropout",
    "lr",
    "weightDecay",
    "optimizer",
    "seed",
    "noRev",
    "half",
];

impl TrainConfigSpec {
    /// The configuration, or an error naming the option (`config.lr`), what it must be and
    /// what it was: a [`check::ArgErrorKind::Type`] error for a wrong type, `Range` for a
    /// value out of range, `Value` for an unknown option or optimizer.
    pub fn to_config(&self, num_nodes: usize) -> Result<TrainConfig, ArgError> {
        if let Some(k) = self.options.keys().find(|k| !OPTIONS.contains(&k.as_str())) {
            let shown = if k.chars().count() > 40 {
                format!("{:?}…", k.chars().take(40).collect::<String>())
            } else {
                format!("{k:?}")
            };
            return Err(ArgError::value(format!(
                "config has no option {shown}: the options are {}",
                OPTIONS.join(", ")
            )));
        }
        let get = |k: &str| self.options.get(k).and_then(|v| v.as_ref());
        let number = |k: &str| -> Result<Option<f64>, ArgError> {
            match get(k) {
                None => Ok(None),
                Some(ConfigValue::Number(x)) => Ok(Some(*x)),
                Some(v) => Err(ArgError::type_(format!("config.{k} must be a number, got {}", v.describe()))),
            }
        };
        let whole = |k: &str, max: u64, default: u64| -> Result<u64, ArgError> {
            match number(k)? {
                None => Ok(default),
                Some(x) => check::whole(x, &format!("config.{k}"), max),
            }
        };
        // Every max below fits in usize, even on wasm32.
        let count = |k: &str, max: usize, default: usize| whole(k, max as u64, default as u64).map(|v| v as usize);
        let finite = |k: &str, default: f32| -> Result<f32, ArgError> {
            match number(k)? {
                None => Ok(default),
                Some(x) if x.is_finite() => Ok(x as f32),
                Some(x) => Err(ArgError::range(format!("config.{k} must be finite, got {}", check::js_number(x)))),
            }
        };
        let d = TrainConfig::default();
        let optimizer = match get("optimizer") {
            None => d.optimizer,
            Some(ConfigValue::Text(s)) if s.len() <= 40 => {
                OptimizerKind::parse(s).map_err(|e| ArgError::value(format!("config.optimizer: {e}")))?
            }
            Some(ConfigValue::Text(_)) => {
                return Err(ArgError::value("config.optimizer: use adam, adamw or sgd".into()))
            }
            Some(v) => {
                return Err(ArgError::type_(format!(
                    "config.optimizer must be a string (adam, adamw or sgd), got {}",
                    v.describe()
                )))
            }
        };
        let flag = |k: &str, default: bool| match get(k) {
            None => Ok(default),
            Some(ConfigValue::Bool(b)) => Ok(*b),
            Some(v) => Err(ArgError::type_(format!("config.{k} must be a boolean, got {}", v.describe()))),
        };
        let (no_rev, half) = (flag("noRev", d.no_rev)?, flag("half", d.half)?);
        let cfg = TrainConfig {
            epochs: count("epochs", MAX_EPOCHS, d.epochs)?,
            layers: count("layers", MAX_LAYERS, d.layers)?,
            hidden: count("hidden", MAX_HIDDEN, d.hidden)?,
            groups: count("groups", MAX_HIDDEN, d.groups)?,
            parts: count("parts", MAX_PARTS, d.parts)?,
            dropout: finite("dropout", d.dropout)?,
            lr: finite("lr", d.lr)?,
            weight_decay: finite("weightDecay", d.weight_decay)?,
            optimizer,
            seed: whole("seed", check::MAX_SEED, d.seed)?,
            no_rev,
            half,
        };
        cfg.check(num_nodes).map_err(|e| ArgError { message: format!("config.{}", e.message), ..e })?;
        Ok(cfg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::check::ArgErrorKind;

    fn spec(json: &str) -> TrainConfigSpec {
        serde_json::from_str(json).unwrap()
    }

    fn err(json: &str) -> ArgError {
        spec(json).to_config(1000).unwrap_err()
    }

    #[test]
    fn an_empty_spec_is_the_default_and_options_are_read() {
        let c = spec("{}").to_config(1000).unwrap();
        assert_eq!((c.epochs, c.layers, c.hidden, c.lr), (200, 7, 160, 0.003));
        let c = spec(
            r#"{"epochs": 3, "lr": 0.01, "optimizer": "AdamW", "noRev": true, "seed": 9007199254740991,
                         "weightDecay": null}"#,
        )
        .to_config(1000)
        .unwrap();
        assert_eq!(
            (c.epochs, c.lr, c.optimizer, c.no_rev, c.seed),
            (3, 0.01, OptimizerKind::AdamW, true, (1 << 53) - 1)
        );
    }

    #[test]
    fn hangs_and_huge_models_are_bounded_with_the_limit_named() {
        let e = err(r#"{"epochs": 1e6}"#);
        assert_eq!(
            (e.kind, e.message.as_str()),
            (ArgErrorKind::Range, "config.epochs must be at most 5000, got 1000000")
        );
        let e = err(r#"{"layers": 1e5}"#);
        assert_eq!(e.message, "config.layers must be at most 1001, got 100000");
        assert!(err(r#"{"hidden": 1e9}"#).message.contains("at most 4096"));
        assert!(err(r#"{"parts": 5000}"#)
            .message
            .contains("config.parts must be from 1 to 1000 (the nodes), got 5000"));
        let e =
            TrainConfig { layers: 1000, hidden: 4096, ..TrainConfig::default() }.check_model_size(500, 3).unwrap_err();
        assert!(
            e.message.contains("would have") && e.message.contains("more than the limit of 33554432"),
            "{}",
            e.message
        );
        assert!(TrainConfig::default().check_model_size(500, 3).is_ok());
        // hidden 4096 and groups 4096 are each within their limits, but 7 × 4096 blocks
        // would trace 600,000 ops: refused at once, naming the joint limit.
        let e = err(r#"{"hidden": 4096, "groups": 4096}"#);
        assert_eq!(
            (e.kind, e.message.as_str()),
            (
                ArgErrorKind::Range,
                "config.groups must be at most 585 for 7 layers (layers × groups, the GNN blocks, at most 4096), got 4096"
            )
        );
        let e = err(r#"{"layers": 1001, "groups": 8, "hidden": 64}"#);
        assert!(e.message.starts_with("config.groups must be at most 4 for 1001 layers"), "{}", e.message);
        // The paper's 1001 layers × 2 groups and 7 layers × 512 groups stay allowed.
        assert!(spec(r#"{"layers": 1001, "groups": 2}"#).to_config(1000).is_ok());
        assert!(spec(r#"{"hidden": 4096, "groups": 512}"#).to_config(1000).is_ok());
        assert!(spec(r#"{"layers": 1, "hidden": 4096, "groups": 4096}"#).to_config(1000).is_ok());
    }

    #[test]
    fn hyper_parameters_are_finite_and_in_range() {
        for (json, want) in [
            (r#"{"lr": -0.1}"#, "config.lr must be above 0 and at most 10 (larger steps only diverge), got -0.1"),
            (r#"{"lr": 0}"#, "config.lr must be above 0"),
            (r#"{"lr": 11}"#, "got 11"),
            (r#"{"dropout": 1}"#, "config.dropout must be at least 0 and below 1, got 1"),
            (r#"{"weightDecay": -1}"#, "config.weightDecay must be from 0 to 1, got -1"),
            (
                r#"{"groups": 1}"#,
                "config.groups must be at least 2 (The number of groups should not be smaller than '2'), got 1",
            ),
            (r#"{"groups": 320}"#, "config.groups must be at most hidden, got 320"),
            (r#"{"hidden": 7}"#, "not divisible"),
        ] {
            let e = err(json);
            assert_eq!(e.kind, ArgErrorKind::Range, "{json}");
            assert!(e.message.contains(want), "{json}: {}", e.message);
        }
        // JSON has no NaN or Infinity: the JS API hands them over as numbers.
        let mut s = TrainConfigSpec::default();
        for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            s.options.clear();
            s.options.insert("lr".into(), Some(ConfigValue::Number(bad)));
            let e = s.to_config(1000).unwrap_err();
            assert_eq!(e.kind, ArgErrorKind::Range);
            assert!(e.message.starts_with("config.lr must be finite, got "), "{}", e.message);
            s.options.clear();
            s.options.insert("epochs".into(), Some(ConfigValue::Number(bad)));
            assert_eq!(s.to_config(1000).unwrap_err().kind, ArgErrorKind::Type);
        }
    }

    #[test]
    fn wrong_types_and_unknown_names_are_named() {
        let e = err(r#"{"optimizer": 42}"#);
        assert_eq!(e.kind, ArgErrorKind::Type);
        assert_eq!(e.message, "config.optimizer must be a string (adam, adamw or sgd), got the number 42");
        assert!(spec(r#"{"half": true}"#).to_config(1000).unwrap().half);
        assert!(!spec("{}").to_config(1000).unwrap().half);
        let h = err(r#"{"half": 1}"#);
        assert_eq!(
            (h.kind, h.message.as_str()),
            (ArgErrorKind::Type, "config.half must be a boolean, got the number 1")
        );
        let e = err(r#"{"noRev": "yes"}"#);
        assert_eq!(
            (e.kind, e.message.as_str()),
            (ArgErrorKind::Type, "config.noRev must be a boolean, got the string \"yes\"")
        );
        let e = err(r#"{"epochs": "4"}"#);
        assert_eq!(e.message, "config.epochs must be a number, got the string \"4\"");
        assert_eq!(err(r#"{"epochs": 4.5}"#).message, "config.epochs must be a whole number, got 4.5");
        assert_eq!(err(r#"{"epochs": -1}"#).message, "config.epochs must not be negative, got -1");
        assert_eq!(err(r#"{"lr": [1]}"#).message, "config.lr must be a number, got an array");
        assert_eq!(err(r#"{"lr": {"a": 1}}"#).message, "config.lr must be a number, got an object");
        let e = err(r#"{"optimizer": "adagrad"}"#);
        assert_eq!(
            (e.kind, e.message.as_str()),
            (ArgErrorKind::Value, "config.optimizer: unknown optimizer \"adagrad\": use adam, adamw or sgd")
        );
        let e = err(r#"{"epoch": 3}"#);
        assert!(
            e.message.starts_with("config has no option \"epoch\": the options are epochs, layers"),
            "{}",
            e.message
        );
    }
}
