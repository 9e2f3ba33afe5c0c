// `attnlab ablate --checkpoint <dir> --residual l --channels c,..|top:k|random:k --mode zero|mean|scale:a
// --out <dir>`: one forward and backward pass with and without the edit at the sink token, and the
// matched-rms ceiling experiment at the same layer (SPEC section 5).
#include <algorithm>
#include <iostream>
#include <memory>

#include <fmt/format.h>

#include "attnlab/ablation.h"
#include "attnlab/run_dir.h"
#include "attnlab/trained_run.h"
#include "commands.h"

namespace attnlab::cli {

namespace {

struct AblateArgs {
  std::string checkpoint;
  OpenOptions open;
  int64_t residual = 0, position = 0, batch = 0;
  std::string channels, mode = "zero", out;
  uint64_t seed = 0;
  CeilingOptions ceiling;
  bool no_ceiling = false;
};

// Loads the checkpoint, ablates, runs the ceiling experiment unless --no-ceiling, writes the files.
void run_ablate(AblateArgs& a) {
  const auto mode = parse_ablation_mode(a.mode);  // before loading anything
  if (a.batch < 0) throw std::invalid_argument("--batch must be >= 0");
  a.open.tokens.sequences = (a.batch + 1) * a.open.tokens.batch_size;
  auto run = open_trained(a.checkpoint, a.open);
  const int64_t d = run.model_config.d_model, n_layer = run.model_config.n_layer;
  if (a.residual < 0 || a.residual > n_layer)
    throw std::invalid_argument(fmt::format("--residual {} outside [0, {}] (n_layer = {})", a.residual, n_layer, n_layer));
  AblationOptions o;
  o.layer = a.residual, o.position = a.position, o.seed = a.seed, o.mode = mode;
  o.channels = parse_channel_spec(a.channels, d);
  const Batch& batch = run.batches.back();
  const auto result = ablate(*run.model, batch, o);
  AblationReportInputs report{run.provenance, a.batch, o, result, std::nullopt, a.ceiling};
  if (!a.no_ceiling && a.residual < n_layer) {
    auto& c = report.ceiling_options;
    c.layer = a.residual, c.position = a.position, c.seed = a.seed;
    c.top = std::min(c.top, d);
    c.random_k = std::min(c.random_k, d - c.top);
    report.ceiling = rms_ceiling(*run.model, batch, c);
  }
  const auto files = ablation_files(report);
  write_outputs(a.out, files);
  std::cout << files.at("ablate.md");
}

}  // namespace

void add_ablate_command(CLI::App& app) {
  auto args = std::make_shared<AblateArgs>();
  auto* cmd = app.add_subcommand("ablate", "Ablate residual channels at the sink token: rms, grad norm, sink attention, loss; "
                                           "and the matched-rms ceiling experiment");
  cmd->add_option("--checkpoint", args->checkpoint, "Checkpoint directory, or a run directory (its newest)")->required();
  cmd->add_option("--residual", args->residual, "Residual state l in [0, n_layer] (after block l; 0 = embedding output)")
      ->required();
  add_renamed_option(cmd, "--layer", "--residual", "the residual state after block l");
  cmd->add_option("--channels", args->channels, "c1,c2,... | top:k | random:k (random excludes the dominant channel)")
      ->required();
  cmd->add_option("--mode", args->mode, "zero | mean (over the sequence's other positions) | scale:a")->capture_default_str();
  cmd->add_option("--out", args->out, "Directory for ablate.json, ablate.md, ablate_channels.csv, ceiling.csv")->required();
  cmd->add_option("--position", args->position, "Position of the edited state (0: the sink; the learned token for sink_token)")
      ->capture_default_str();
  cmd->add_option("--seed", args->seed, "Seed of random:k and of the ceiling's random channels")
      ->check(non_negative())->capture_default_str();
  cmd->add_option("--data", args->open.tokens.data, "Validation shard glob (default: the run's data.val)");
  cmd->add_option("--batch", args->batch, "Which validation batch (index)")->capture_default_str();
  cmd->add_option("--batch-size", args->open.tokens.batch_size, "Sequences per batch")->capture_default_str();
  cmd->add_option("--seq-len", args->open.tokens.length, "Tokens per sequence (default: the run's train.seq_len)")
      ->check(positive());
  cmd->add_option("--ceiling-shift", args->ceiling.shift, "Ceiling: relative rms increase")->capture_default_str();
  cmd->add_option("--ceiling-top", args->ceiling.top, "Ceiling: size of the proportionally grown top set")->capture_default_str();
  cmd->add_option("--ceiling-random", args->ceiling.random_k, "Ceiling: random channels outside the top set (0 = none)")
      ->capture_default_str();
  cmd->add_flag("--no-ceiling", args->no_ceiling, "Skip the ceiling experiment");
  cmd->add_option("--device", args->open.device, "auto | cpu | cuda")->capture_default_str();
  cmd->callback([args] { run_ablate(*args); });
}

}  // namespace attnlab::cli
