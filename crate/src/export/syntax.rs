//! Python's spelling of the values the exported code holds: dtypes, float and string
//! literals, tuples of sizes, identifiers and the path to a parameter or buffer. The
//! statement writers (`python.rs`, `leaves.rs`, `poptorch.rs`, `script.rs`) share these.

use crate::ir::InputKind;
use crate::tensor::DType;
use std::collections::HashSet;

/// Python's spelling of a dtype.
pub fn dtype(d: DType) -> &'static str {
    match d {
        DType::Float32 => "torch.float32",
        DType::Float16 => "torch.float16",
        DType::Int32 => "torch.int32",
        DType::Bool => "torch.bool",
    }
}

/// A float as a Python literal that reads back as the same float32 (Rust's shortest
/// round-trip form), `float('inf')` and `float('nan')` for the others.
pub fn f32_lit(x: f32) -> String {
    f64_lit_of(x.is_nan(), x.is_infinite(), x.is_sign_negative(), format!("{x:?}"))
}

/// A double as a Python literal.
pub fn f64_lit(x: f64) -> String {
    f64_lit_of(x.is_nan(), x.is_infinite(), x.is_sign_negative(), format!("{x:?}"))
}

fn f64_lit_of(nan: bool, inf: bool, neg: bool, text: String) -> String {
    match (nan, inf, neg) {
        (true, _, _) => "float('nan')".into(),
        (_, true, false) => "float('inf')".into(),
        (_, true, true) => "-float('inf')".into(),
        _ => text,
    }
}

/// A Python string literal (JSON's escapes are Python's).
pub fn str_lit(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "''".into())
}

/// `(a, b)` for a tuple of sizes (`(a,)` for one, `()` for none).
pub fn tuple(xs: &[usize]) -> String {
    match xs.len() {
        1 => format!("({},)", xs[0]),
        _ => format!("({})", xs.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(", ")),
    }
}

const KEYWORDS: &[&str] = &[
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue", "def", "del",
    "elif", "else", "except", "finally", "for", "from", "global", "if", "import", "in", "is", "lambda", "nonlocal",
    "not", "or", "pass", "raise", "return", "try", "while", "with", "yield", "self", "torch", "F", "poptorch", "dev",
];

/// Whether `s` is a plain Python identifier (ASCII letters, digits, `_`; not a keyword).
pub fn is_ident(s: &str) -> bool {
    let mut c = s.chars();
    matches!(c.next(), Some(ch) if ch.is_ascii_alphabetic() || ch == '_')
        && c.all(|ch| ch.is_ascii_alphanumeric() || ch == '_')
        && !KEYWORDS.contains(&s)
}

/// A Python identifier made from `s` (other characters become `_`), not yet in `used`.
pub fn fresh_ident(s: &str, used: &mut HashSet<String>) -> String {
    let mut base: String = s.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect();
    if base.is_empty() || base.starts_with(|c: char| c.is_ascii_digit()) || KEYWORDS.contains(&base.as_str()) {
        base = format!("_{base}");
    }
    let mut name = base.clone();
    let mut i = 1;
    while used.contains(&name) {
        name = format!("{base}_{i}");
        i += 1;
    }
    used.insert(name.clone());
    name
}

/// The expression for a parameter or buffer `name` of the module `root` (`self`):
/// `self.fc1.weight`, or `self.get_parameter("convs.0.weight")` where a part of the path is
/// not an identifier.
pub fn state_expr(root: &str, name: &str, kind: InputKind) -> String {
    if name.split('.').all(is_ident) {
        format!("{root}.{name}")
    } else {
        let getter = if kind == InputKind::Buffer { "get_buffer" } else { "get_parameter" };
        format!("{root}.{getter}({})", str_lit(name))
    }
}
