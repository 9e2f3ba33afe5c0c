// The attention backends' names, taken from the backend table's rows (backend_table.h).
#include "attnlab/attention_backend.h"

#include "attention/backend_detail.h"

namespace attnlab {

template <>
const NameTable<AttentionBackend>& name_table<AttentionBackend>() {
  static const NameTable<AttentionBackend> table("attention backend", detail::take_backend_names(), {});
  return table;
}

AttentionBackend parse_attention_backend(const std::string& name) { return name_table<AttentionBackend>().parse(name); }

std::string to_string(AttentionBackend backend) { return name_table<AttentionBackend>().name(backend); }

bool computes_plain_softmax(const ArmSpec& arm) { return arm.sink == SinkKind::none && arm.gate == GateKind::none; }

}  // namespace attnlab
