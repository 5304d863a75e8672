//! Lowering: topology, device assignment and per-device programs.
