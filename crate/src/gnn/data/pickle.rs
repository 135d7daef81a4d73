//! A small, strict reader for the Python pickles of the Planetoid raw files.
//!
//! The files `ind.<name>.{x,tx,allx,y,ty,ally,graph}` were written by Python 2 with pickle
//! protocol 2. They hold `scipy.sparse.csr_matrix` objects, numpy arrays and a
//! `collections.defaultdict(list)`. Reading them is done in two steps:
//!
//! 1. [`parse`] runs the pickle machine over the bytes and produces a generic
//!    [`PickleValue`] tree. No Python code exists here, so "calling" a global (`REDUCE`,
//!    `NEWOBJ`) just records an [`PickleValue::Object`] with its class, arguments, `BUILD`
//!    state and any items set or appended on it. Only the opcodes these files use (plus a
//!    few trivial siblings) and a fixed allow-list of globals are accepted; anything else,
//!    as well as truncated data, is an error naming the file, the byte offset and the opcode,
//!    e.g. `ind.cora.x: unsupported pickle opcode 0x95 ('FRAME') at byte 2`.
//! 2. `gnn::data::numpy` ([`super::numpy`]) interprets that tree as numpy's
//!    `_reconstruct` + `__setstate__` protocol, scipy's CSR state dict and a defaultdict of
//!    int lists. This file knows nothing of numpy or scipy beyond the globals it allows.
//!
//! Python 2 `str` objects (`BINSTRING`, `SHORT_BINSTRING`) are kept as raw bytes
//! ([`PickleValue::Bytes`]); this is what numpy array payloads are. Memoised objects are
//! shared as in Python: a `BINGET` of an object that was later mutated (`BUILD`,
//! `APPENDS`, …) sees the mutated object.
//!
//! Memory is bounded by the input: parsing and building the tree may use at most
//! [`budget_for`]`(bytes)` = [`BUDGET_PER_INPUT_BYTE`] × the file's bytes + [`BUDGET_BASE`]
//! bytes. Every object pushed is charged [`OBJECT_COST`] (at least what it really takes on a
//! 64-bit target: its parse-time node, its tree value and their bookkeeping; the same figure
//! on every target, so a file is accepted or refused alike natively and in wasm) plus its
//! payload, before it is allocated; a memo reference (`BINGET`) is charged the size of what
//! it refers to, since the tree holds a copy of it; the tree builder charges every copy of
//! a shared object again. Past the budget the error names the file, the byte offset and
//! the opcode (or the shared object's creating opcode). The real files need at most about
//! 35 bytes per byte (a graph file: one small int per 3.7 bytes). Allocations are
//! fallible, so a refusal is an error, never a trap. Sizes (shapes, rows, columns) are
//! read exactly as 64-bit integers: one past [`MAX_SIZE`] is an error, never truncated.

use crate::{Error, Result};
use std::collections::HashMap;
use std::mem::size_of;

/// Bytes of memory the reader may use per byte of input (see [`budget_for`]).
pub const BUDGET_PER_INPUT_BYTE: usize = 64;

/// Bytes of memory the reader may use whatever the input's size.
pub const BUDGET_BASE: usize = 1 << 20;

/// The most bytes of memory the reader may use for a pickle of `input_len` bytes.
pub fn budget_for(input_len: usize) -> usize {
    input_len.saturating_mul(BUDGET_PER_INPUT_BYTE).saturating_add(BUDGET_BASE)
}

/// What one object is charged besides its payload: at least its real cost on a 64-bit
/// target (its parse-time node, its value in the tree, its slots on the stack and in its
/// container, its size and origin records, the tree builder's reference count and path
/// flag; checked by a unit test), and the same on every target.
pub const OBJECT_COST: usize = 128;

/// What one more reference to an object (a memo `BINGET`) is charged besides the object.
const REF_COST: usize = 8;

/// The largest size (array dimension, matrix rows or columns, CSR offset) read from a
/// pickle: node and feature ids are 32-bit, so a size past this is an error, on every
/// target alike.
pub const MAX_SIZE: u64 = u32::MAX as u64;

/// One more element on `v`, allocated fallibly.
fn try_push<T>(v: &mut Vec<T>, item: T, file: &str) -> Result<()> {
    if v.len() == v.capacity() {
        v.try_reserve(1).map_err(|_| {
            Error::alloc(format!(
                "{file}: could not allocate {} bytes for the pickle reader (out of memory)",
                (v.capacity() as u128 + 1) * size_of::<T>() as u128
            ))
        })?;
    }
    v.push(item);
    Ok(())
}

/// A copy of `b`, allocated fallibly.
fn try_copy(b: &[u8], file: &str) -> Result<Vec<u8>> {
    let mut v = crate::tensor::alloc::try_with_capacity(&format!("{file}: pickle string"), b.len())?;
    v.extend_from_slice(b);
    Ok(v)
}

/// A generic value decoded from a pickle.
#[derive(Clone, Debug, PartialEq)]
pub enum PickleValue {
    None,
    Bool(bool),
    Int(i64),
    Float(f64),
    /// A Python 2 `str` (or `bytes`): raw bytes, undecoded.
    Bytes(Vec<u8>),
    /// A unicode string.
    Str(String),
    List(Vec<PickleValue>),
    Tuple(Vec<PickleValue>),
    /// Key/value pairs in insertion order.
    Dict(Vec<(PickleValue, PickleValue)>),
    /// A reference to a Python global, e.g. `numpy` / `ndarray`. Boxed (like `Object`)
    /// so that a value is 32 bytes: a pickle of many small values stays small in memory.
    Global(Box<PickleGlobal>),
    /// The result of calling a global (`REDUCE`, or `NEWOBJ` when `newobj`), with the
    /// state given by `BUILD` and any `SETITEM(S)` / `APPEND(S)` done on it afterwards.
    Object(Box<PickleObject>),
}

/// A Python global: `module.name`.
#[derive(Clone, Debug, PartialEq)]
pub struct PickleGlobal {
    pub module: String,
    pub name: String,
}

/// An object made by calling a global (see [`PickleValue::Object`]).
#[derive(Clone, Debug, PartialEq)]
pub struct PickleObject {
    pub module: String,
    pub name: String,
    pub args: Vec<PickleValue>,
    pub newobj: bool,
    pub state: Option<Box<PickleValue>>,
    pub dict_items: Vec<(PickleValue, PickleValue)>,
    pub list_items: Vec<PickleValue>,
    /// Byte offset of the opcode that created the object (for error messages).
    pub offset: usize,
}

impl PickleValue {
    /// Short description for error messages.
    pub fn describe(&self) -> String {
        match self {
            PickleValue::None => "None".into(),
            PickleValue::Bool(b) => format!("bool {b}"),
            PickleValue::Int(i) => format!("int {i}"),
            PickleValue::Float(f) => format!("float {f}"),
            PickleValue::Bytes(b) => format!("string of {} bytes", b.len()),
            PickleValue::Str(s) => format!("unicode string of {} chars", s.chars().count()),
            PickleValue::List(v) => format!("list of {} items", v.len()),
            PickleValue::Tuple(v) => format!("tuple of {} items", v.len()),
            PickleValue::Dict(v) => format!("dict of {} items", v.len()),
            PickleValue::Global(g) => format!("global {}.{}", g.module, g.name),
            PickleValue::Object(o) => format!("{}.{} object (created at byte {})", o.module, o.name, o.offset),
        }
    }

    /// The text of a `Str`, or of `Bytes` read as Latin-1 (what Python 3 does with
    /// `encoding='latin1'`).
    pub fn as_text(&self) -> Option<String> {
        match self {
            PickleValue::Str(s) => Some(s.clone()),
            PickleValue::Bytes(b) => Some(b.iter().map(|&c| c as char).collect()),
            _ => None,
        }
    }

    /// The integer of an `Int` (or a `Bool`, which Python treats as 0/1).
    pub fn as_int(&self) -> Option<i64> {
        match self {
            PickleValue::Int(i) => Some(*i),
            PickleValue::Bool(b) => Some(*b as i64),
            _ => None,
        }
    }

    /// Looks up a string key in a `Dict` (keys may be `Str` or `Bytes`).
    pub fn dict_get(&self, key: &str) -> Option<&PickleValue> {
        match self {
            PickleValue::Dict(items) => items.iter().find(|(k, _)| k.as_text().as_deref() == Some(key)).map(|(_, v)| v),
            _ => None,
        }
    }

    /// Whether this is an object made by calling `module.name`.
    pub fn is_object_of(&self, m: &str, n: &str) -> bool {
        matches!(self, PickleValue::Object(o) if o.module == m && o.name == n)
    }

    /// Whether this is the global `module.name`.
    pub fn is_global(&self, m: &str, n: &str) -> bool {
        matches!(self, PickleValue::Global(g) if g.module == m && g.name == n)
    }
}

/// The globals a Planetoid pickle may name. Anything else is rejected while parsing.
const ALLOWED_GLOBALS: &[(&str, &str)] = &[
    ("numpy.core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "_reconstruct"),
    ("numpy", "ndarray"),
    ("numpy", "dtype"),
    ("scipy.sparse.csr", "csr_matrix"),
    ("scipy.sparse._csr", "csr_matrix"),
    ("collections", "defaultdict"),
    ("__builtin__", "list"),
    ("builtins", "list"),
    ("copy_reg", "_reconstructor"),
    ("copyreg", "_reconstructor"),
    ("__builtin__", "object"),
    ("builtins", "object"),
];

/// The name of every pickle opcode (protocols 0-5), for error messages.
pub fn opcode_name(op: u8) -> &'static str {
    match op {
        b'(' => "MARK",
        b'.' => "STOP",
        b'0' => "POP",
        b'1' => "POP_MARK",
        b'2' => "DUP",
        b'F' => "FLOAT",
        b'I' => "INT",
        b'J' => "BININT",
        b'K' => "BININT1",
        b'L' => "LONG",
        b'M' => "BININT2",
        b'N' => "NONE",
        b'P' => "PERSID",
        b'Q' => "BINPERSID",
        b'R' => "REDUCE",
        b'S' => "STRING",
        b'T' => "BINSTRING",
        b'U' => "SHORT_BINSTRING",
        b'V' => "UNICODE",
        b'X' => "BINUNICODE",
        b'a' => "APPEND",
        b'b' => "BUILD",
        b'c' => "GLOBAL",
        b'd' => "DICT",
        b'}' => "EMPTY_DICT",
        b'e' => "APPENDS",
        b'g' => "GET",
        b'h' => "BINGET",
        b'i' => "INST",
        b'j' => "LONG_BINGET",
        b'l' => "LIST",
        b']' => "EMPTY_LIST",
        b'o' => "OBJ",
        b'p' => "PUT",
        b'q' => "BINPUT",
        b'r' => "LONG_BINPUT",
        b's' => "SETITEM",
        b't' => "TUPLE",
        b')' => "EMPTY_TUPLE",
        b'u' => "SETITEMS",
        b'G' => "BINFLOAT",
        b'B' => "BINBYTES",
        b'C' => "SHORT_BINBYTES",
        0x80 => "PROTO",
        0x81 => "NEWOBJ",
        0x82 => "EXT1",
        0x83 => "EXT2",
        0x84 => "EXT4",
        0x85 => "TUPLE1",
        0x86 => "TUPLE2",
        0x87 => "TUPLE3",
        0x88 => "NEWTRUE",
        0x89 => "NEWFALSE",
        0x8a => "LONG1",
        0x8b => "LONG4",
        0x8c => "SHORT_BINUNICODE",
        0x8d => "BINUNICODE8",
        0x8e => "BINBYTES8",
        0x8f => "EMPTY_SET",
        0x90 => "ADDITEMS",
        0x91 => "FROZENSET",
        0x92 => "NEWOBJ_EX",
        0x93 => "STACK_GLOBAL",
        0x94 => "MEMOIZE",
        0x95 => "FRAME",
        0x96 => "BYTEARRAY8",
        0x97 => "NEXT_BUFFER",
        0x98 => "READONLY_BUFFER",
        _ => "not an opcode",
    }
}

/// An object while parsing (see [`PickleObject`]), its values as arena ids.
#[derive(Clone, Debug)]
struct NodeObject {
    module: String,
    name: String,
    args: Vec<usize>,
    newobj: bool,
    state: Option<usize>,
    dict_items: Vec<(usize, usize)>,
    list_items: Vec<usize>,
    offset: usize,
}

/// Objects while parsing live in an arena so that memoised (shared) objects can be
/// mutated in place, as Python does.
#[derive(Clone, Debug)]
enum Node {
    None,
    Bool(bool),
    Int(i64),
    Float(f64),
    Bytes(Vec<u8>),
    Str(String),
    List(Vec<usize>),
    Tuple(Vec<usize>),
    Dict(Vec<(usize, usize)>),
    /// Boxed, like `Object`, so that a node is 32 bytes.
    Global(Box<PickleGlobal>),
    Object(Box<NodeObject>),
    /// Already moved into the output tree.
    Taken,
}

struct Parser<'a> {
    data: &'a [u8],
    file: &'a str,
    pos: usize,
    /// Offset and code of the opcode being executed.
    op_pos: usize,
    op: u8,
    arena: Vec<Node>,
    stack: Vec<usize>,
    marks: Vec<usize>,
    memo: HashMap<u32, usize>,
    /// Per arena node: the bytes its value would take in the tree (itself, its payload
    /// and what it holds), as far as known when it was made or grown.
    size: Vec<usize>,
    /// Per arena node: the offset and opcode that made it (for messages).
    origin: Vec<(usize, u8)>,
    /// Bytes of memory charged so far, and the most allowed ([`budget_for`]).
    used: usize,
    budget: usize,
}

impl<'a> Parser<'a> {
    fn err(&self, what: impl std::fmt::Display) -> Error {
        Error::data(format!(
            "{}: pickle opcode 0x{:02x} ('{}') at byte {}: {}",
            self.file,
            self.op,
            opcode_name(self.op),
            self.op_pos,
            what
        ))
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let remaining = self.data.len() - self.pos;
        if n > remaining {
            return Err(Error::data(format!(
                "{}: truncated pickle: opcode 0x{:02x} ('{}') at byte {} needs {} more bytes but only {} remain",
                self.file,
                self.op,
                opcode_name(self.op),
                self.op_pos,
                n,
                remaining
            )));
        }
        let s = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }

    fn u16(&mut self) -> Result<u16> {
        let b = self.take(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    fn u32(&mut self) -> Result<u32> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// A `\n`-terminated ASCII line (GLOBAL's module and name).
    fn line(&mut self) -> Result<String> {
        let rest = &self.data[self.pos..];
        let Some(n) = rest.iter().position(|&c| c == b'\n') else {
            return Err(Error::data(format!(
                "{}: truncated pickle: opcode 0x{:02x} ('{}') at byte {} has no end of line before the end of the data",
                self.file,
                self.op,
                opcode_name(self.op),
                self.op_pos
            )));
        };
        let text = std::str::from_utf8(&rest[..n]).map_err(|_| self.err("name is not valid UTF-8"))?;
        let text = text.to_string();
        self.pos += n + 1;
        Ok(text)
    }

    /// Charges `bytes` against the budget, or refuses at the current opcode.
    fn charge(&mut self, bytes: usize) -> Result<()> {
        let used = self.used.saturating_add(bytes);
        if used > self.budget {
            return Err(self.err(format!(
                "the pickle would need more than {} bytes of memory, the limit for a file of {} bytes \
                 ({BUDGET_PER_INPUT_BYTE} bytes per byte of input + {BUDGET_BASE}): refusing it (a pickle whose \
                 objects are far bigger than the file is not a Planetoid file)",
                self.budget,
                self.data.len()
            )));
        }
        self.used = used;
        Ok(())
    }

    /// Pushes a new object whose payload (bytes or text held) is `payload` bytes and
    /// whose children's tree size is `children` bytes; charged before anything is stored.
    fn push_sized(&mut self, node: Node, payload: usize, children: usize) -> Result<()> {
        self.charge(OBJECT_COST.saturating_add(payload))?;
        self.store(node, payload, children)
    }

    /// Pushes a new object already charged.
    fn store(&mut self, node: Node, payload: usize, children: usize) -> Result<()> {
        let size = OBJECT_COST.saturating_add(payload).saturating_add(children);
        try_push(&mut self.arena, node, self.file)?;
        try_push(&mut self.size, size, self.file)?;
        try_push(&mut self.origin, (self.op_pos, self.op), self.file)?;
        try_push(&mut self.stack, self.arena.len() - 1, self.file)
    }

    fn push(&mut self, node: Node) -> Result<()> {
        self.push_sized(node, 0, 0)
    }

    fn tree_size(&self, items: &[usize]) -> usize {
        items.iter().fold(0usize, |a, &i| a.saturating_add(self.size[i]))
    }

    fn pop(&mut self) -> Result<usize> {
        let floor = self.marks.last().copied().unwrap_or(0);
        if self.stack.len() <= floor {
            return Err(self.err("stack underflow"));
        }
        Ok(self.stack.pop().unwrap())
    }

    fn top(&self) -> Result<usize> {
        let floor = self.marks.last().copied().unwrap_or(0);
        if self.stack.len() <= floor {
            return Err(self.err("stack underflow"));
        }
        Ok(*self.stack.last().unwrap())
    }

    /// Pops everything above the last MARK, and the MARK.
    fn pop_mark(&mut self) -> Result<Vec<usize>> {
        let Some(m) = self.marks.pop() else {
            return Err(self.err("no MARK on the stack"));
        };
        Ok(self.stack.split_off(m))
    }

    fn pop_n(&mut self, n: usize) -> Result<Vec<usize>> {
        let floor = self.marks.last().copied().unwrap_or(0);
        if self.stack.len() < floor + n {
            return Err(self.err("stack underflow"));
        }
        Ok(self.stack.split_off(self.stack.len() - n))
    }

    fn memo_put(&mut self, idx: u32) -> Result<()> {
        let top = self.top()?;
        self.memo.insert(idx, top);
        Ok(())
    }

    /// Pushes a memoised object again. The tree will hold a copy of it, so its whole size
    /// is charged now (the bomb of one big string referenced many times stops here).
    fn memo_get(&mut self, idx: u32) -> Result<()> {
        let Some(&id) = self.memo.get(&idx) else {
            return Err(self.err(format!("memo entry {idx} was never stored")));
        };
        self.charge(self.size[id].saturating_add(REF_COST))?;
        try_push(&mut self.stack, id, self.file)
    }

    fn global_of(&self, id: usize, what: &str) -> Result<(String, String)> {
        match &self.arena[id] {
            Node::Global(g) => Ok((g.module.clone(), g.name.clone())),
            _ => Err(self.err(format!("{what} must be a global"))),
        }
    }

    fn tuple_items(&self, id: usize, what: &str) -> Result<Vec<usize>> {
        match &self.arena[id] {
            Node::Tuple(items) => Ok(items.clone()),
            _ => Err(self.err(format!("{what} must be a tuple"))),
        }
    }

    fn append(&mut self, items: Vec<usize>) -> Result<()> {
        let target = self.top()?;
        let grown = self.tree_size(&items);
        self.size[target] = self.size[target].saturating_add(grown);
        match &mut self.arena[target] {
            Node::List(v) => v.extend(items),
            Node::Object(o) => o.list_items.extend(items),
            _ => return Err(self.err("APPEND target is not a list")),
        }
        Ok(())
    }

    fn set_items(&mut self, kv: Vec<usize>) -> Result<()> {
        if !kv.len().is_multiple_of(2) {
            return Err(self.err("odd number of items for SETITEMS"));
        }
        let target = self.top()?;
        let grown = self.tree_size(&kv);
        self.size[target] = self.size[target].saturating_add(grown);
        let pairs = kv.chunks(2).map(|p| (p[0], p[1]));
        match &mut self.arena[target] {
            Node::Dict(v) => v.extend(pairs),
            Node::Object(o) => o.dict_items.extend(pairs),
            _ => return Err(self.err("SETITEM target is not a dict")),
        }
        Ok(())
    }

    fn string(&mut self, n: usize) -> Result<()> {
        let b = self.take(n)?;
        self.charge(OBJECT_COST.saturating_add(n))?;
        let b = try_copy(b, self.file)?;
        self.store(Node::Bytes(b), n, 0)
    }

    /// Runs the machine to STOP; returns the id of the result.
    fn run(&mut self) -> Result<usize> {
        loop {
            if self.pos >= self.data.len() {
                return Err(Error::data(format!(
                    "{}: truncated pickle: no STOP opcode before the end of the data at byte {}",
                    self.file,
                    self.data.len()
                )));
            }
            self.op_pos = self.pos;
            self.op = self.data[self.pos];
            self.pos += 1;
            match self.op {
                0x80 => {
                    let v = self.u8()?;
                    if v > 5 {
                        return Err(self.err(format!("unknown pickle protocol {v}")));
                    }
                }
                b'.' => {
                    let result = self.pop()?;
                    if !self.stack.is_empty() || !self.marks.is_empty() {
                        return Err(self.err("objects left on the stack at STOP"));
                    }
                    if self.pos != self.data.len() {
                        return Err(self.err(format!("{} trailing bytes after STOP", self.data.len() - self.pos)));
                    }
                    return Ok(result);
                }
                b'c' => {
                    let module = self.line()?;
                    let name = self.line()?;
                    if !ALLOWED_GLOBALS.iter().any(|&(m, n)| m == module && n == name) {
                        return Err(self.err(format!("unexpected global '{module}.{name}'")));
                    }
                    let payload = module.len() + name.len();
                    self.push_sized(Node::Global(Box::new(PickleGlobal { module, name })), payload, 0)?;
                }
                b'q' => {
                    let i = self.u8()? as u32;
                    self.memo_put(i)?;
                }
                b'r' => {
                    let i = self.u32()?;
                    self.memo_put(i)?;
                }
                b'h' => {
                    let i = self.u8()? as u32;
                    self.memo_get(i)?;
                }
                b'j' => {
                    let i = self.u32()?;
                    self.memo_get(i)?;
                }
                b'(' => self.marks.push(self.stack.len()),
                b')' => self.push(Node::Tuple(Vec::new()))?,
                b't' => {
                    let items = self.pop_mark()?;
                    let children = self.tree_size(&items);
                    self.push_sized(Node::Tuple(items), 0, children)?;
                }
                0x85..=0x87 => {
                    let items = self.pop_n((self.op - 0x84) as usize)?;
                    let children = self.tree_size(&items);
                    self.push_sized(Node::Tuple(items), 0, children)?;
                }
                b']' => self.push(Node::List(Vec::new()))?,
                b'l' => {
                    let items = self.pop_mark()?;
                    let children = self.tree_size(&items);
                    self.push_sized(Node::List(items), 0, children)?;
                }
                b'}' => self.push(Node::Dict(Vec::new()))?,
                b'd' => {
                    let kv = self.pop_mark()?;
                    if !kv.len().is_multiple_of(2) {
                        return Err(self.err("odd number of items for DICT"));
                    }
                    let children = self.tree_size(&kv);
                    self.push_sized(Node::Dict(kv.chunks(2).map(|p| (p[0], p[1])).collect()), 0, children)?;
                }
                b'a' => {
                    let v = self.pop()?;
                    self.append(vec![v])?;
                }
                b'e' => {
                    let items = self.pop_mark()?;
                    self.append(items)?;
                }
                b's' => {
                    let kv = self.pop_n(2)?;
                    self.set_items(kv)?;
                }
                b'u' => {
                    let kv = self.pop_mark()?;
                    self.set_items(kv)?;
                }
                b'N' => self.push(Node::None)?,
                0x88 => self.push(Node::Bool(true))?,
                0x89 => self.push(Node::Bool(false))?,
                b'K' => {
                    let v = self.u8()? as i64;
                    self.push(Node::Int(v))?;
                }
                b'M' => {
                    let v = self.u16()? as i64;
                    self.push(Node::Int(v))?;
                }
                b'J' => {
                    let v = self.u32()? as i32 as i64;
                    self.push(Node::Int(v))?;
                }
                0x8a => {
                    let n = self.u8()? as usize;
                    if n > 8 {
                        return Err(self.err(format!("{n}-byte integer does not fit in 64 bits")));
                    }
                    let b = self.take(n)?;
                    let mut v: i64 = 0;
                    for (i, &byte) in b.iter().enumerate() {
                        v |= (byte as i64) << (8 * i);
                    }
                    if n > 0 && n < 8 && b[n - 1] & 0x80 != 0 {
                        v -= 1i64 << (8 * n); // two's complement sign
                    }
                    self.push(Node::Int(v))?;
                }
                b'G' => {
                    let b = self.take(8)?;
                    let v = f64::from_be_bytes(b.try_into().unwrap());
                    self.push(Node::Float(v))?;
                }
                b'T' => {
                    let n = self.u32()? as i32;
                    if n < 0 {
                        return Err(self.err(format!("negative string length {n}")));
                    }
                    self.string(n as usize)?;
                }
                b'U' => {
                    let n = self.u8()? as usize;
                    self.string(n)?;
                }
                b'X' => {
                    let n = self.u32()? as usize;
                    let b = self.take(n)?;
                    let s = std::str::from_utf8(b).map_err(|_| self.err("invalid UTF-8 in unicode string"))?;
                    self.charge(OBJECT_COST.saturating_add(n))?;
                    let mut text = String::new();
                    text.try_reserve_exact(n).map_err(|_| {
                        Error::alloc(format!("{}: could not allocate {n} bytes for a pickle string", self.file))
                    })?;
                    text.push_str(s);
                    self.store(Node::Str(text), n, 0)?;
                }
                b'R' | 0x81 => {
                    let args_id = self.pop()?;
                    let callable = self.pop()?;
                    let what = if self.op == b'R' { "REDUCE callable" } else { "NEWOBJ class" };
                    let (module, name) = self.global_of(callable, what)?;
                    let args = self.tuple_items(args_id, "arguments")?;
                    let newobj = self.op == 0x81;
                    let offset = self.op_pos;
                    let children = self.size[args_id];
                    let payload = module.len() + name.len();
                    self.push_sized(
                        Node::Object(Box::new(NodeObject {
                            module,
                            name,
                            args,
                            newobj,
                            state: None,
                            dict_items: Vec::new(),
                            list_items: Vec::new(),
                            offset,
                        })),
                        payload,
                        children,
                    )?;
                }
                b'b' => {
                    let st = self.pop()?;
                    let target = self.top()?;
                    self.size[target] = self.size[target].saturating_add(self.size[st]);
                    let err = match &mut self.arena[target] {
                        Node::Object(o) if o.state.is_none() => {
                            o.state = Some(st);
                            None
                        }
                        Node::Object(_) => Some("object already has a state"),
                        _ => Some("BUILD target is not an object"),
                    };
                    if let Some(e) = err {
                        return Err(self.err(e));
                    }
                }
                op => {
                    return Err(Error::data(format!(
                        "{}: unsupported pickle opcode 0x{:02x} ('{}') at byte {}",
                        self.file,
                        op,
                        opcode_name(op),
                        self.op_pos
                    )))
                }
            }
        }
    }

    /// Moves (or, for shared nodes, clones) the arena graph under `root` into a tree.
    fn into_tree(mut self, root: usize) -> Result<PickleValue> {
        // Reference counts decide whether a node can be moved out or must be cloned.
        let mut refs = vec![0u32; self.arena.len()];
        refs[root] += 1;
        for node in &self.arena {
            let mut count = |i: usize| refs[i] = refs[i].saturating_add(1);
            match node {
                Node::List(v) | Node::Tuple(v) => v.iter().for_each(|&i| count(i)),
                Node::Dict(kv) => kv.iter().for_each(|&(k, v)| {
                    count(k);
                    count(v)
                }),
                Node::Object(o) => {
                    let NodeObject { args, state, dict_items, list_items, .. } = &**o;
                    args.iter().for_each(|&i| count(i));
                    state.iter().for_each(|&i| count(i));
                    dict_items.iter().for_each(|&(k, v)| {
                        count(k);
                        count(v)
                    });
                    list_items.iter().for_each(|&i| count(i));
                }
                _ => {}
            }
        }
        let n = self.arena.len();
        let mut tb = TreeBuilder {
            arena: std::mem::take(&mut self.arena),
            refs,
            on_path: vec![false; n],
            origin: std::mem::take(&mut self.origin),
            left: self.budget.saturating_sub(self.used),
            budget: self.budget,
            file: self.file,
        };
        tb.build(root, true, 0)
    }
}

struct TreeBuilder<'f> {
    arena: Vec<Node>,
    refs: Vec<u32>,
    on_path: Vec<bool>,
    /// Offset and opcode that made each node (for messages).
    origin: Vec<(usize, u8)>,
    /// Bytes of the budget left for copies of shared objects: sharing can make the tree
    /// much bigger than the arena, and every copy is charged before it is made.
    left: usize,
    budget: usize,
    file: &'f str,
}

impl TreeBuilder<'_> {
    fn err(&self, what: &str) -> Error {
        Error::data(format!("{}: {what}", self.file))
    }

    /// A copy of the shared node `id` (its children stay references), charged first.
    fn copy(&mut self, id: usize) -> Result<Node> {
        let node = &self.arena[id];
        // Its children are charged as they are copied in turn.
        let payload = match node {
            Node::Bytes(b) => b.len(),
            Node::Str(s) => s.len(),
            Node::Global(g) => g.module.len() + g.name.len(),
            Node::Object(o) => o.module.len() + o.name.len(),
            _ => 0,
        };
        let cost = OBJECT_COST.saturating_add(payload);
        if cost > self.left {
            let (at, op) = self.origin[id];
            return Err(Error::data(format!(
                "{}: pickle opcode 0x{op:02x} ('{}') at byte {at}: the object it made is shared so often that the \
                 copies would need more than {} bytes of memory, the limit for a file of this size \
                 ({BUDGET_PER_INPUT_BYTE} bytes per byte of input + {BUDGET_BASE}): refusing it",
                self.file,
                opcode_name(op),
                self.budget
            )));
        }
        self.left -= cost;
        Ok(match &self.arena[id] {
            Node::Bytes(b) => Node::Bytes(try_copy(b, self.file)?),
            other => other.clone(),
        })
    }

    fn many(&mut self, ids: Vec<usize>, unique: bool, depth: usize) -> Result<Vec<PickleValue>> {
        ids.into_iter().map(|i| self.build(i, unique, depth)).collect()
    }

    fn pairs(
        &mut self,
        kv: Vec<(usize, usize)>,
        unique: bool,
        depth: usize,
    ) -> Result<Vec<(PickleValue, PickleValue)>> {
        kv.into_iter().map(|(k, v)| Ok((self.build(k, unique, depth)?, self.build(v, unique, depth)?))).collect()
    }

    /// Builds node `id`. A node reached only through uniquely referenced parents is moved
    /// out of the arena; anything shared is cloned.
    fn build(&mut self, id: usize, parent_unique: bool, depth: usize) -> Result<PickleValue> {
        if depth > 200 {
            return Err(self.err("pickle nests deeper than 200 levels"));
        }
        if self.on_path[id] {
            return Err(self.err("pickle contains a reference cycle"));
        }
        let unique = parent_unique && self.refs[id] <= 1;
        let node = if unique { std::mem::replace(&mut self.arena[id], Node::Taken) } else { self.copy(id)? };
        self.on_path[id] = true;
        let d = depth + 1;
        let value = match node {
            Node::None => PickleValue::None,
            Node::Bool(v) => PickleValue::Bool(v),
            Node::Int(v) => PickleValue::Int(v),
            Node::Float(v) => PickleValue::Float(v),
            Node::Bytes(v) => PickleValue::Bytes(v),
            Node::Str(v) => PickleValue::Str(v),
            Node::List(v) => PickleValue::List(self.many(v, unique, d)?),
            Node::Tuple(v) => PickleValue::Tuple(self.many(v, unique, d)?),
            Node::Dict(kv) => PickleValue::Dict(self.pairs(kv, unique, d)?),
            Node::Global(g) => PickleValue::Global(g),
            Node::Object(o) => {
                let NodeObject { module, name, args, newobj, state, dict_items, list_items, offset } = *o;
                let args = self.many(args, unique, d)?;
                let state = match state {
                    Some(s) => Some(Box::new(self.build(s, unique, d)?)),
                    None => None,
                };
                let dict_items = self.pairs(dict_items, unique, d)?;
                let list_items = self.many(list_items, unique, d)?;
                PickleValue::Object(Box::new(PickleObject {
                    module,
                    name,
                    args,
                    newobj,
                    state,
                    dict_items,
                    list_items,
                    offset,
                }))
            }
            Node::Taken => return Err(self.err("internal error: pickle object moved twice")),
        };
        self.on_path[id] = false;
        Ok(value)
    }
}

/// Parses a whole pickle. `file` names the source in error messages.
pub fn parse(data: &[u8], file: &str) -> Result<PickleValue> {
    let mut p = Parser::new(data, file);
    let root = p.run()?;
    p.into_tree(root)
}

impl<'a> Parser<'a> {
    fn new(data: &'a [u8], file: &'a str) -> Parser<'a> {
        Parser {
            data,
            file,
            pos: 0,
            op_pos: 0,
            op: 0,
            arena: Vec::new(),
            stack: Vec::new(),
            marks: Vec::new(),
            memo: HashMap::new(),
            size: Vec::new(),
            origin: Vec::new(),
            used: 0,
            budget: budget_for(data.len()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::numpy::{adjacency_from_value, csr_from_value, ndarray_from_value, NdData};
    use super::*;

    /// Builds pickles opcode by opcode.
    #[derive(Default)]
    struct W(Vec<u8>);

    impl W {
        fn op(mut self, op: u8) -> Self {
            self.0.push(op);
            self
        }
        fn proto(self) -> Self {
            self.op(0x80).op(2)
        }
        fn global(mut self, m: &str, n: &str) -> Self {
            self.0.push(b'c');
            self.0.extend_from_slice(m.as_bytes());
            self.0.push(b'\n');
            self.0.extend_from_slice(n.as_bytes());
            self.0.push(b'\n');
            self
        }
        fn int(mut self, v: i64) -> Self {
            if (0..256).contains(&v) {
                self.0.extend_from_slice(&[b'K', v as u8]);
            } else if (0..65536).contains(&v) {
                self.0.push(b'M');
                self.0.extend_from_slice(&(v as u16).to_le_bytes());
            } else if i32::try_from(v).is_ok() {
                self.0.push(b'J');
                self.0.extend_from_slice(&(v as i32).to_le_bytes());
            } else {
                // LONG1 of 8 bytes, as Python writes an int past 32 bits.
                self.0.extend_from_slice(&[0x8a, 8]);
                self.0.extend_from_slice(&v.to_le_bytes());
            }
            self
        }
        fn sstr(mut self, s: &[u8]) -> Self {
            self.0.extend_from_slice(&[b'U', s.len() as u8]);
            self.0.extend_from_slice(s);
            self
        }
        fn bstr(mut self, s: &[u8]) -> Self {
            self.0.push(b'T');
            self.0.extend_from_slice(&(s.len() as u32).to_le_bytes());
            self.0.extend_from_slice(s);
            self
        }
        fn put(self, i: u8) -> Self {
            self.op(b'q').op(i)
        }
        fn get(self, i: u8) -> Self {
            self.op(b'h').op(i)
        }
        fn stop(self) -> Vec<u8> {
            self.op(b'.').0
        }
        /// A numpy dtype object like the files have: dtype(descr, 0, 1) + BUILD state.
        fn dtype(self, order: &[u8], descr: &[u8]) -> Self {
            self.dtype_memo(order, descr, None)
        }
        /// Same, memoised right after REDUCE (before BUILD), as the files do.
        fn dtype_memo(self, order: &[u8], descr: &[u8], memo: Option<u8>) -> Self {
            let w = self.global("numpy", "dtype").sstr(descr).int(0).int(1).op(0x87).op(b'R');
            let w = match memo {
                Some(i) => w.put(i),
                None => w,
            };
            w.op(b'(').int(3).sstr(order).op(b'N').op(b'N').op(b'N').int(-1).int(-1).int(0).op(b't').op(b'b')
        }
        /// A numpy array with the given shape, dtype and raw little-endian data.
        fn ndarray(self, shape: &[i64], order: &[u8], descr: &[u8], raw: &[u8]) -> Self {
            let mut w = self
                .global("numpy.core.multiarray", "_reconstruct")
                .global("numpy", "ndarray")
                .int(0)
                .op(0x85)
                .sstr(b"b")
                .op(0x87)
                .op(b'R')
                .op(b'(')
                .int(1)
                .op(b'(');
            for &s in shape {
                w = w.int(s);
            }
            w.op(b't').dtype(order, descr).op(0x89).bstr(raw).op(b't').op(b'b')
        }
    }

    fn f32s(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }
    fn i32s(v: &[i32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    #[test]
    fn scalars_and_containers() {
        let mut long1 = W::default().proto().op(b'(').int(7).int(300).int(-5).op(0x8a).op(2).op(0x00).op(0x80);
        long1 = long1.op(b'N').op(0x88).op(0x89).op(b'G');
        long1.0.extend_from_slice(&1.5f64.to_be_bytes());
        let mut b = long1.sstr(b"k").op(b'X');
        b.0.extend_from_slice(&3u32.to_le_bytes());
        b.0.extend_from_slice(b"abc");
        let bytes = b.op(b'l').stop();
        let v = parse(&bytes, "t").unwrap();
        assert_eq!(
            v,
            PickleValue::List(vec![
                PickleValue::Int(7),
                PickleValue::Int(300),
                PickleValue::Int(-5),
                PickleValue::Int(-32768),
                PickleValue::None,
                PickleValue::Bool(true),
                PickleValue::Bool(false),
                PickleValue::Float(1.5),
                PickleValue::Bytes(b"k".to_vec()),
                PickleValue::Str("abc".into()),
            ])
        );
    }

    #[test]
    fn memo_shares_mutated_objects() {
        // l = []; memo[0] = l; l.append(1); (l, l) -> both see [1]
        let bytes = W::default().proto().op(b']').put(0).int(1).op(b'a').get(0).op(0x86).stop();
        let v = parse(&bytes, "t").unwrap();
        let one = PickleValue::List(vec![PickleValue::Int(1)]);
        assert_eq!(v, PickleValue::Tuple(vec![one.clone(), one]));
    }

    #[test]
    fn shared_object_with_state_is_cloned_whole() {
        // Like the files: a dtype is built once, memoised, and fetched again with BINGET
        // for a second array; both arrays must see its BUILD state (byte order '<').
        let raw = f32s(&[1.5]);
        let w = W::default().proto().op(b'(');
        let w = w
            .global("numpy.core.multiarray", "_reconstruct")
            .put(7)
            .global("numpy", "ndarray")
            .put(8)
            .int(0)
            .op(0x85)
            .sstr(b"b")
            .op(0x87)
            .op(b'R')
            .op(b'(')
            .int(1)
            .int(1)
            .op(0x85)
            .dtype_memo(b"<", b"f4", Some(11))
            .op(0x89)
            .bstr(&raw)
            .op(b't')
            .op(b'b');
        let w = w
            .get(7)
            .get(8)
            .int(0)
            .op(0x85)
            .sstr(b"b")
            .op(0x87)
            .op(b'R')
            .op(b'(')
            .int(1)
            .int(1)
            .op(0x85)
            .get(11)
            .op(0x89)
            .bstr(&raw)
            .op(b't')
            .op(b'b');
        let v = parse(&w.op(b'l').stop(), "f").unwrap();
        let PickleValue::List(items) = v else { panic!() };
        for item in &items {
            let a = ndarray_from_value(item, "f").unwrap();
            assert_eq!((a.dtype.as_str(), a.data.clone()), ("<f4", NdData::F32(vec![1.5])));
        }
    }

    #[test]
    fn numpy_array_2d() {
        let raw = i32s(&[0, 1, 1, 0, 0, 0]);
        let bytes = W::default().proto().ndarray(&[3, 2], b"<", b"i4", &raw).stop();
        let v = parse(&bytes, "ind.t.y").unwrap();
        let a = ndarray_from_value(&v, "ind.t.y").unwrap();
        assert_eq!(a.dtype, "<i4");
        assert_eq!(a.shape, vec![3, 2]);
        assert!(!a.fortran);
        assert_eq!(a.get2(0, 1), 1.0);
        assert_eq!(a.get2(1, 0), 1.0);
        assert_eq!(a.to_i64_c_order("f").unwrap(), vec![0, 1, 1, 0, 0, 0]);
    }

    #[test]
    fn numpy_fortran_order() {
        // 2x3 [[1,2,3],[4,5,6]] stored column-major.
        let raw: Vec<u8> = [1i64, 4, 2, 5, 3, 6].iter().flat_map(|x| x.to_le_bytes()).collect();
        let mut w = W::default().proto().ndarray(&[2, 3], b"<", b"i8", &raw);
        // flip the NEWFALSE (fortran flag) to NEWTRUE
        let i = w.0.iter().rposition(|&b| b == 0x89).unwrap();
        w.0[i] = 0x88;
        let a = ndarray_from_value(&parse(&w.stop(), "f").unwrap(), "f").unwrap();
        assert!(a.fortran);
        assert_eq!(a.get2(0, 2), 3.0);
        assert_eq!(a.get2(1, 0), 4.0);
        assert_eq!(a.to_i64_c_order("f").unwrap(), vec![1, 2, 3, 4, 5, 6]);
    }

    #[test]
    fn unsupported_dtype_and_size_mismatch() {
        let bytes = W::default().proto().ndarray(&[2], b">", b"f4", &[0; 8]).stop();
        let e = ndarray_from_value(&parse(&bytes, "ind.t.y").unwrap(), "ind.t.y").unwrap_err();
        assert!(e.message().contains("unsupported numpy dtype '>f4'"), "{e}");
        let bytes = W::default().proto().ndarray(&[3], b"<", b"f4", &[0; 8]).stop();
        let e = ndarray_from_value(&parse(&bytes, "ind.t.y").unwrap(), "ind.t.y").unwrap_err();
        assert!(e.message().contains("needs 12 bytes but has 8"), "{e}");
    }

    fn csr_pickle(shape: (i64, i64), indptr: &[i32], indices: &[i32], data: &[f32]) -> Vec<u8> {
        W::default()
            .proto()
            .global("scipy.sparse.csr", "csr_matrix")
            .put(1)
            .op(b')')
            .op(0x81)
            .op(b'}')
            .op(b'(')
            .sstr(b"format")
            .sstr(b"csr")
            .sstr(b"_shape")
            .int(shape.0)
            .int(shape.1)
            .op(0x86)
            .sstr(b"indptr")
            .ndarray(&[indptr.len() as i64], b"<", b"i4", &i32s(indptr))
            .sstr(b"indices")
            .ndarray(&[indices.len() as i64], b"<", b"i4", &i32s(indices))
            .sstr(b"data")
            .ndarray(&[data.len() as i64], b"<", b"f4", &f32s(data))
            .op(b'u')
            .op(b'b')
            .stop()
    }

    #[test]
    fn csr_matrix_roundtrip_and_canonical() {
        // row 0: cols 2, 0 (unsorted); row 1: col 1 twice (duplicates) and an explicit zero.
        let bytes = csr_pickle((2, 3), &[0, 2, 5], &[2, 0, 1, 1, 2], &[1.0, 2.0, 0.5, 0.25, 0.0]);
        let m = csr_from_value(&parse(&bytes, "ind.t.x").unwrap(), "ind.t.x").unwrap();
        assert_eq!((m.nrows, m.ncols), (2, 3));
        assert_eq!(m.indptr, vec![0, 2, 3]);
        assert_eq!(m.indices, vec![0, 2, 1]);
        assert_eq!(m.values, vec![2.0, 1.0, 0.75]);
    }

    #[test]
    fn csr_matrix_invalid() {
        let bytes = csr_pickle((2, 3), &[0, 1, 2], &[0, 3], &[1.0, 1.0]);
        let e = csr_from_value(&parse(&bytes, "ind.t.x").unwrap(), "ind.t.x").unwrap_err();
        assert!(e.message().contains("column index 3 out of range for 3 columns"), "{e}");
        let bytes = csr_pickle((3, 3), &[0, 1, 2], &[0, 1], &[1.0, 1.0]);
        let e = csr_from_value(&parse(&bytes, "ind.t.x").unwrap(), "ind.t.x").unwrap_err();
        assert!(e.message().contains("ind.t.x") && e.message().contains("nrows+1"), "{e}");
    }

    #[test]
    fn defaultdict_adjacency() {
        let bytes = W::default()
            .proto()
            .global("collections", "defaultdict")
            .put(1)
            .global("__builtin__", "list")
            .put(2)
            .op(0x85)
            .op(b'R')
            .put(3)
            .op(b'(')
            .int(0)
            .op(b']')
            .op(b'(')
            .int(5)
            .int(70000)
            .op(b'e')
            .int(1)
            .op(b']')
            .int(0)
            .op(b'a')
            .op(b'u')
            .stop();
        let adj = adjacency_from_value(&parse(&bytes, "ind.t.graph").unwrap(), "ind.t.graph").unwrap();
        assert_eq!(adj, vec![(0, vec![5, 70000]), (1, vec![0])]);
    }

    #[test]
    fn unknown_opcode_is_named() {
        let bytes = [0x80, 4, 0x95, 0, 0, 0, 0, 0, 0, 0, 0, b'.'];
        let e = parse(&bytes, "ind.cora.x").unwrap_err();
        assert_eq!(e.message(), "ind.cora.x: unsupported pickle opcode 0x95 ('FRAME') at byte 2");
        let e = parse(&[0x80, 2, b'Z'], "f").unwrap_err();
        assert_eq!(e.message(), "f: unsupported pickle opcode 0x5a ('not an opcode') at byte 2");
    }

    #[test]
    fn truncated_input() {
        let full = W::default().proto().bstr(&[1, 2, 3, 4, 5, 6]).stop();
        // Cut inside the string payload.
        let e = parse(&full[..9], "ind.t.x").unwrap_err();
        assert!(e.message().starts_with("ind.t.x: truncated pickle: opcode 0x54 ('BINSTRING') at byte 2"), "{e}");
        assert!(e.message().contains("needs 6 more bytes but only 2 remain"), "{e}");
        // Cut inside the length.
        let e = parse(&full[..4], "ind.t.x").unwrap_err();
        assert!(e.message().contains("truncated pickle") && e.message().contains("at byte 2"), "{e}");
        // Missing STOP.
        let e = parse(&full[..full.len() - 1], "ind.t.x").unwrap_err();
        assert!(e.message().contains("no STOP opcode"), "{e}");
        // Empty input.
        assert!(parse(&[], "ind.t.x").unwrap_err().to_string().contains("truncated"));
    }

    #[test]
    fn unexpected_global_and_bad_structure() {
        let bytes = W::default().proto().global("os", "system").stop();
        let e = parse(&bytes, "evil").unwrap_err();
        assert_eq!(e.message(), "evil: pickle opcode 0x63 ('GLOBAL') at byte 2: unexpected global 'os.system'");
        let e = parse(&W::default().proto().op(b't').stop(), "f").unwrap_err();
        assert!(e.message().contains("no MARK"), "{e}");
        let e = parse(&W::default().proto().op(b'a').stop(), "f").unwrap_err();
        assert!(e.message().contains("stack underflow"), "{e}");
        let e = parse(&W::default().proto().get(3).stop(), "f").unwrap_err();
        assert!(e.message().contains("memo entry 3"), "{e}");
        let e = parse(&W::default().proto().int(1).int(2).stop(), "f").unwrap_err();
        assert!(e.message().contains("left on the stack"), "{e}");
        let mut trailing = W::default().proto().int(1).stop();
        trailing.push(0);
        assert!(parse(&trailing, "f").unwrap_err().to_string().contains("trailing"));
        // A list that contains itself.
        let e = parse(&W::default().proto().op(b']').put(0).get(0).op(b'a').stop(), "f").unwrap_err();
        assert!(e.message().contains("cycle"), "{e}");
    }

    #[test]
    fn interpretation_errors_name_the_file() {
        let bytes = W::default().proto().int(3).stop();
        let v = parse(&bytes, "ind.t.x").unwrap();
        assert!(csr_from_value(&v, "ind.t.x")
            .unwrap_err()
            .to_string()
            .starts_with("ind.t.x: expected a scipy csr_matrix"));
        assert!(ndarray_from_value(&v, "ind.t.y")
            .unwrap_err()
            .to_string()
            .starts_with("ind.t.y: expected a numpy array"));
        assert!(adjacency_from_value(&v, "ind.t.graph")
            .unwrap_err()
            .to_string()
            .starts_with("ind.t.graph: expected a dict"));
    }

    /// Runs the machine over `bytes` and returns the result with the parser, whose
    /// counters show how far it went.
    fn run_parser(bytes: &[u8]) -> (Result<usize>, Parser<'_>) {
        let mut p = Parser::new(bytes, "ind.cora.x");
        let r = p.run();
        (r, p)
    }

    #[test]
    fn the_charge_per_object_covers_its_real_size() {
        // What an object really takes (node, tree value, stack and container slots, size
        // and origin records, reference count and path flag) is within OBJECT_COST, so the
        // budget bounds the memory.
        let real = size_of::<Node>()
            + size_of::<PickleValue>()
            + 3 * size_of::<usize>()
            + size_of::<(usize, u8)>()
            + size_of::<u32>()
            + 1;
        assert!(real <= OBJECT_COST, "{real} > {OBJECT_COST}");
        assert!(size_of::<PickleValue>() <= 32 && size_of::<Node>() <= 32);
        assert_eq!(budget_for(1000), 64 * 1000 + (1 << 20));
        assert_eq!(budget_for(usize::MAX), usize::MAX);
    }

    #[test]
    fn a_repetition_bomb_is_refused_within_the_budget() {
        // [None] * n, each None one byte: the objects need twice the budget.
        let n = 1_000_000;
        let mut w = W::default().proto().op(b']').op(b'(');
        w.0.extend(std::iter::repeat_n(b'N', n));
        let bytes = w.op(b'e').stop();
        let (r, p) = run_parser(&bytes);
        let e = r.unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::Data);
        let budget = budget_for(bytes.len());
        assert_eq!(p.budget, budget);
        assert!(
            e.message().starts_with("ind.cora.x: pickle opcode 0x4e ('NONE') at byte ")
                && e.message().contains(&format!("more than {budget} bytes of memory")),
            "{e}"
        );
        // Refused before the object past the budget was stored: the arena never held more
        // than the budget allows.
        assert!(p.used <= budget && p.arena.len() <= budget / OBJECT_COST, "{} objects", p.arena.len());
        assert!(p.arena.len() < n * 3 / 4);
        // The same list within the budget parses.
        let mut w = W::default().proto().op(b']').op(b'(');
        w.0.extend(std::iter::repeat_n(b'N', 1000));
        let v = parse(&w.op(b'e').stop(), "t").unwrap();
        assert_eq!(v, PickleValue::List(vec![PickleValue::None; 1000]));
    }

    #[test]
    fn a_memo_reference_bomb_is_refused_before_copying() {
        // One 1 MiB string referenced 5,000 times (BINGET): 5 GB as a tree.
        let big = vec![b'a'; 1 << 20];
        let mut w = W::default().proto().op(b']').op(b'(').bstr(&big).put(0);
        for _ in 0..5000 {
            w = w.get(0);
        }
        let bytes = w.op(b'e').stop();
        let (r, p) = run_parser(&bytes);
        let e = r.unwrap_err();
        assert!(e.message().starts_with("ind.cora.x: pickle opcode 0x68 ('BINGET') at byte "), "{e}");
        assert!(e.message().contains("bytes of memory"), "{e}");
        // Refused at a reference: only the string itself was ever stored, and the
        // references charged stay within the budget (about 65 of the 5,000).
        assert_eq!(p.arena.len(), 2);
        let refs = p.stack.len() - 2;
        assert!(refs <= p.budget / (1 << 20) && refs < 100, "{refs} references");
        // A few references within the budget parse, each a copy of the string.
        let w = W::default().proto().op(b'(').sstr(b"ab").put(0).get(0).get(0).op(b't');
        let v = parse(&w.stop(), "t").unwrap();
        assert_eq!(v, PickleValue::Tuple(vec![PickleValue::Bytes(b"ab".to_vec()); 3]));
    }

    #[test]
    fn sharing_made_by_a_later_mutation_is_charged_when_copied() {
        // l = []; (l, l, …, l) with 5,000 references taken while l is empty, then a 1 MiB
        // string appended to l: each reference becomes a copy of it in the tree.
        let big = vec![b'a'; 1 << 20];
        let mut w = W::default().proto().op(b'(').op(b']').put(0);
        for _ in 0..4999 {
            w = w.get(0);
        }
        let bytes = w.bstr(&big).op(b'a').op(b't').stop();
        let at = bytes.len() - (1 << 20) - 5 - 3;
        let e = parse(&bytes, "ind.cora.x").unwrap_err();
        assert!(
            e.message().starts_with(&format!(
                "ind.cora.x: pickle opcode 0x54 ('BINSTRING') at byte {at}: the object it made is shared so often"
            )),
            "{e}"
        );
    }

    #[test]
    fn sizes_past_32_bits_are_read_exactly() {
        // A `_shape` of 2^32 + 2 rows was read as 2 rows on wasm32.
        let rows = (1i64 << 32) + 2;
        let bytes = csr_pickle((rows, 3), &[0, 1, 2], &[0, 1], &[1.0, 1.0]);
        let v = parse(&bytes, "ind.t.x").unwrap();
        let e = csr_from_value(&v, "ind.t.x").unwrap_err();
        assert_eq!(e.message(), "ind.t.x: matrix rows is 4294967298, more than the limit of 4294967295");
        let bytes = csr_pickle((2, (1i64 << 32) + 3), &[0, 1, 2], &[0, 1], &[1.0, 1.0]);
        let e = csr_from_value(&parse(&bytes, "ind.t.x").unwrap(), "ind.t.x").unwrap_err();
        assert_eq!(e.message(), "ind.t.x: matrix columns is 4294967299, more than the limit of 4294967295");
        // The largest 64-bit values are read whole, not wrapped.
        let bytes = csr_pickle((i64::MAX, 3), &[0, 1, 2], &[0, 1], &[1.0, 1.0]);
        let e = csr_from_value(&parse(&bytes, "ind.t.x").unwrap(), "ind.t.x").unwrap_err();
        assert!(e.message().contains(&format!("matrix rows is {}", i64::MAX)), "{e}");
        // An array dimension past 32 bits.
        let bytes = W::default().proto().ndarray(&[(1i64 << 32) + 1], b"<", b"f4", &f32s(&[1.0])).stop();
        let e = ndarray_from_value(&parse(&bytes, "ind.t.y").unwrap(), "ind.t.y").unwrap_err();
        assert_eq!(e.message(), "ind.t.y: array dimension is 4294967297, more than the limit of 4294967295");
        // Exactly 2^32 - 1 is a size (then refused by the data's length, not cut).
        let bytes = csr_pickle((u32::MAX as i64, 3), &[0, 1, 2], &[0, 1], &[1.0, 1.0]);
        let e = csr_from_value(&parse(&bytes, "ind.t.x").unwrap(), "ind.t.x").unwrap_err();
        assert!(e.message().contains("nrows+1"), "{e}");
    }
}
