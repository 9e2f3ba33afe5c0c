// The attention backends by name (config key `attention.backend`), and which arms each can compute.
// Kept apart from the backend table (backend_table.h) so the config records hold the enum without the
// tensor headers.
#pragma once

#include <string>

#include "attnlab/arm.h"
#include "attnlab/name_table.h"

namespace attnlab {

/// Which implementation computes the shared form; what each serves is its row's in the backend table
/// (backend_table.h) and the choice table of docs/kernels.md, "Selecting a backend". `automatic`
/// ("auto") is resolve_backend()'s.
enum class AttentionBackend { reference, fused, sdpa, flash, cudnn, automatic };

/// auto | fused | reference | sdpa | flash | cudnn, in that order in errors: "auto", then the rows of
/// the backend table (backend_table.cpp: a new backend is one more row there).
template <> const NameTable<AttentionBackend>& name_table<AttentionBackend>();

/// The backend called `name`; throws std::invalid_argument naming the value and the valid names.
AttentionBackend parse_attention_backend(const std::string& name);
std::string to_string(AttentionBackend backend);

/// True when the arm's attention is the plain causal softmax: no sink term and no gate (baseline, and
/// sink_token, whose extra token lives outside attention). `arm` as resolved, routing gate applied.
/// The sdpa row's refusal asks it (at::scaled_dot_product_attention computes nothing else).
bool computes_plain_softmax(const ArmSpec& arm);

}  // namespace attnlab
