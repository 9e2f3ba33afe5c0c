// Start-of-process guard for LibTorch's CPU vector math (docs/kernels.md, "LibTorch's vector math").
#pragma once

namespace attnlab {

/// Resolves, on the calling thread, the dispatch of every oneMKL VML function that ATen routes its
/// contiguous float32 / float64 unary ops to (exp, log, sqrt, tanh, erf, ...), by running each op
/// once on a 16-element CPU tensor of each dtype (below ATen's grain size, so no worker thread runs).
///
/// Why: oneMKL picks each VML function's kernel on its first call. When that first call runs on
/// several intra-op threads at once, one thread can run a low-accuracy kernel over its whole chunk
/// (pytorch/pytorch#188792): measured here on the torch 2.11 wheel, the first parallel at::exp off by
/// 3.3e-9 relative (float64) or 1.5e-4 (float32) on one thread's chunk in about 1 process in 20.
/// Later calls are exact, so only the process's first sizable op of each kind is hit.
///
/// Call it first thing in main(), before any parallel ATen op; every attnlab program and test binary
/// does, and GPT's constructor calls it for programs of one's own. Idempotent and thread-safe
/// (std::call_once): the 38 small ops run once per process. Throws nothing beyond what ATen throws on
/// an out-of-memory.
void warm_up_cpu_vector_math();

}  // namespace attnlab
