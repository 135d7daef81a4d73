"""`torch.testing.assert_close` for host tensors (the user guide's examples check results so)."""
import math


def assert_close(actual, expected, rtol=1.3e-6, atol=1e-5, **_):
    a, e = actual.tolist(), expected.tolist()
    if list(actual.shape) != list(expected.shape):
        raise AssertionError(f"The values for attribute 'shape' do not match: {list(actual.shape)} != {list(expected.shape)}.")

    def flat(v):
        return [x for y in v for x in flat(y)] if isinstance(v, list) else [v]

    for x, y in zip(flat(a), flat(e)):
        if not math.isclose(x, y, rel_tol=rtol, abs_tol=atol):
            raise AssertionError(f"Tensor-likes are not close! {x} != {y}")
