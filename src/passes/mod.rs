//! Rewrite passes over the IR and the pass manager that runs them.
