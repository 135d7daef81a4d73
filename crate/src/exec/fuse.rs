//! Lowering for the CPU executor: rewrites that merge ops so that fewer full-size
//! intermediates are written and read back. It runs on finished graphs (after autograd:
//! the fused ops have no gradient rules) and keeps every node's meta (scope, Block/IPU,
//! pass, source), so the fused graph still reads like the traced one.
//!
//! - `Add(Linear(x, w, b?), r)` or `Add(r, Linear(…))` → `LinearAdd(x, w, b?, r)` when the
//!   Linear's output has no other use and `r` already has the sum's type (no broadcast):
//!   the matrix product starts from `r` instead of writing its own output for the add to
//!   read (a SAGEConv's `lin_l(agg) + lin_r(x)`).
//!
//! Region bodies (`Call`) and the backward graphs of invertible regions
//! (`InvertibleBackward`) are rewritten too.

use crate::ir::simplify::copy_node;
use crate::ir::{BinaryKind, Graph, Op, Region, ValueId};
use crate::{Error, Result};
use std::collections::HashMap;
use std::rc::Rc;

/// `g` with every fusion above applied, in it and in its regions.
pub fn fuse(g: &Graph) -> Result<Graph> {
    Fuser { regions: HashMap::new() }.graph(g)
}

struct Fuser {
    /// Rewritten regions by their original, so a region shared by a `Call` and its
    /// `InvertibleBackward` stays shared.
    regions: HashMap<*const Region, Rc<Region>>,
}

impl Fuser {
    fn graph(&mut self, g: &Graph) -> Result<Graph> {
        let mut uses = vec![0usize; g.values.len()];
        for n in &g.nodes {
            for v in &n.inputs {
                uses[v.0 as usize] += 1;
            }
        }
        for v in &g.outputs {
            uses[v.0 as usize] += 1;
        }
        // add node → (linear node, addend); linear nodes folded into an add
        let mut fused: HashMap<usize, (usize, ValueId)> = HashMap::new();
        let mut folded = vec![false; g.nodes.len()];
        for (i, n) in g.nodes.iter().enumerate() {
            if !matches!(n.op, Op::Binary { kind: BinaryKind::Add }) {
                continue;
            }
            let out_ty = g.ty(n.outputs[0]);
            for (lin, other) in [(n.inputs[0], n.inputs[1]), (n.inputs[1], n.inputs[0])] {
                let p = g.values[lin.0 as usize].node;
                let fusable = matches!(g.nodes[p].op, Op::Linear { .. })
                    && !folded[p]
                    && uses[lin.0 as usize] == 1
                    && lin != other
                    && g.ty(other) == out_ty
                    && g.ty(lin) == out_ty;
                if fusable {
                    fused.insert(i, (p, other));
                    folded[p] = true;
                    break;
                }
            }
        }
        let mut out = Graph::new();
        let mut map: Vec<Option<ValueId>> = vec![None; g.values.len()];
        let get = |map: &Vec<Option<ValueId>>, v: ValueId| {
            map[v.0 as usize].ok_or_else(|| Error::ir(format!("fuse: {v} is used before it is defined")))
        };
        for (i, n) in g.nodes.iter().enumerate() {
            if folded[i] {
                continue;
            }
            let outs = if let Some(&(p, addend)) = fused.get(&i) {
                let lin = &g.nodes[p];
                let Op::Linear { has_bias } = lin.op else { unreachable!("only Linear nodes are folded") };
                let mut inputs =
                    lin.inputs.iter().map(|&v| get(&map, v)).collect::<std::result::Result<Vec<_>, _>>()?;
                inputs.push(get(&map, addend)?);
                out.add(Op::LinearAdd { has_bias }, inputs, lin.meta.clone())?
            } else {
                let inputs = n.inputs.iter().map(|&v| get(&map, v)).collect::<std::result::Result<Vec<_>, _>>()?;
                match &n.op {
                    Op::Call { region } => {
                        let region = self.region(region)?;
                        out.add(Op::Call { region }, inputs, n.meta.clone())?
                    }
                    Op::InvertibleBackward { region, vjp, needs_grad } => {
                        let op = Op::InvertibleBackward {
                            region: self.region(region)?,
                            vjp: Rc::new(self.graph(vjp)?),
                            needs_grad: needs_grad.clone(),
                        };
                        out.add(op, inputs, n.meta.clone())?
                    }
                    _ => copy_node(&mut out, g, n, inputs)?,
                }
            };
            for (o, v) in n.outputs.iter().zip(outs) {
                map[o.0 as usize] = Some(v);
            }
        }
        out.outputs = g.outputs.iter().map(|&v| get(&map, v)).collect::<std::result::Result<_, _>>()?;
        Ok(out)
    }

    fn region(&mut self, r: &Rc<Region>) -> Result<Rc<Region>> {
        if let Some(done) = self.regions.get(&Rc::as_ptr(r)) {
            return Ok(done.clone());
        }
        let new = Rc::new(Region {
            name: r.name.clone(),
            forward: self.graph(&r.forward)?,
            inverse: r.inverse.as_ref().map(|g| self.graph(g)).transpose()?,
        });
        self.regions.insert(Rc::as_ptr(r), new.clone());
        Ok(new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::{run, Store};
    use crate::rng::Rng;
    use crate::tensor::{DType, Tensor};
    use crate::trace::Tracer;

    fn rand(rng: &mut Rng, shape: &[usize]) -> Rc<Tensor> {
        let n: usize = shape.iter().product();
        Rc::new(Tensor::from_f32(shape, (0..n).map(|_| rng.uniform_range(-1.0, 1.0)).collect()).unwrap())
    }

    fn op_names(g: &Graph) -> Vec<&'static str> {
        g.nodes.iter().map(|n| n.op.name()).filter(|n| !matches!(*n, "input" | "parameter")).collect()
    }

    /// SAGEConv's shape: `lin_l(a) + lin_r(x)` fuses (one Linear into the add); a Linear
    /// whose output is used twice, and an add that broadcasts, stay as they are. The fused
    /// graph computes what the traced one does.
    #[test]
    fn linear_then_add_becomes_linear_add_only_where_nothing_else_reads_the_product() {
        let mut rng = Rng::new(3);
        let (wl, bl, wr) = (rand(&mut rng, &[5, 4]), rand(&mut rng, &[5]), rand(&mut rng, &[5, 4]));
        let tr = Tracer::new();
        let a = tr.input("a", &[3, 4], DType::Float32).unwrap();
        let x = tr.input("x", &[3, 4], DType::Float32).unwrap();
        let row = tr.input("row", &[5], DType::Float32).unwrap();
        let (wl, bl, wr) = (tr.param("wl", &wl).unwrap(), tr.param("bl", &bl).unwrap(), tr.param("wr", &wr).unwrap());
        let s = a.linear(&wl, Some(&bl)).unwrap().add(&x.linear(&wr, None).unwrap()).unwrap();
        let twice = x.linear(&wr, None).unwrap();
        let kept = twice.add(&twice.relu().unwrap()).unwrap();
        let bcast = a.linear(&wl, None).unwrap().add(&row).unwrap();
        let t = tr.finish(&[&s, &kept, &bcast]).unwrap();

        let fused = fuse(&t.graph).unwrap();
        crate::ir::verify::verify(&fused).unwrap();
        let names = op_names(&fused);
        assert_eq!(names.iter().filter(|n| **n == "linear_add").count(), 1, "{names:?}");
        assert_eq!(names.iter().filter(|n| **n == "linear").count(), 3, "{names:?}");
        // lin_l (first operand) becomes the LinearAdd; lin_r's output is its addend
        let la = fused.nodes.iter().find(|n| n.op.name() == "linear_add").unwrap();
        assert_eq!(la.op, Op::LinearAdd { has_bias: true });
        assert_eq!(fused.producer(la.inputs[3]).op, Op::Linear { has_bias: false });

        let inputs = [rand(&mut rng, &[3, 4]), rand(&mut rng, &[3, 4]), rand(&mut rng, &[5])];
        let want = run(&t.graph, &mut Store::from_params(&t.params, &t.buffers, 0).unwrap(), &inputs).unwrap().outputs;
        let got = run(&fused, &mut Store::from_params(&t.params, &t.buffers, 0).unwrap(), &inputs).unwrap().outputs;
        for (w, g) in want.iter().zip(&got) {
            assert_eq!(w.shape(), g.shape());
            for (a, b) in w.to_f32_vec().iter().zip(g.to_f32_vec()) {
                assert!((a - b).abs() < 1e-5, "{a} vs {b}");
            }
        }
    }

    /// Inside an invertible region (GroupAddRev) the forward body and the backward's vjp
    /// graph are fused too, and the region stays shared by the call and its backward.
    #[test]
    fn regions_and_invertible_backward_graphs_are_fused() {
        use crate::autograd::{training_graph, TrainOptions};
        let mut rng = Rng::new(4);
        let (w1, w2) = (rand(&mut rng, &[2, 2]), rand(&mut rng, &[2, 2]));
        let tr = Tracer::new();
        let x = tr.input("x", &[3, 4], DType::Float32).unwrap();
        let (w1, w2) = (tr.param("w1", &w1).unwrap(), tr.param("w2", &w2).unwrap());
        let f = |h: &crate::trace::Var| h.linear(&w1, None)?.add(&h.linear(&w2, None)?)?.tanh();
        let y = tr
            .invertible(
                "rev",
                &x,
                &[],
                |x, _| {
                    let p = x.chunk(2, -1)?;
                    let y0 = p[0].add(&f(&p[1])?)?;
                    crate::trace::concat(&[&y0, &p[1]], -1)
                },
                |y, _| {
                    let p = y.chunk(2, -1)?;
                    let x0 = p[0].sub(&f(&p[1])?)?;
                    crate::trace::concat(&[&x0, &p[1]], -1)
                },
            )
            .unwrap();
        let loss = y.mean(&[], false).unwrap();
        let t = tr.finish(&[&loss]).unwrap();
        let tg = training_graph(&t.graph, 0, &TrainOptions::default()).unwrap();
        let fused = fuse(&tg.graph).unwrap();
        let call = fused.nodes.iter().find(|n| n.op.name() == "call").unwrap();
        let back = fused.nodes.iter().find(|n| matches!(n.op, Op::InvertibleBackward { .. })).unwrap();
        let (Op::Call { region }, Op::InvertibleBackward { region: r2, vjp, .. }) = (&call.op, &back.op) else {
            unreachable!()
        };
        assert!(Rc::ptr_eq(region, r2), "the region stays shared");
        assert!(op_names(&region.forward).contains(&"linear_add"), "{:?}", op_names(&region.forward));
        assert!(op_names(vjp).contains(&"linear_add"), "{:?}", op_names(vjp));
        let inputs = [rand(&mut rng, &[3, 4])];
        let want = run(&tg.graph, &mut Store::from_params(&t.params, &t.buffers, 0).unwrap(), &inputs).unwrap().outputs;
        let got = run(&fused, &mut Store::from_params(&t.params, &t.buffers, 0).unwrap(), &inputs).unwrap().outputs;
        for (w, g) in want.iter().zip(&got) {
            for (a, b) in w.to_f32_vec().iter().zip(g.to_f32_vec()) {
                assert!((a - b).abs() < 1e-5, "{a} vs {b}");
            }
        }
    }
}
