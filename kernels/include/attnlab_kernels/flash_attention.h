// Torch-free boundary of the fused attention kernels (flash-attention style: the torch side fills
// these plain structs in src/attention/fused*.cpp; the kernels know nothing of Torch).
//
// One causal kernel computes SPEC section 1's shared form with runtime feature flags:
//   a_ij = exp(s_ij + r_j - lse_i),  lse_i = log( [sink] exp(b_h) + sum_{j visible} exp(s_ij + r_j) ),
//   s_ij = scale * q_i . k_j,        o_i   = sum_j a_ij v_j      (v already gated: g_j * v_j).
// Query i (of Tq) sits at absolute position Tk - Tq + i and sees keys j <= that position, and only
// keys whose key_mask entry is true when a mask is given. A window (docs/windows.md) also hides key j
// from query position p when p - j >= window and j >= keep_first.
#pragma once

#include <cstdint>

namespace attnlab::kernels {

enum class DType : int { f32, f64, f16, bf16 };

/// Shape and features of one call. Features are runtime flags: each costs nothing when off and adds
/// no template instantiation.
struct AttentionShape {
  int64_t batch = 0, heads = 0, q_len = 0, k_len = 0, head_dim = 0;
  double scale = 0.0;           ///< logit scale, usually 1/sqrt(head_dim)
  bool has_sink = false;        ///< sink term exp(b_h) in the denominator
  bool has_routing_bias = false;
  bool has_key_mask = false;
  int64_t window = 0;           ///< W >= 1 of a local layer; 0: no window (key tiles outside it are skipped)
  int64_t keep_first = 0;       ///< n: key positions j < n stay visible to every query of a local layer
  DType dtype = DType::f32;     ///< of q, k, v, o, do, dq, dk, dv
};

/// Forward inputs and outputs. Tensors are contiguous, layout [B, H, T, d] (q, o: T = Tq; k, v: Tk).
/// Accumulation is in float32 (float64 for f64); `acc` below means float for f32/f16/bf16, double
/// for f64.
struct ForwardArgs {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  const void* sink_logit = nullptr;    ///< [H] acc type (zeros for off_by_one), when has_sink
  const void* routing_bias = nullptr;  ///< [B, H, Tk] acc type, when has_routing_bias
  const bool* key_mask = nullptr;      ///< [B, Tk], when has_key_mask
  void* o = nullptr;                   ///< [B, H, Tq, d]
  void* lse = nullptr;                 ///< [B, H, Tq] acc type; -inf for a row with no key and no sink
};

/// Backward inputs and outputs (recomputes probabilities from lse; no T x T buffer).
struct BackwardArgs {
  ForwardArgs fwd;                     ///< the forward's inputs plus its o and lse
  const void* d_o = nullptr;           ///< [B, H, Tq, d]
  void* d_q = nullptr;                 ///< [B, H, Tq, d]
  void* d_k = nullptr;                 ///< [B, H, Tk, d]
  void* d_v = nullptr;                 ///< [B, H, Tk, d]
  void* d_sink_logit = nullptr;        ///< [H] acc type: -sum_{b,i} p_i D_i, D_i = dO_i . O_i
  void* d_routing_bias = nullptr;      ///< [B, H, Tk] acc type: sum_i a_ij (dP_ij - D_i)
};

}  // namespace attnlab::kernels
