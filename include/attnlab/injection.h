// Junk injection at evaluation (SPEC section 4, paper 000): per layer and head, the quiet value
// reads (||v_j|| below the head's median or 25th percentile) receive eps * m_h * u_j before any gate,
// where m_h is the head's median read norm and u_j a unit junk direction; the validation loss rises.
// docs/probes.md states every convention.
//
// Pairing: for one seed the junk draws (donor positions, gaussian directions) are a function of
// (seed, layer, batch index, B, H, T, d) only, drawn for every head and position whatever the
// cutoff selects, so every arm of a tier receives the same junk. Text position t uses draw slot t;
// sink_token's learned token (model position 0) uses the extra slot T, so text positions get the
// same junk in every arm.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

#include <optional>

#include "attnlab/batch_sampler.h"
#include "attnlab/probes.h"

namespace attnlab {

class GPTImpl;

enum class JunkKind {
  structured,      ///< a value read of the same layer and head transplanted from a random position of
                   ///< another sequence of the batch, normalised to a unit direction
  gaussian,        ///< a standard normal vector normalised to a unit direction
  gate_direction,  ///< the head's projection-gate direction w_h / ||w_h|| (projection gates only)
};

/// structured | gaussian | gate_direction.
template <> const NameTable<JunkKind>& name_table<JunkKind>();

/// The kind called `name`; throws std::invalid_argument naming the value and the valid names.
JunkKind parse_junk_kind(const std::string& name);
std::string to_string(JunkKind kind);

/// The random part of the junk for one (seed, layer, batch): what is identical across arms.
struct JunkDraws {
  at::Tensor donor_seq;  ///< [B, H, T + 1] int64: donor sequence, never the read's own (structured)
  at::Tensor donor_pos;  ///< [B, H, T + 1] int64: donor text position in [0, T) (structured)
  at::Tensor gaussian;   ///< [B, H, T + 1, d] float64 unit vectors (gaussian)
};

/// Draws the junk of `kind` for text length T (slots 0..T-1 are text positions, slot T is
/// sink_token's learned token) from a CPU generator seeded by (seed, layer, batch_index).
/// gate_direction draws nothing. Throws std::invalid_argument for structured junk with B < 2 (no
/// other sequence to take a read from).
JunkDraws draw_junk(JunkKind kind, uint64_t seed, int64_t layer, int64_t batch_index, int64_t B, int64_t H, int64_t T,
                    int64_t d);

/// Unit junk directions u [B, H, Tm, d] (float64) for the raw value reads v [B, H, Tm, d] of one layer,
/// Tm = T, or T + 1 with `sink_token` (model position 0 is the learned token). structured: the donor's
/// read normalised (a zero read gives u = 0); gate_direction: gate_w [H, d] normalised (throws
/// std::invalid_argument when gate_w is undefined or a row is zero).
at::Tensor junk_directions(JunkKind kind, const JunkDraws& draws, const at::Tensor& v, const at::Tensor& gate_w,
                           bool sink_token);

/// v + eps * m_h * u on the quiet reads of each (sequence, head), v elsewhere (bit for bit):
/// v, u [B, H, Tm, d] -> [B, H, Tm, d] in v's dtype. m_h = median read norm of that sequence and head.
at::Tensor inject_junk(const at::Tensor& v, const at::Tensor& u, double eps, QuietCutoff cutoff);

struct InjectOptions {
  JunkKind kind = JunkKind::structured;
  QuietCutoff cutoff = QuietCutoff::median;
  std::vector<double> eps = {0.2, 0.4, 0.8, 1.6};
  std::vector<int64_t> layers;  ///< layers injected together; empty = all
  bool per_layer = false;       ///< also each listed layer alone
  uint64_t seed = 0;
};

/// Throws std::invalid_argument with the reason when `kind` cannot run on `model` (gate_direction
/// without a projection gate), a layer index is out of range, or an eps is negative or not finite.
void check_inject_options(const GPTImpl& model, const InjectOptions& options);

/// The validation loss at one dose (nats/token).
struct DoseLoss {
  double eps = 0.0;       ///< junk norm as a multiple of the head's median read norm
  double loss = 0.0;      ///< with the junk injected
  double increase = 0.0;  ///< loss - the clean loss
};

/// One layer injected alone.
struct LayerDoses {
  int64_t layer = 0;
  std::vector<DoseLoss> doses;  ///< one per InjectOptions::eps, in its order
};

/// What inject_model() measures. Losses are token-weighted means of next-token cross-entropy (nats).
struct InjectOutcome {
  double clean_loss = 0.0;
  std::vector<int64_t> layers;  ///< the layers injected together (InjectOptions::layers, or every layer)
  std::vector<DoseLoss> doses;  ///< those layers together, one per eps
  std::optional<std::vector<LayerDoses>> per_layer;  ///< each of `layers` alone (InjectOptions::per_layer)
};

/// Throws std::invalid_argument naming the first disagreement unless `outcome` is one that
/// inject_model(model, ..., options) could have produced: the injected layers of the options, one dose
/// per eps in their order with increase = loss - clean_loss (1e-12 relative), and per-layer results
/// exactly when asked for, one per injected layer. A cached injection is reused only when it passes.
void check_inject_outcome(const InjectOutcome& outcome, const GPTImpl& model, const InjectOptions& options);

/// Clean validation loss and the loss at every dose (nats/token, token-weighted over `batches`,
/// float32 forward on `device`, the model's attention backend); to_json (probe_result.h) writes it.
/// Throws as check_inject_options(). `progress` (optional) is told of every forward pass (batches x
/// (1 + doses x (1 + per-layer sets))) and counts each one done.
InjectOutcome inject_model(GPTImpl& model, const std::vector<Batch>& batches, const c10::Device& device,
                           const InjectOptions& options, Progress* progress = nullptr);

}  // namespace attnlab
