// Plumbing shared by the CPU kernels: dtype dispatch, the serial fallback of ParallelFor, argument
// checks. Private to kernels/cpu.
#pragma once

#include <stdexcept>
#include <string>

#include "attnlab_kernels/cpu.h"

namespace attnlab::kernels::cpu {

[[noreturn]] inline void fail(const std::string& what) { throw std::invalid_argument(what); }

inline void require(bool ok, const char* who, const char* what) {
  if (!ok) fail(std::string(who) + ": " + what);
}

/// Calls f(float{}) or f(double{}): the CPU kernels compute in the input type (accumulator = input
/// type), so half types must be upcast by the caller.
template <class F>
void dispatch_float(DType dtype, const char* who, F&& f) {
  switch (dtype) {
    case DType::f32: f(float{}); return;
    case DType::f64: f(double{}); return;
    case DType::f16:
    case DType::bf16: break;
  }
  fail(std::string(who) + ": CPU kernels take f32 or f64 (upcast f16/bf16 before the call)");
}

inline void run_parallel(const ParallelFor& parallel, int64_t n, int64_t grain, const RangeFn& body) {
  if (n <= 0) return;
  if (parallel) {
    parallel(n, grain, body);
  } else {
    body(0, n);
  }
}

inline void check_attention_shape(const AttentionShape& s, const char* who) {
  require(s.batch >= 0 && s.heads >= 0 && s.q_len >= 0 && s.head_dim > 0, who, "negative size");
  require(s.q_len <= s.k_len, who, "more queries than keys (queries sit at the last positions)");
  require(s.scale > 0.0, who, "scale must be positive (usually 1/sqrt(head_dim))");
  require(s.window >= 0 && s.keep_first >= 0, who, "window and keep_first must be >= 0");
  require(s.window > 0 || s.keep_first == 0, who, "keep_first without a window");
}

/// The forward's inputs and outputs, which the backward also reads.
inline void check_forward_args(const AttentionShape& s, const ForwardArgs& a, const CpuTiling& t,
                               const char* who) {
  check_attention_shape(s, who);
  require(t.q_tile > 0 && t.k_tile > 0, who, "tile sizes must be positive");
  require(a.q && a.k && a.v && a.o && a.lse, who, "q, k, v, o and lse are required");
  require(!s.has_routing_bias || a.routing_bias, who, "has_routing_bias without routing_bias");
  require(!s.has_key_mask || a.key_mask, who, "has_key_mask without key_mask");
}

}  // namespace attnlab::kernels::cpu
