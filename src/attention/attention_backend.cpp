#include "attnlab/attention_backend.h"

namespace attnlab {

template <>
const NameTable<AttentionBackend>& name_table<AttentionBackend>() {
  static const NameTable<AttentionBackend> table("attention backend", {
      {AttentionBackend::automatic, "auto"},
      {AttentionBackend::fused, "fused"},
      {AttentionBackend::reference, "reference"},
      {AttentionBackend::sdpa, "sdpa"},
      {AttentionBackend::flash, "flash"},
  });
  return table;
}

AttentionBackend parse_attention_backend(const std::string& name) { return name_table<AttentionBackend>().parse(name); }

std::string to_string(AttentionBackend backend) { return name_table<AttentionBackend>().name(backend); }

bool computes_plain_softmax(const ArmSpec& arm) { return arm.sink == SinkKind::none && arm.gate == GateKind::none; }

bool backend_computes_arm(AttentionBackend backend, const ArmSpec& arm) {
  return backend != AttentionBackend::sdpa || computes_plain_softmax(arm);
}

}  // namespace attnlab
