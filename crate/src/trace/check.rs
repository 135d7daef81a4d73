//! Checks on what callers outside Rust hand the tracer (the JavaScript API): whole numbers,
//! names, and the limits on them. The JS layer only turns JS values into Rust ones (and
//! says which argument it was); the rules and limits live here, once, and the tracer
//! applies the same ones to Rust callers.
//!
//! Limits (stated in the README and the npm package's `.d.ts` too):
//! - one tensor: at most [`MAX_TENSOR_BYTES`] bytes and [`MAX_RANK`] dimensions
//!   (`tensor::alloc`);
//! - names (inputs, parameters, buffers, modules, Blocks): 1 to [`MAX_NAME_BYTES`] bytes of
//!   UTF-8, no control characters and no line or paragraph separators (a name is printed on
//!   one line of the graph);
//! - IPU index: 0 to [`MAX_IPU`] (the planner applies PopTorch's own 64-IPU rule);
//! - nodes in one trace: [`MAX_NODES`]; items in one list from JS (`Sequential`, `concat`,
//!   submodules of a model): [`MAX_LIST`]; inputs of one trace: [`MAX_INPUTS`]; nesting
//!   of submodules: [`MAX_MODULE_DEPTH`]; layers of `traceMlp`: [`MAX_MLP_LAYERS`], and
//!   bytes of its parameters: [`MAX_MLP_BYTES`].

use std::fmt;

pub use crate::tensor::alloc::{MAX_RANK, MAX_TENSOR_BYTES};

/// The longest name, in bytes of UTF-8.
pub const MAX_NAME_BYTES: usize = 256;
/// The largest IPU index a Block may name.
pub const MAX_IPU: u64 = 65_535;
/// The most nodes one trace may record (all regions together).
pub const MAX_NODES: usize = 1_000_000;
/// The most items in one list handed over from JavaScript.
pub const MAX_LIST: usize = 65_536;
/// The most inputs one trace may declare.
pub const MAX_INPUTS: usize = 1_024;
/// The deepest nesting of submodules in a JS model.
pub const MAX_MODULE_DEPTH: usize = 64;
/// The most layers (`sizes.length - 1`) of a traced MLP.
pub const MAX_MLP_LAYERS: usize = 1_024;
/// The most bytes of parameters a traced MLP may have (1 GiB: every layer may be within
/// the tensor limit while all of them together would fill wasm's memory).
pub const MAX_MLP_BYTES: usize = 1 << 30;
/// The largest seed (JavaScript's `Number.MAX_SAFE_INTEGER`: every whole number up to it is exact).
pub const MAX_SEED: u64 = (1 << 53) - 1;

/// What was wrong with a value from outside: its type (JS `TypeError`), its range (JS
/// `RangeError`) or its content (a plain `Error`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgErrorKind {
    Type,
    Range,
    Value,
}

/// A rejected argument; the message names the argument and the value.
#[derive(Clone, Debug, PartialEq)]
pub struct ArgError {
    pub kind: ArgErrorKind,
    pub message: String,
}

impl ArgError {
    /// The message is capped at [`crate::error::MAX_MESSAGE_BYTES`], as every error's.
    pub fn type_(message: String) -> ArgError {
        ArgError { kind: ArgErrorKind::Type, message: crate::error::cap(message) }
    }
    pub fn range(message: String) -> ArgError {
        ArgError { kind: ArgErrorKind::Range, message: crate::error::cap(message) }
    }
    pub fn value(message: String) -> ArgError {
        ArgError { kind: ArgErrorKind::Value, message: crate::error::cap(message) }
    }
}

/// A rejected argument as the crate's error, of kind `Arg` (its JS class is dropped: the
/// API edge throws an `ArgError` itself where the class matters).
impl From<ArgError> for crate::Error {
    fn from(e: ArgError) -> crate::Error {
        crate::Error::new(crate::ErrorKind::Arg, e.message)
    }
}

impl fmt::Display for ArgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// A number as JavaScript prints it (`NaN`, `Infinity`, `4.7`, `1000000000`).
pub fn js_number(x: f64) -> String {
    if x.is_nan() {
        "NaN".into()
    } else if x.is_infinite() {
        if x > 0.0 { "Infinity" } else { "-Infinity" }.into()
    } else {
        format!("{x}")
    }
}

/// A whole number from 0 to `max`: fractions, NaN and infinities are type errors ("must be a
/// whole number"), negatives and values above `max` range errors.
pub fn whole(x: f64, what: &str, max: u64) -> Result<u64, ArgError> {
    if !x.is_finite() || x.fract() != 0.0 {
        return Err(ArgError::type_(format!("{what} must be a whole number, got {}", js_number(x))));
    }
    if x < 0.0 {
        return Err(ArgError::range(format!("{what} must not be negative, got {}", js_number(x))));
    }
    if x > max as f64 {
        return Err(ArgError::range(format!("{what} must be at most {max}, got {}", js_number(x))));
    }
    Ok(x as u64)
}

/// A whole number from `min` to `max` (either sign).
pub fn integer(x: f64, what: &str, min: i64, max: i64) -> Result<i64, ArgError> {
    if !x.is_finite() || x.fract() != 0.0 {
        return Err(ArgError::type_(format!("{what} must be a whole number, got {}", js_number(x))));
    }
    if x < min as f64 || x > max as f64 {
        return Err(ArgError::range(format!("{what} must be from {min} to {max}, got {}", js_number(x))));
    }
    Ok(x as i64)
}

/// A name that prints on one line: 1 to [`MAX_NAME_BYTES`] bytes, no control characters
/// (`\n`, `\r`, `\t`, NUL, …) and no Unicode line or paragraph separators.
pub fn name(what: &str, s: &str) -> Result<(), ArgError> {
    if s.is_empty() {
        return Err(ArgError::value(format!("{what} must not be empty")));
    }
    if s.len() > MAX_NAME_BYTES {
        return Err(ArgError::value(format!(
            "{what} is {} bytes long, more than the limit of {MAX_NAME_BYTES}",
            s.len()
        )));
    }
    if let Some(c) = s.chars().find(|&c| c.is_control() || c == '\u{2028}' || c == '\u{2029}') {
        return Err(ArgError::value(format!(
            "{what} {s:?} contains the character U+{:04X}: names may not hold control characters or line breaks",
            c as u32
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_numbers_are_checked_for_type_and_range() {
        assert_eq!(whole(4.0, "n", 10), Ok(4));
        assert_eq!(whole(0.0, "n", 10), Ok(0));
        assert_eq!(whole(-0.0, "n", 10), Ok(0));
        for bad in [4.7, f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            let e = whole(bad, "in_features", 10).unwrap_err();
            assert_eq!(e.kind, ArgErrorKind::Type, "{bad}");
            assert!(e.message.starts_with("in_features must be a whole number, got "), "{}", e.message);
        }
        assert_eq!(whole(4.7, "n", 10).unwrap_err().message, "n must be a whole number, got 4.7");
        assert_eq!(whole(f64::NAN, "n", 10).unwrap_err().message, "n must be a whole number, got NaN");
        let e = whole(-1.0, "batch", 10).unwrap_err();
        assert_eq!((e.kind, e.message.as_str()), (ArgErrorKind::Range, "batch must not be negative, got -1"));
        let e = whole(1e9, "ipu", MAX_IPU).unwrap_err();
        assert_eq!((e.kind, e.message.as_str()), (ArgErrorKind::Range, "ipu must be at most 65535, got 1000000000"));
        assert_eq!(whole(MAX_SEED as f64, "seed", MAX_SEED), Ok(MAX_SEED));
        assert_eq!(integer(-2.0, "dim", -16, 16), Ok(-2));
        assert_eq!(integer(-17.0, "dim", -16, 16).unwrap_err().kind, ArgErrorKind::Range);
        assert_eq!(integer(0.5, "dim", -16, 16).unwrap_err().kind, ArgErrorKind::Type);
    }

    #[test]
    fn names_print_on_one_line() {
        assert!(name("input name", "x").is_ok());
        assert!(name("input name", "encoder.layers.0 ünïcode").is_ok());
        for bad in ["x\ny", "x\r", "\t", "a\u{0}", "a\u{85}b", "a\u{2028}", "a\u{1b}[31m"] {
            let e = name("input name", bad).unwrap_err();
            assert_eq!(e.kind, ArgErrorKind::Value);
            assert!(e.message.contains("control characters or line breaks"), "{}", e.message);
            assert!(!e.message.contains('\n'), "the message itself stays on one line");
        }
        assert!(name("input name", "").unwrap_err().message.contains("must not be empty"));
        let long = "a".repeat(MAX_NAME_BYTES + 1);
        assert!(name("input name", &long).unwrap_err().message.contains("257 bytes long"));
        assert!(name("input name", &"a".repeat(MAX_NAME_BYTES)).is_ok());
    }
}
