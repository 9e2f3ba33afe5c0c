// Every checkpoint of one run through capture_activations, then the per-run comparisons with the
// final checkpoint (lock-in step, Spearman of channel rankings).
#include <cmath>
#include <limits>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "attnlab/activation_report.h"
#include "attnlab/model.h"
#include "attnlab/progress.h"
#include "attnlab/run_dir.h"
#include "attnlab/trained_run.h"

namespace attnlab {
namespace fs = std::filesystem;
namespace {

// The layer with the largest peak max |x_c| (lowest on ties).
int64_t loudest_layer(const ActivationCapture& c) {
  int64_t best = 0;
  for (const auto& a : c.layers)
    if (a.peak.max_abs > c.layers[best].peak.max_abs) best = a.layer;
  return best;
}

void compare_with_final(RunActivations& run) {
  const size_t n_layers = run.checkpoints.back().capture.layers.size();
  std::vector<int64_t> steps;
  for (const auto& c : run.checkpoints) steps.push_back(c.step);
  run.lock_in.resize(n_layers);
  run.spearman_final.assign(n_layers, {});
  for (size_t l = 0; l < n_layers; ++l) {
    std::vector<int64_t> argmax;
    const auto& final_abs = run.checkpoints.back().capture.layers[l].sink_abs;
    for (const auto& c : run.checkpoints) {
      argmax.push_back(c.capture.layers[l].sink.argmax);
      run.spearman_final[l].push_back(final_abs.size() >= 2 ? spearman(c.capture.layers[l].sink_abs, final_abs)
                                                            : std::numeric_limits<double>::quiet_NaN());
    }
    run.lock_in[l] = lock_in_step(steps, argmax);
  }
}

}  // namespace

RunActivations scan_run(const fs::path& run_dir, const ActivationScanOptions& options) {
  const auto checkpoints = RunDir(run_dir).checkpoints();
  if (checkpoints.empty()) throw std::runtime_error(run_dir.string() + ": no checkpoints (is it a run directory?)");
  RunActivations run;
  run.dir = run_dir;
  at::Tensor probe;  // the run's first `sequences` validation sequences at its own seq_len: every checkpoint's
  CaptureOptions capture_options{options.top_k, options.massive, -1};
  OpenOptions open;
  open.tokens.data = options.val;
  open.tokens.sequences = open.tokens.batch_size = options.sequences;
  for (const auto& info : checkpoints) {
    auto trained = open_trained(info.dir, open);
    if (!probe.defined()) {
      const auto& cfg = trained.run_config();
      run.tier = cfg.tier, run.arm = cfg.model.arm, run.seed = cfg.seed, run.weight_decay = cfg.optim.weight_decay;
      if (options.layer < -1 || options.layer > cfg.model.n_layer)
        throw std::invalid_argument("--layer " + std::to_string(options.layer) + " is outside 0.." +
                                    std::to_string(cfg.model.n_layer) + " (" + run_dir.string() + ")");
      probe = trained.batches.front().x;
    }
    run.checkpoints.push_back({trained.provenance.step, capture_activations(*trained.model, probe, capture_options)});
    if (options.progress) options.progress->advance();
    if (&info == &checkpoints.back()) {
      run.layer = options.layer >= 0 ? options.layer : loudest_layer(run.checkpoints.back().capture);
      capture_options.tokens_layer = run.layer;
      run.final_tokens = capture_activations(*trained.model, probe, capture_options);
    }
  }
  compare_with_final(run);
  return run;
}

}  // namespace attnlab
