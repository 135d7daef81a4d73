//! Progress of long engine work, for a host that must tell work that advances from code that
//! loops (the page stops an analysis that makes no progress for a while: a model whose
//! `forward` never returns). The layers that can run long report it: the tracer per node
//! recorded, autograd per node differentiated, the planner per pass. [`tick`] is cheap (a
//! counter); every [`TICKS_PER_REPORT`] ticks, and at each [`step`], the host's hook runs.
//! Natively there is no hook unless a caller sets one.

use std::cell::{Cell, RefCell};

/// Ticks between two calls of the hook.
pub const TICKS_PER_REPORT: u32 = 4096;

thread_local! {
    static HOOK: RefCell<Option<Box<dyn Fn()>>> = const { RefCell::new(None) };
    static TICKS: Cell<u32> = const { Cell::new(0) };
}

/// Sets (or, with `None`, removes) the hook called as work progresses. Returns false, and
/// changes nothing, when called from inside the hook itself.
pub fn set_hook(hook: Option<Box<dyn Fn()>>) -> bool {
    HOOK.with(|h| match h.try_borrow_mut() {
        Ok(mut h) => {
            *h = hook;
            true
        }
        Err(_) => false,
    })
}

/// One unit of work done (a node traced, differentiated, …).
#[inline]
pub fn tick() {
    let n = TICKS.with(|t| {
        let n = t.get().wrapping_add(1);
        t.set(n);
        n
    });
    if n.is_multiple_of(TICKS_PER_REPORT) {
        report();
    }
}

/// A step of work done (a planner pass): the hook runs now.
pub fn step() {
    report();
}

fn report() {
    HOOK.with(|h| {
        // A hook that re-enters (reports progress itself) is not called again meanwhile.
        if let Ok(h) = h.try_borrow() {
            if let Some(f) = h.as_ref() {
                f();
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::rc::Rc;

    #[test]
    fn the_hook_runs_every_report_interval_and_at_each_step() {
        let calls = Rc::new(Cell::new(0));
        let c = calls.clone();
        assert!(set_hook(Some(Box::new(move || c.set(c.get() + 1)))));
        TICKS.with(|t| t.set(0));
        for _ in 0..3 * TICKS_PER_REPORT + 5 {
            tick();
        }
        assert_eq!(calls.get(), 3);
        step();
        assert_eq!(calls.get(), 4);
        assert!(set_hook(None));
        step();
        assert_eq!(calls.get(), 4);
    }

    #[test]
    fn a_hook_cannot_replace_itself_while_it_runs() {
        let refused = Rc::new(Cell::new(false));
        let r = refused.clone();
        set_hook(Some(Box::new(move || r.set(!set_hook(None)))));
        step();
        assert!(refused.get());
        set_hook(None);
    }
}
