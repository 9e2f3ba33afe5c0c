// Retention of the rows that write residual channels (SPEC section 5; paper 003). Not to be
// confused with checkpoint retention (RetentionPolicy in checkpoint.h), which decides which
// checkpoints are kept on disk.
//
// Writers of residual layer L (the residual stream after block L, before the final LayerNorm; L = 0
// is the embedding output, so L runs over 1..n_layer here) are block L-1's attention out-projection
// h.<L-1>.attn.c_proj and MLP down-projection h.<L-1>.mlp.c_proj. Their weight is [d_model, in] in
// torch's Linear layout (y = x W^T + b), so the writer row of channel c is w = weight[c, :] and its
// bias entry is bias[c].
//
//   G     = -<w, grad_w> / ||w||^2           grad_w averaged over the batches (mean loss, nats/token)
//   G_pre = -<w, u> / ||w||^2,  u = m_hat / (sqrt(v_hat) + eps),
//           m_hat = exp_avg / (1 - beta1^t), v_hat = exp_avg_sq / (1 - beta2^t), t = AdamW's step
//
// AdamW moves w by -lr (u + lambda w), so to first order ||w||^2 grows iff G_pre > lambda; G is the
// same test for plain gradient descent with L2 decay. For a bias entry b_c the "row" is the scalar
// b_c, so G = -grad_c / b_c; biases are not decayed (lambda = 0) and are reported apart.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "attnlab/batch_sampler.h"
#include "attnlab/checkpoint.h"
#include "attnlab/model.h"
#include "attnlab/trained_run.h"

namespace attnlab {

struct RetentionOptions {
  std::vector<int64_t> layers;  ///< residual layers in [1, n_layer]; empty = all
  int64_t top_k = 0;            ///< per layer, only the top-k channels by mean |x_c| at `position`; 0 = all
  int64_t position = 0;         ///< the sink token (position 0; the learned token for sink_token)
  /// lambda of the decayed parameters when no optimizer state gives it (the run's optim.weight_decay).
  double weight_decay = 0.0;
};

/// One writer row (or bias entry) of one channel.
struct RetentionRow {
  int64_t layer = 0;             ///< residual layer L in [1, n_layer]
  std::string writer;            ///< "attn" (out-projection) or "mlp" (down-projection)
  std::string param;             ///< e.g. "h.0.attn.c_proj.weight"
  int64_t channel = 0;
  int64_t rank = 0;              ///< rank of the channel by mean |x_c| at the sink (0 = dominant)
  double sink_abs_x = 0.0;       ///< mean over sequences of |x_c| at `position`, residual layer L
  double norm = 0.0;             ///< ||w|| (|b_c| for a bias)
  double G = 0.0;                ///< raw retention (compared with lambda); NaN when norm = 0
  std::optional<double> G_pre;   ///< preconditioned retention; nullopt without optimizer state
  double weight_decay = 0.0;     ///< lambda applied to this parameter (0 for biases)
};

struct RetentionResult {
  std::vector<RetentionRow> weights;  ///< by layer, writer (attn, mlp), channel rank
  std::vector<RetentionRow> biases;   ///< the same rows for the bias entries
  int64_t batches = 0;
  double mean_loss = 0.0;             ///< nats/token, mean over the batches
  std::optional<int64_t> optimizer_step;  ///< AdamW's t of the writers; nullopt without optimizer state
};

/// Retention of every writer row of the selected layers and channels, with gradients averaged over
/// `batches` (x, y [B, T] int64; moved to the model's device) in one forward and backward pass each;
/// no parameter is updated (their .grad is left zeroed). `optimizer` supplies the AdamW moments and
/// groups (LoadedCheckpoint::optimizer / optimizer_groups); null, or loaded without the optimizer,
/// gives G_pre = nullopt (never approximated). Throws std::invalid_argument for no batches, a layer
/// outside [1, n_layer], top_k outside [0, d_model], a position outside the sequence, or optimizer
/// state that holds a step but not both moments of a writer, and for optimizer state of sgd or muon
/// (naming the optimizer: G_pre is AdamW's; docs/retention.md). A writer AdamW never stepped has no G_pre.
RetentionResult writer_retention(GPTImpl& model, const std::vector<Batch>& batches,
                                 const LoadedCheckpoint* optimizer, const RetentionOptions& options);

/// The files of `attnlab retention`: retention.json (provenance, definitions, every row),
/// retention.md, retention_weights.csv and retention_biases.csv, by name.
std::map<std::string, std::string> retention_files(const RetentionResult& result, const RetentionOptions& options,
                                                   const Provenance& provenance);

}  // namespace attnlab
