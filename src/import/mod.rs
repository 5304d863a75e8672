//! TensorFlow GraphDef (pbtxt and binary) → IR.
