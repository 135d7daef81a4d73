//! Replica groups: which replicas share a weight (`poptorch_model.W.replicaGrouping(type,
//! group_size, retrieval)`, PopART's `VariableSettings`) and which read the same input
//! (`Options.inputReplicaGrouping`).
//!
//! With `N` replicas and groups of `k` (`m = N / k` groups), as `poptorch.CommGroupType`:
//! `All` is one group of every replica; `Consecutive` is {0..k−1}, {k..2k−1}, …;
//! `Orthogonal` is {0, m, 2m, …}, {1, m+1, …} (8 replicas in groups of 2: {0,4}, {1,5},
//! {2,6}, {3,7}); `NoGrouping` gives every replica its own value.
//!
//! On the host a grouped weight carries a leading dimension of one slice per group (none
//! when there is a single group). `VariableRetrievalMode::OnePerGroup` copies back the
//! value of each group's first replica (`[groups, …]`); `AllReplicas` one slice per replica
//! (`[replicas, …]`).

pub use crate::compile::options::CommGroupType;
use crate::tensor::Tensor;
use crate::{Error, Result};

/// `poptorch.VariableRetrievalMode` (JSON: `onePerGroup`, `allReplicas`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum VariableRetrievalMode {
    /// The value of the first replica of each group.
    #[default]
    OnePerGroup,
    /// Every replica's value.
    AllReplicas,
}

/// `replicaGrouping(comm_group_type, shards, variable_retrieval_mode)` of one weight.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplicaGrouping {
    pub kind: CommGroupType,
    /// Replicas per group (ignored for `All` and `NoGrouping`).
    pub group_size: usize,
    pub retrieval: VariableRetrievalMode,
}

impl ReplicaGrouping {
    /// The replicas of each group, groups in order.
    pub fn groups(&self, replicas: usize) -> Result<Vec<Vec<usize>>> {
        comm_groups(self.kind, self.group_size, replicas)
    }
}

/// The replicas of each group of a `CommGroup(kind, group_size)` over `replicas` replicas.
pub fn comm_groups(kind: CommGroupType, group_size: usize, replicas: usize) -> Result<Vec<Vec<usize>>> {
    let check = || -> Result<usize> {
        if group_size == 0 || !replicas.is_multiple_of(group_size) {
            return Err(Error::poptorch(format!(
                "a replica group size of {group_size} must be a positive factor of the replication factor \
                 ({replicas})"
            )));
        }
        Ok(replicas / group_size)
    };
    Ok(match kind {
        CommGroupType::All => vec![(0..replicas).collect()],
        CommGroupType::NoGrouping => (0..replicas).map(|r| vec![r]).collect(),
        CommGroupType::Consecutive => {
            let m = check()?;
            (0..m).map(|g| (g * group_size..(g + 1) * group_size).collect()).collect()
        }
        CommGroupType::Orthogonal => {
            let m = check()?;
            (0..m).map(|g| (0..group_size).map(|j| g + j * m).collect()).collect()
        }
    })
}

/// For each replica, the index of its group.
pub fn group_of_replica(groups: &[Vec<usize>], replicas: usize) -> Vec<usize> {
    let mut of = vec![0; replicas];
    for (g, members) in groups.iter().enumerate() {
        for &r in members {
            of[r] = g;
        }
    }
    of
}

/// The host value of a grouped weight from one tensor per group: stacked along a new
/// leading dim when there is more than one.
pub fn stack(slices: &[&Tensor]) -> Result<Tensor> {
    if slices.len() == 1 {
        return Ok(slices[0].clone());
    }
    let shape = slices[0].shape().to_vec();
    if shape.is_empty() {
        return Err(Error::poptorch("Scalars cannot be passed as per-replica weight tensor values"));
    }
    let mut one = vec![1];
    one.extend_from_slice(&shape);
    let lifted: Vec<Tensor> =
        slices.iter().map(|t| crate::kernels::shape_ops::reshape(t, &one)).collect::<std::result::Result<_, _>>()?;
    let refs: Vec<&Tensor> = lifted.iter().collect();
    crate::kernels::shape_ops::concat(&refs, 0)
}

/// Splits a host value into `n` slices of `slice_shape` along its leading dim; a value that
/// already has `slice_shape` is the same for every slice.
pub fn unstack(name: &str, value: &Tensor, n: usize, slice_shape: &[usize]) -> Result<Vec<Tensor>> {
    if value.shape() == slice_shape {
        return Ok(vec![value.clone(); n]);
    }
    if slice_shape.is_empty() {
        return Err(Error::poptorch("Scalars cannot be passed as per-replica weight tensor values"));
    }
    let mut want = vec![n];
    want.extend_from_slice(slice_shape);
    if value.shape() != want.as_slice() {
        return Err(Error::poptorch(format!(
            "the host value of grouped weight '{name}' has shape {:?}: expected {want:?} (one slice per group) or \
             {slice_shape:?}",
            value.shape()
        )));
    }
    let parts = crate::kernels::shape_ops::split(value, &vec![1; n], 0)?;
    parts.iter().map(|p| crate::kernels::shape_ops::reshape(p, slice_shape)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comm_group_types_follow_the_poptorch_docs() {
        // The docs' example: 8 replicas in orthogonal groups of 2 → {0,4}, {1,5}, {2,6}, {3,7}.
        let g = comm_groups(CommGroupType::Orthogonal, 2, 8).unwrap();
        assert_eq!(g, vec![vec![0, 4], vec![1, 5], vec![2, 6], vec![3, 7]]);
        let g = comm_groups(CommGroupType::Consecutive, 2, 8).unwrap();
        assert_eq!(g, vec![vec![0, 1], vec![2, 3], vec![4, 5], vec![6, 7]]);
        assert_eq!(comm_groups(CommGroupType::All, 0, 4).unwrap(), vec![vec![0, 1, 2, 3]]);
        assert_eq!(comm_groups(CommGroupType::NoGrouping, 0, 3).unwrap(), vec![vec![0], vec![1], vec![2]]);
        assert_eq!(
            group_of_replica(&comm_groups(CommGroupType::Orthogonal, 2, 8).unwrap(), 8),
            vec![0, 1, 2, 3, 0, 1, 2, 3]
        );
        let e = comm_groups(CommGroupType::Consecutive, 3, 8).unwrap_err().to_string();
        assert!(e.contains("3") && e.contains("(8)"), "{e}");
    }

    #[test]
    fn stacking_round_trips_and_scalars_are_rejected() {
        let a = Tensor::from_f32(&[2], vec![1.0, 2.0]).unwrap();
        let b = Tensor::from_f32(&[2], vec![3.0, 4.0]).unwrap();
        let s = stack(&[&a, &b]).unwrap();
        assert_eq!(s.shape(), &[2, 2]);
        assert_eq!(unstack("w", &s, 2, &[2]).unwrap(), vec![a.clone(), b]);
        assert_eq!(unstack("w", &a, 3, &[2]).unwrap().len(), 3, "one value for every group");
        let e = stack(&[&Tensor::scalar(1.0), &Tensor::scalar(2.0)]).unwrap_err().to_string();
        assert_eq!(e, "Scalars cannot be passed as per-replica weight tensor values");
        assert!(unstack("w", &Tensor::zeros(&[3, 2], crate::tensor::DType::Float32), 2, &[2])
            .unwrap_err()
            .to_string()
            .contains("[2, 2]"));
    }
}
