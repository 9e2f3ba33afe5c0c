// The one place that lists the arms (SPEC section 1's table). A tenth arm is one more entry here
// plus its test; its parameters follow from its features (src/arms/arm_params.cpp).
#include "attnlab/arm.h"

#include <sstream>
#include <stdexcept>

namespace attnlab {

namespace {

std::vector<ArmSpec>& registry() {
  using S = SinkKind;
  using G = GateKind;
  using P = GateSlot;
  using O = OutputGate;
  static std::vector<ArmSpec> arms = {
      {"baseline", "plain causal softmax", S::none, G::none, P::value, false},
      {"off_by_one", "softmax denominator + 1 (sink logit frozen at 0)", S::fixed_zero, G::none,
       P::value, false},
      {"sink_token", "learned token prepended at position 0", S::none, G::none, P::value, true},
      {"sink_logit", "learned per-head sink logit b_h (exact abstention)", S::learned, G::none,
       P::value, false},
      {"norm_gate", "norm gate on value reads (rotation invariant filter)", S::none, G::norm,
       P::value, false},
      {"proj_gate", "projection gate on value reads (direction selective filter)", S::none,
       G::projection, P::value, false},
      {"renorm", "gate signal as routing bias log g_j (routing-slot control)", S::none, G::norm,
       P::routing, false},
      {"combo", "sink logit + norm gate", S::learned, G::norm, P::value, false},
      {"combo2", "sink logit + projection gate", S::learned, G::projection, P::value, false},
      {"out_gate", "headwise sigmoid gate on each head's output, from the query's own x_i",
       S::none, G::none, P::value, false, O::headwise},
      {"out_gate_elem", "elementwise sigmoid gate on each head's output channels, from x_i",
       S::none, G::none, P::value, false, O::elementwise},
      {"sink_out_gate", "learned sink logit b_h + headwise output gate", S::learned, G::none,
       P::value, false, O::headwise},
  };
  return arms;
}

}  // namespace

const std::vector<ArmSpec>& all_arms() { return registry(); }

void register_arm(const ArmSpec& arm) {
  if (arm.name.empty()) throw std::invalid_argument("register_arm: an arm needs a name");
  for (const auto& a : registry())
    if (a.name == arm.name) throw std::invalid_argument("register_arm: an arm called '" + arm.name + "' exists");
  registry().push_back(arm);
}

const ArmSpec& arm_by_name(const std::string& name) {
  for (const auto& arm : all_arms()) {
    if (arm.name == name) return arm;
  }
  std::ostringstream msg;
  msg << "unknown attention arm '" << name << "'; valid arms:";
  for (const auto& arm : all_arms()) msg << ' ' << arm.name;
  throw std::invalid_argument(msg.str());
}

ArmSpec with_routing_gate(ArmSpec spec, GateKind routing_gate) {
  if (spec.slot == GateSlot::routing) {
    if (routing_gate == GateKind::none) {
      throw std::invalid_argument("arm '" + spec.name + "' needs a gate form (norm or projection)");
    }
    spec.gate = routing_gate;
  }
  return spec;
}

template <>
const NameTable<SinkKind>& name_table<SinkKind>() {
  static const NameTable<SinkKind> table(
      "sink term", {{SinkKind::none, "none"}, {SinkKind::fixed_zero, "fixed_zero"}, {SinkKind::learned, "learned"}});
  return table;
}

template <>
const NameTable<GateKind>& name_table<GateKind>() {
  static const NameTable<GateKind> table(
      "gate form", {{GateKind::none, "none"}, {GateKind::norm, "norm"}, {GateKind::projection, "projection"}},
      {{GateKind::projection, "proj"}});
  return table;
}

template <>
const NameTable<GateSlot>& name_table<GateSlot>() {
  static const NameTable<GateSlot> table("gate slot", {{GateSlot::value, "value"}, {GateSlot::routing, "routing"}});
  return table;
}

template <>
const NameTable<OutputGate>& name_table<OutputGate>() {
  static const NameTable<OutputGate> table(
      "output gate",
      {{OutputGate::none, "none"}, {OutputGate::headwise, "headwise"}, {OutputGate::elementwise, "elementwise"}});
  return table;
}

GateKind parse_gate_kind(const std::string& name) { return name_table<GateKind>().parse(name); }
std::string to_string(GateKind kind) { return name_table<GateKind>().name(kind); }
std::string to_string(SinkKind kind) { return name_table<SinkKind>().name(kind); }
std::string to_string(GateSlot slot) { return name_table<GateSlot>().name(slot); }
std::string to_string(OutputGate gate) { return name_table<OutputGate>().name(gate); }

}  // namespace attnlab
