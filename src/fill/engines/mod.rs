//! Inference engines on the node (vLLM, SGLang, TensorRT-LLM, NIM,
//! Triton): their own `/metrics`, read for the serving SLO. So far the
//! bounded reader of their text (`text.rs`); the client, the profiles and
//! the evaluator follow (issue 22).

pub mod text;
