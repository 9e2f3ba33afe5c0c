// The attention backends by name (config key `attention.backend`), and which arms each can compute.
// Kept apart from arm_attention.h so the config records hold the enum without the tensor headers.
#pragma once

#include <string>

#include "attnlab/arm.h"
#include "attnlab/name_table.h"

namespace attnlab {

/// Which implementation computes the shared form; what each serves is arm_attention.h's and the
/// choice table of docs/kernels.md, "Selecting a backend". `automatic` ("auto") is resolve_backend()'s.
enum class AttentionBackend { reference, fused, sdpa, flash, automatic };

/// auto | fused | reference | sdpa | flash, in that order in errors (attention_backend.cpp: a new
/// backend is one more row there).
template <> const NameTable<AttentionBackend>& name_table<AttentionBackend>();

/// The backend called `name`; throws std::invalid_argument naming the value and the valid names.
AttentionBackend parse_attention_backend(const std::string& name);
std::string to_string(AttentionBackend backend);

/// True when the arm's attention is the plain causal softmax: no sink term and no gate (baseline, and
/// sink_token, whose extra token lives outside attention). `arm` as resolved, routing gate applied.
bool computes_plain_softmax(const ArmSpec& arm);

/// Whether `backend` can compute `arm` at all: every backend but sdpa computes every arm; sdpa
/// (at::scaled_dot_product_attention) only those of computes_plain_softmax(). `automatic` always
/// can. The one statement of the rule the config check and arm_attention() both apply.
bool backend_computes_arm(AttentionBackend backend, const ArmSpec& arm);

}  // namespace attnlab
