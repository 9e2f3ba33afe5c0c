// Between the backend table (backend_table.cpp), the name table of AttentionBackend
// (attention_backend.cpp) and `auto`'s preference lists (backend_choice.cpp). Private to src/attention.
#pragma once

#include <c10/core/DeviceType.h>

#include <vector>

#include "attnlab/attention_backend.h"

namespace attnlab::detail {

/// "auto", then each row's name in table order. Called once, by name_table<AttentionBackend>(); from
/// then on register_backend() refuses new rows, which would have no name.
std::vector<NameTable<AttentionBackend>::Entry> take_backend_names();

/// Puts `backend` first in `auto`'s preference list of devices of `type` (register_backend()).
void prefer_first(c10::DeviceType type, AttentionBackend backend);

}  // namespace attnlab::detail
