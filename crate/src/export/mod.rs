//! A wrapped model out as Python, as torch.fx generates code from its graph: the traced
//! forward graph becomes a `torch.nn.Module` whose `forward` is one statement per node
//! (`python.rs`), PopTorch's options, strategy and optimizer become the calls that set them
//! (`poptorch.rs`), and `script.rs` assembles the file: for [`Target::Poptorch`] the code
//! that runs on an IPU-POD (Blocks as planned, `poptorch.trainingModel` /
//! `inferenceModel`); for [`Target::Pytorch`] the same model with plain `torch` for CPUs
//! and GPUs, with a training loop. Both load the weights from the safetensors file
//! [`weights`] writes, under the state-dict names the trace gave them.
//!
//! [`reference`] runs one step of the engine on given inputs and returns what an export
//! must reproduce (outputs, loss, every parameter gradient) with the dropout masks the
//! engine drew, which `make check-export` feeds to the exported PyTorch model.

pub mod leaves;
pub mod poptorch;
pub mod python;
pub mod reference;
pub mod rev;
pub mod script;
pub mod syntax;

use crate::ir::InputKind;
use crate::poptorch::{HostModel, PoplarExecutor};
use crate::tensor::{safetensors, Tensor};
use crate::{Error, Result};
use ndarray::Axis;
use std::collections::BTreeMap;
use std::rc::Rc;

/// Which Python the export writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// PopTorch: Blocks, options, strategy, `poptorch.optim`, the wrapper.
    Poptorch,
    /// PyTorch (and PyG-compatible plain torch): no PopTorch, a training loop.
    Pytorch,
}

impl Target {
    /// `"poptorch"` or `"pytorch"`.
    pub fn parse(s: &str) -> Result<Target> {
        match s {
            "poptorch" => Ok(Target::Poptorch),
            "pytorch" => Ok(Target::Pytorch),
            other => Err(Error::export(format!("unknown export target '{other}': use \"poptorch\" or \"pytorch\""))),
        }
    }
}

/// The `.py` file for wrapped model `exec` (which must have been traced: called, compiled
/// or planned), reading its weights from `<stem>.safetensors` beside it. No weight is
/// materialised: the code needs only shapes.
pub fn to_python(exec: &PoplarExecutor, target: Target, stem: &str) -> Result<String> {
    if !exec.model().is_traced() {
        return Err(Error::export(
            "the model has not been traced yet: call, compile or plan it first (PopTorch traces it with the \
             micro-batch shapes of its first call)",
        ));
    }
    script::script(exec, target, stem)
}

/// The model's parameters and buffers as a safetensors file under their state-dict names (a
/// tied parameter under each of its names, as PyTorch's `state_dict` lists it). This
/// materialises the weights.
pub fn weights(model: &HostModel) -> Result<Vec<u8>> {
    let (params, buffers) = host_values(model)?;
    let mut values: Vec<(String, Rc<Tensor>)> = params.iter().chain(buffers.iter()).cloned().collect();
    for (name, source) in model.tied() {
        if let Some((_, t)) = params.iter().find(|(n, _)| *n == source) {
            values.push((name, t.clone()));
        }
    }
    let refs: Vec<(String, &crate::tensor::Tensor)> = values.iter().map(|(n, t)| (n.clone(), t.as_ref())).collect();
    let mut meta = BTreeMap::new();
    meta.insert("format".to_string(), "pt".to_string());
    safetensors::write(&refs, &meta)
}

/// Tensors by state-dict name.
pub type NamedValues = Vec<(String, Rc<Tensor>)>;

/// The host values of the model's parameters and buffers, each of its traced shape: a
/// replica-grouped weight, held as one slice per group (`[groups, …]`), is its first group's
/// slice (one replica's model, as the exported code has it).
pub fn host_values(model: &HostModel) -> Result<(NamedValues, NamedValues)> {
    let g = model.graph();
    let traced = |kind: InputKind, name: &str| {
        g.placeholders(kind).into_iter().find(|(n, _)| *n == name).map(|(_, v)| g.ty(v).shape.clone())
    };
    let one = |kind: InputKind, (name, p): (String, crate::tensor::Param)| -> Result<(String, Rc<Tensor>)> {
        let t = p.value()?;
        match traced(kind, &name) {
            Some(shape) if shape.as_slice() != t.shape() => {
                if t.shape().len() != shape.len() + 1 || t.shape()[1..] != shape[..] {
                    return Err(Error::export(format!(
                        "'{name}': the host value's shape {:?} is neither the traced {shape:?} nor one slice of it per \
                         replica group",
                        t.shape()
                    )));
                }
                let first = match &*t {
                    Tensor::F32(a) => Tensor::F32(a.index_axis(Axis(0), 0).to_owned()),
                    Tensor::F16(a) => Tensor::F16(a.index_axis(Axis(0), 0).to_owned()),
                    Tensor::I32(a) => Tensor::I32(a.index_axis(Axis(0), 0).to_owned()),
                    Tensor::Bool(a) => Tensor::Bool(a.index_axis(Axis(0), 0).to_owned()),
                };
                Ok((name, Rc::new(first)))
            }
            _ => Ok((name, t)),
        }
    };
    let params = model.parameters().into_iter().map(|e| one(InputKind::Parameter, e)).collect::<Result<_>>()?;
    let buffers = model.buffers().into_iter().map(|e| one(InputKind::Buffer, e)).collect::<Result<_>>()?;
    Ok((params, buffers))
}
