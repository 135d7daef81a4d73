//! A parameter or buffer of a module: its shape, dtype and how it is initialised, with the
//! value made on first need (PyTorch's `meta` device, accelerate's `init_empty_weights`).
//!
//! Tracing and planning read only the shape and dtype, so a model of any size is traced
//! and planned without its weights being allocated. The value is made (allocated fallibly
//! and filled by the [`Init`] recipe) the first time something needs it: a run, a copy to
//! the host, a state dict, training. Each random recipe carries its own seed, drawn from
//! the caller's generator when the parameter is created, and draws only from that seed: a
//! parameter gets the same values whether it is materialised early or late, and whatever
//! else was materialised before it.
//!
//! A `Param` is a shared handle (cheap to clone): clones are the same parameter, and
//! materialise once.

use super::alloc::{check_usize_shape, try_vec};
use super::{DType, Tensor};
use crate::rng::Rng;
use crate::{Error, Result};
use std::cell::RefCell;
use std::fmt;
use std::rc::Rc;

/// How a parameter's value is made.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Init {
    /// Uniform in `[-bound, bound)`, drawn from a generator seeded with `seed`.
    Uniform { bound: f32, seed: u64 },
    /// Standard normal, drawn from a generator seeded with `seed`.
    Normal { seed: u64 },
    /// Every element `value`.
    Fill(f32),
}

impl Init {
    /// Uniform in `[-bound, bound)` with a seed drawn from `rng` (one draw).
    pub fn uniform(bound: f32, rng: &mut Rng) -> Init {
        Init::Uniform { bound, seed: rng.next_u64() }
    }
    /// Standard normal with a seed drawn from `rng` (one draw).
    pub fn normal(rng: &mut Rng) -> Init {
        Init::Normal { seed: rng.next_u64() }
    }
}

enum Source {
    /// Made by a recipe, in float32, then cast to the parameter's dtype.
    Init(Init),
    /// A value given whole (a user's values, a loaded or trained state).
    Given,
}

struct Inner {
    shape: Vec<usize>,
    dtype: DType,
    source: Source,
    value: RefCell<Option<Rc<Tensor>>>,
}

/// A parameter or buffer (see the module docs).
#[derive(Clone)]
pub struct Param(Rc<Inner>);

impl Param {
    /// A parameter of `shape` and `dtype` made by `init` when first needed. The shape is
    /// checked against the tensor limits now (the error names `what`), nothing is allocated.
    pub fn new(what: &str, shape: &[usize], dtype: DType, init: Init) -> Result<Param> {
        check_usize_shape(what, shape, dtype)?;
        if !dtype.is_float() {
            return Err(Error::trace(format!("{what}: an initialised parameter is a float tensor, not {dtype}")));
        }
        Ok(Param(Rc::new(Inner {
            shape: shape.to_vec(),
            dtype,
            source: Source::Init(init),
            value: RefCell::new(None),
        })))
    }

    /// A parameter holding `value` (already materialised).
    pub fn from_tensor(value: impl Into<Rc<Tensor>>) -> Param {
        let value: Rc<Tensor> = value.into();
        Param(Rc::new(Inner {
            shape: value.shape().to_vec(),
            dtype: value.dtype(),
            source: Source::Given,
            value: RefCell::new(Some(value)),
        }))
    }

    pub fn shape(&self) -> &[usize] {
        &self.0.shape
    }

    pub fn dtype(&self) -> DType {
        self.0.dtype
    }

    /// Elements.
    pub fn numel(&self) -> usize {
        self.0.shape.iter().product()
    }

    /// Bytes of the value (materialised or not).
    pub fn nbytes(&self) -> usize {
        self.numel() * self.0.dtype.size()
    }

    /// Whether the value has been made.
    pub fn is_materialised(&self) -> bool {
        self.0.value.borrow().is_some()
    }

    /// The recipe of a parameter not given whole.
    pub fn init(&self) -> Option<Init> {
        match self.0.source {
            Source::Init(i) => Some(i),
            Source::Given => None,
        }
    }

    /// Whether `other` is this same parameter: a clone of the handle, or a handle on the
    /// same given tensor.
    pub fn same(&self, other: &Param) -> bool {
        self.id() == other.id()
    }

    /// The identity [`Param::same`] compares: the given tensor's address, or the handle's.
    pub fn id(&self) -> *const () {
        match (&self.0.source, self.0.value.borrow().as_ref()) {
            (Source::Given, Some(v)) => Rc::as_ptr(v) as *const (),
            _ => Rc::as_ptr(&self.0) as *const (),
        }
    }

    /// The value, made now if it was not yet (allocated fallibly; the error names the
    /// parameter's type and bytes).
    pub fn value(&self) -> Result<Rc<Tensor>> {
        if let Some(v) = self.0.value.borrow().as_ref() {
            return Ok(v.clone());
        }
        let Source::Init(init) = self.0.source else { unreachable!("a given parameter holds its value") };
        let what = format!("a parameter {}{:?}", self.0.dtype, self.0.shape);
        let mut data = try_vec(&what, self.numel(), 0f32)?;
        match init {
            Init::Uniform { bound, seed } => Rng::new(seed).fill_uniform(&mut data, -bound, bound),
            Init::Normal { seed } => Rng::new(seed).fill_normal(&mut data),
            Init::Fill(v) => data.fill(v),
        }
        let t = Tensor::from_f32(&self.0.shape, data)?;
        let t = Rc::new(if self.0.dtype == DType::Float32 { t } else { t.cast(self.0.dtype) });
        *self.0.value.borrow_mut() = Some(t.clone());
        Ok(t)
    }

    /// This parameter in another float dtype (`half()`, `float()`): a recipe stays a recipe
    /// (its values are those of the float32 recipe cast), a value is cast now.
    pub fn cast(&self, dtype: DType) -> Param {
        if dtype == self.0.dtype {
            return self.clone();
        }
        match (&self.0.source, self.0.value.borrow().as_ref()) {
            (Source::Init(init), None) => Param(Rc::new(Inner {
                shape: self.0.shape.clone(),
                dtype,
                source: Source::Init(*init),
                value: RefCell::new(None),
            })),
            (_, Some(v)) => Param::from_tensor(v.cast(dtype)),
            (Source::Given, None) => unreachable!("a given parameter holds its value"),
        }
    }
}

impl From<Tensor> for Param {
    fn from(t: Tensor) -> Param {
        Param::from_tensor(t)
    }
}

impl From<Rc<Tensor>> for Param {
    fn from(t: Rc<Tensor>) -> Param {
        Param::from_tensor(t)
    }
}

impl From<&Rc<Tensor>> for Param {
    fn from(t: &Rc<Tensor>) -> Param {
        Param::from_tensor(t.clone())
    }
}

impl From<&Param> for Param {
    fn from(p: &Param) -> Param {
        p.clone()
    }
}

impl fmt::Debug for Param {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = if self.is_materialised() { "materialised" } else { "not materialised" };
        write!(f, "Param({}{:?}, {state})", self.0.dtype, self.0.shape)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recipe_allocates_nothing_until_read_and_then_once() {
        let mut rng = Rng::new(5);
        let p = Param::new("w", &[3, 4], DType::Float32, Init::uniform(0.5, &mut rng)).unwrap();
        assert!(!p.is_materialised());
        assert_eq!((p.shape(), p.dtype(), p.numel(), p.nbytes()), (&[3usize, 4][..], DType::Float32, 12, 48));
        let q = p.clone();
        let v = p.value().unwrap();
        assert!(q.is_materialised() && Rc::ptr_eq(&v, &q.value().unwrap()));
        assert!(v.to_f32_vec().iter().all(|x| (-0.5..0.5).contains(x)));
        // The values are those of the seed the generator gave, drawn from that seed alone.
        let seed = Rng::new(5).next_u64();
        let mut want = vec![0f32; 12];
        Rng::new(seed).fill_uniform(&mut want, -0.5, 0.5);
        assert_eq!(v.to_f32_vec(), want);
    }

    #[test]
    fn values_do_not_depend_on_the_order_of_materialisation() {
        let make = || {
            let mut rng = Rng::new(9);
            let a = Param::new("a", &[5], DType::Float32, Init::normal(&mut rng)).unwrap();
            let b = Param::new("b", &[2, 3], DType::Float32, Init::uniform(1.0, &mut rng)).unwrap();
            (a, b)
        };
        let (a1, b1) = make();
        let (a1, b1) = (a1.value().unwrap(), b1.value().unwrap());
        let (a2, b2) = make();
        let b2 = b2.value().unwrap();
        let a2 = a2.value().unwrap();
        assert_eq!((a1, b1), (a2, b2));
    }

    #[test]
    fn a_cast_recipe_stays_lazy_and_equals_the_cast_value() {
        let mut rng = Rng::new(1);
        let p = Param::new("w", &[4], DType::Float32, Init::normal(&mut rng)).unwrap();
        let h = p.cast(DType::Float16);
        assert!(!h.is_materialised() && !p.is_materialised());
        assert_eq!(*h.value().unwrap(), p.value().unwrap().cast(DType::Float16));
        let f = Param::from_tensor(Tensor::full(&[2], DType::Float32, 1.5)).cast(DType::Float16);
        assert!(f.is_materialised() && f.dtype() == DType::Float16);
        let ones = Param::new("ln", &[3], DType::Float32, Init::Fill(1.0)).unwrap();
        assert_eq!(ones.value().unwrap().to_f32_vec(), vec![1.0; 3]);
    }

    #[test]
    fn sizes_past_the_limits_are_errors_before_anything_is_made() {
        let e = Param::new("Linear(100000, 100000): the weight", &[100_000, 100_000], DType::Float32, Init::Fill(0.0))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("Linear(100000, 100000): the weight: f32[100000,100000] needs 40000000000 bytes"), "{e}");
        assert!(Param::new("i", &[2], DType::Int32, Init::Fill(0.0)).is_err());
    }
}
