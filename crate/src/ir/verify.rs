//! The verifier: every node's output types agree with shape inference, every input is
//! defined before it is used, and outputs exist. Regions are verified recursively.

use super::graph::{describe_site, Graph};
use super::op::Op;
use super::shape::infer;
use crate::{Error, Result};

/// Checks a graph; the first problem found is returned, naming the node.
pub fn verify(g: &Graph) -> Result<()> {
    let mut defined = vec![false; g.values.len()];
    for (i, n) in g.nodes.iter().enumerate() {
        let site = || format!("node {i} {}", describe_site(&n.op, &n.meta));
        for &v in &n.inputs {
            match defined.get(v.0 as usize) {
                None => return Err(Error::ir(format!("{}: input {v} does not exist", site()))),
                Some(false) => return Err(Error::ir(format!("{}: input {v} is used before it is defined", site()))),
                Some(true) => {}
            }
        }
        let expected = match &n.op {
            Op::Placeholder { .. } => None,
            Op::Constant { value, .. } => Some(vec![super::TensorType::new(value.shape(), value.dtype())]),
            op => {
                let ins: Vec<_> = n.inputs.iter().map(|&v| g.ty(v)).collect();
                Some(infer(op, &ins).map_err(|e| e.context(site()))?)
            }
        };
        if let Some(tys) = expected {
            let got: Vec<_> = n.outputs.iter().map(|&v| g.ty(v).clone()).collect();
            if got != tys {
                return Err(Error::ir(format!("{}: outputs are typed {got:?} but the op gives {tys:?}", site())));
            }
        }
        for &v in &n.outputs {
            let slot = defined
                .get_mut(v.0 as usize)
                .ok_or_else(|| Error::ir(format!("{}: output {v} does not exist", site())))?;
            if *slot {
                return Err(Error::ir(format!("{}: output {v} is defined twice", site())));
            }
            if g.values[v.0 as usize].node != i {
                return Err(Error::ir(format!("{}: output {v} names another producer", site())));
            }
            *slot = true;
        }
        if let Op::Call { region } | Op::InvertibleBackward { region, .. } = &n.op {
            verify(&region.forward).map_err(|e| e.context(format!("region '{}'", region.name)))?;
            if let Some(inv) = &region.inverse {
                verify(inv).map_err(|e| e.context(format!("inverse of '{}'", region.name)))?;
            }
        }
    }
    for &v in &g.outputs {
        if !defined.get(v.0 as usize).copied().unwrap_or(false) {
            return Err(Error::ir(format!("graph output {v} is not defined")));
        }
    }
    Ok(())
}
