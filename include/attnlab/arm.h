// The attention arms of SPEC section 1: each is a point in one general form,
//   a_ij = exp(s_ij + r_j) / ( [sink] exp(b_h) + sum_{k<=i} exp(s_ik + r_k) ),
//   o_i  = sum_{j<=i} a_ij * (g_j * v_j),
// described by which sink term, which gate, and where the gate acts.
// Adding an arm = one entry in src/arms/registry.cpp plus its test (docs/adding-an-arm.md).
#pragma once

#include <string>
#include <vector>

#include "attnlab/name_table.h"

namespace attnlab {

/// The extra term in the softmax denominator (the "zero option" / phantom key).
enum class SinkKind {
  none,        ///< plain softmax
  fixed_zero,  ///< exp(0) = 1 (off_by_one); b_h frozen at 0
  learned,     ///< exp(b_h), b_h learned per head, init 0
};

/// The per-key scalar gate g_j computed from the value read v_j.
enum class GateKind {
  none,
  norm,        ///< g_j = sigmoid(beta * (||v_j|| / sqrt(d) - tau_h)), beta = 8
  projection,  ///< g_j = sigmoid(w_h . v_j + c_h)
};

/// Where the gate acts.
enum class GateSlot {
  value,    ///< multiplies the read: o_i = sum_j a_ij g_j v_j
  routing,  ///< enters the logits as r_j = log g_j (renorm)
};

/// A sigmoid gate on each head's output, from the query position's own normalised input x_i
/// (docs/arms.md, "The output gate"; Qiu et al. 2025, arXiv 2505.06708, position G1):
///   o'_i = o_i * sigmoid(x_i W_g + c_g).
enum class OutputGate {
  none,
  headwise,     ///< W_g [d_model, H]: one scalar per head and query
  elementwise,  ///< W_g [d_model, H d]: one per channel, head-major
};

/// One arm: the features it switches on in the shared form.
struct ArmSpec {
  std::string name;
  std::string summary;
  SinkKind sink = SinkKind::none;
  GateKind gate = GateKind::none;
  GateSlot slot = GateSlot::value;
  bool sink_token = false;  ///< a learned embedding e_sink is prepended at position 0
  OutputGate out_gate = OutputGate::none;  ///< after the attention, before the output projection
};

/// Every arm, in the order of docs/arms.md's table, then those added by register_arm().
const std::vector<ArmSpec>& all_arms();

/// Adds an arm to all_arms() for the rest of the process: a new combination of the features above,
/// for an experiment or a test that tries an arm out (ctest -R tenth_arm) before it becomes a row of
/// src/arms/registry.cpp. Call it before anything looks arms up. Throws std::invalid_argument for an
/// empty or existing name.
void register_arm(const ArmSpec& arm);

/// The arm called `name`. Throws std::invalid_argument naming the value and the valid names.
const ArmSpec& arm_by_name(const std::string& name);

/// `spec` with the gate form of a routing-slot arm replaced by `routing_gate` (SPEC: renorm's gate form
/// is configurable, norm by default). Value-slot arms are returned unchanged.
ArmSpec with_routing_gate(ArmSpec spec, GateKind routing_gate);

/// The names of the features (registry.cpp), as config keys, state.json, export-hf's config.json and
/// `attnlab arms` write them: SinkKind none | fixed_zero | learned; GateKind none | norm | projection
/// (also reads "proj"); GateSlot value | routing; OutputGate none | headwise | elementwise.
template <> const NameTable<SinkKind>& name_table<SinkKind>();
template <> const NameTable<GateKind>& name_table<GateKind>();
template <> const NameTable<GateSlot>& name_table<GateSlot>();
template <> const NameTable<OutputGate>& name_table<OutputGate>();

/// The gate form called `name`; throws std::invalid_argument naming the value and the valid names.
GateKind parse_gate_kind(const std::string& name);
std::string to_string(GateKind kind);
std::string to_string(SinkKind kind);
std::string to_string(GateSlot slot);
std::string to_string(OutputGate gate);

}  // namespace attnlab
