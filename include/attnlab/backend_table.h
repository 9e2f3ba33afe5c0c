// The attention backends as a table (docs/design.md, "The backend table"): one row per backend, its
// name, its refusal and its run. Which backend may run a call is each row's refusal of the call's
// AttentionRequest and arm, asked the same way by an attention call, by `auto`'s choice, by the
// first-use self-check and by a config before a run. A new backend is a value of AttentionBackend
// and one row in src/attention/backend_table.cpp (and, to be chosen by `auto`, its place in a
// device's preference list in src/attention/backend_choice.cpp).
#pragma once

#include <string>
#include <vector>

#include "attnlab/arm.h"
#include "attnlab/attention.h"
#include "attnlab/attention_backend.h"
#include "attnlab/attention_request.h"

namespace attnlab {

/// One backend. What each built-in row serves (the choice table is docs/kernels.md, "Selecting a
/// backend"):
///  - reference: the composed ops of attention.h / gates.h; any device and dtype; the only one that
///    returns probabilities; memory O(T^2).
///  - fused: the tiled kernels (fused_attention.h, fused_gate.h); memory O(T); CPU always, CUDA when
///    the build has the kernels.
///  - sdpa: at::scaled_dot_product_attention; only arms whose attention is the plain causal softmax
///    (computes_plain_softmax); no window; not in half types on CPU; o only, lse undefined.
///  - flash: LibTorch's flash kernels with exact corrections for every arm (flash_refusal() in
///    flash_attention.h says what it serves); not in half types on CPU.
///  - cudnn: cuDNN's fused attention under the flash backend's composition (cudnn_refusal() in
///    cudnn_attention.h); no window.
/// Every row but reference refuses probabilities.
struct BackendSpec {
  AttentionBackend id;
  const char* name;  ///< its config name (`attention.backend`), in the name table in row order
  /// Why the backend cannot run a call of `request` computing `arm` (the arm as resolved, routing
  /// gate applied), or "" when it can. Each reason names the culprit (a setting, a dtype, a length).
  std::string (*refusal)(const AttentionRequest& request, const ArmSpec& arm);
  /// The call itself, on inputs the refusal accepted: o [B, H, Tq, d], lse [B, H, Tq] (undefined for
  /// sdpa) and, from the reference when asked for, probs [B, H, Tq, Tk] (attention.h).
  AttentionResult (*run)(const AttentionInputs& in, bool return_probs);
};

/// Every row in order (the built-in five, then those of register_backend()).
const std::vector<BackendSpec>& backend_table();

/// The row of `id`; throws std::logic_error for `automatic` (no row: resolve_backend()'s) or a value
/// without one.
const BackendSpec& backend_spec(AttentionBackend id);

/// Adds a row for the rest of the process: a backend tried out before it is a row of
/// backend_table.cpp (the test-only backend of tests/parity/test_extra_backend.cpp). `auto_first_on`:
/// the device types whose `auto` preference list takes it first. Call it before anything names a
/// backend (the name table is built from the rows once); throws std::logic_error after that, and
/// std::invalid_argument for an id or a name already in the table or a row without a function.
void register_backend(const BackendSpec& spec, const std::vector<c10::DeviceType>& auto_first_on = {});

/// The backend that runs `request` for `arm` (default: the plain softmax). An explicit backend is
/// returned as is (run_attention() throws if it refuses the request). `automatic` takes the first
/// backend of the device's preference list whose refusal is empty (backend_choice.cpp):
///  - every device: reference whenever probabilities are asked for;
///  - CPU: flash, then fused. Flash measured faster than the tiled CPU twin in float32 and float64
///    (docs/benchmarks.md) and refuses half types on CPU, so those run fused (upcast to float32);
///  - CUDA: cudnn only where cudnn_record() (cudnn_attention.h) says a GPU run measured it faster
///    and correct on the device's compute capability, then flash, then the reference: the fused CUDA
///    kernels, unproven on a GPU, run only when named (AttentionBackend::fused), never by `automatic`;
///  - any other device: the CPU's list (flash refuses such a device, so fused).
/// `automatic` logs what it runs and why once per kind of call (device, dtype, probabilities, key
/// mask, decoding, window): at info level, and as a warning when CUDA falls back to the reference.
AttentionBackend resolve_backend(AttentionBackend requested, const AttentionRequest& request, const ArmSpec& arm = {});

/// The refusal of `backend` (its row's; "" for `automatic`, whose choice always serves).
std::string backend_refusal(AttentionBackend backend, const AttentionRequest& request, const ArmSpec& arm);

/// The backends that serve every one of `requests` for `arm`: `automatic`, then the rows whose refusal
/// of each is empty, in table order. What a refusal's message offers instead.
std::vector<AttentionBackend> serving_backends(const std::vector<AttentionRequest>& requests, const ArmSpec& arm);

/// The names of `backends`, quoted with `quote` and joined as prose: "'auto', 'fused' or 'reference'".
std::string backend_list(const std::vector<AttentionBackend>& backends, const char* quote = "'");

/// Runs `in` (attention.h) for `arm` on the backend resolve_backend() picks for `requested`. Throws
/// std::invalid_argument "attention backend '<name>': <refusal>; use <serving backends>" when that
/// backend refuses the call.
AttentionResult run_attention(AttentionBackend requested, const ArmSpec& arm, const AttentionInputs& in,
                              bool return_probs = false);

}  // namespace attnlab
