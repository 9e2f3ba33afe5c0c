// The matched-rms ceiling experiment (SPEC section 5; paper 003: "at matched rms shift, growing the
// massive activation alone vs the top-16 channels proportionally removes 73% vs 71% of the rms
// excess ... small random channels ~20%").
//
// Take the state x_in [d_model] of one position entering block l (the residual stream after block
// l, l = 0 the embedding output) and grow it to rms(x'_in) = (1 + shift) rms(x_in) three ways, each
// multiplying a channel set S by one factor g = sqrt(1 + d_model rms(x_in)^2 ((1+shift)^2 - 1) / sum_{c in S} x_c^2):
//   dominant  S = {argmax_c |x_c|}
//   top       S = the top-k channels by |x_c| (proportional growth)
//   random    S = k random channels outside the top-k ("small" channels)
// Run block l on the sequence with and without the edit (only that position is edited) and compare
// the same position's output x_out:
//   excess         = rms(x'_in) - rms(x_in)                  (= shift rms(x_in) for every arm)
//   removed share  = 1 - (rms(x'_out) - rms(x_out)) / excess  (1: the block undid all of it;
//                                                              0: the excess passed through intact)
//   distortion_in  = 1 - cos(x'_in, x_in),  distortion_out = 1 - cos(x'_out, x_out)
// Channel sets come from the ranking of the batch-mean |x_c|, so every sequence grows the same
// channels; per-sequence values are averaged over the batch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "attnlab/batch_sampler.h"
#include "attnlab/model.h"

namespace attnlab {

struct CeilingOptions {
  int64_t layer = 0;     ///< residual layer in [0, n_layer): the state entering block `layer`
  int64_t position = 0;  ///< the sink token
  double shift = 0.1;    ///< relative rms increase, > 0
  int64_t top = 16;      ///< size of the "top" set; the random set is drawn outside it
  int64_t random_k = 16; ///< size of the random set; 0 = no random arm
  uint64_t seed = 0;     ///< draws the random set (std::mt19937_64)
};

struct CeilingArm {
  std::string name;               ///< "dominant" | "top" | "random"
  std::vector<int64_t> channels;  ///< S
  double growth = 0.0;            ///< mean over sequences of g
  double excess = 0.0;            ///< mean rms(x'_in) - rms(x_in)
  double out_shift = 0.0;         ///< mean rms(x'_out) - rms(x_out)
  double removed_share = 0.0;     ///< mean over sequences of the removed share
  double distortion_in = 0.0;     ///< mean 1 - cos(x'_in, x_in)
  double distortion_out = 0.0;    ///< mean 1 - cos(x'_out, x_out)
};

struct CeilingResult {
  double rms_in = 0.0;   ///< mean rms(x_in)
  double rms_out = 0.0;  ///< mean rms(x_out)
  std::vector<CeilingArm> arms;
};

/// Runs the experiment above on `batch` (x [B, T] int64) without gradients. Throws
/// std::invalid_argument for a layer outside [0, n_layer), a bad position, shift <= 0, top outside
/// [1, d_model], random_k > d_model - top, or a channel set whose entries are all zero in some
/// sequence (no factor can grow it).
CeilingResult rms_ceiling(GPTImpl& model, const Batch& batch, const CeilingOptions& options);

}  // namespace attnlab
