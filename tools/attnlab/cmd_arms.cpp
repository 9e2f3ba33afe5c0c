// `attnlab arms`: every arm with the parameters it adds for the given dims (SPEC section 1's table);
// --names and --json list the registry for scripts and tests.
#include <iostream>
#include <memory>

#include <fmt/format.h>

#include "attnlab/arm.h"
#include "attnlab/hf_interop.h"
#include "attnlab/model_config.h"
#include "commands.h"

namespace attnlab::cli {

void add_arms_command(CLI::App& app) {
  auto cfg = std::make_shared<ModelConfig>();
  cfg->n_layer = 6, cfg->n_head = 6, cfg->d_model = 384, cfg->vocab_size = 50257, cfg->block_size = 1024;
  auto names_only = std::make_shared<bool>(false), as_json = std::make_shared<bool>(false);
  auto* cmd = app.add_subcommand("arms", "List the attention arms and the parameters each adds");
  cmd->add_flag("--names", *names_only, "Print only the arm names, one per line, in registry order (for scripts)");
  cmd->add_flag("--json", *as_json,
                "Print every arm as JSON, in registry order: name, summary and its features as config.json "
                "of an export spells them (for scripts)")
      ->excludes("--names");
  cmd->add_option("--n-layer", cfg->n_layer, "Transformer blocks")->capture_default_str();
  cmd->add_option("--n-head", cfg->n_head, "Attention heads")->capture_default_str();
  cmd->add_option("--d-model", cfg->d_model, "Residual width")->capture_default_str();
  cmd->add_option("--vocab-size", cfg->vocab_size, "Vocabulary size")->capture_default_str();
  cmd->add_option("--block-size", cfg->block_size, "Context length")->capture_default_str();
  cmd->callback([cfg, names_only, as_json] {
    if (*names_only) {
      for (const auto& spec : all_arms()) std::cout << spec.name << '\n';
      return;
    }
    if (*as_json) {
      auto arms = nlohmann::json::array();
      for (const auto& spec : all_arms()) {
        auto arm = hf_arm_features(spec);
        arm["name"] = spec.name, arm["summary"] = spec.summary;
        arms.push_back(arm);
      }
      std::cout << arms.dump(2) << '\n';
      return;
    }
    cfg->validate();
    std::cout << fmt::format("model: n_layer={} n_head={} d_model={} head_dim={} vocab={} (padded {})\n\n",
                             cfg->n_layer, cfg->n_head, cfg->d_model, cfg->head_dim(), cfg->vocab_size,
                             cfg->padded_vocab());
    std::cout << fmt::format("| {:<13} | {:<10} | {:<10} | {:<7} | {:<11} | {:>12} | {:>14} | {}\n", "arm",
                             "sink", "gate", "slot", "output gate", "extra params", "non-embedding", "what it is");
    for (const auto& spec : all_arms()) {
      ModelConfig c = *cfg;
      c.arm = spec.name;
      const auto counts = count_params(c);
      const auto arm = c.arm_spec();
      std::cout << fmt::format("| {:<13} | {:<10} | {:<10} | {:<7} | {:<11} | {:>12} | {:>14} | {}\n", arm.name,
                               to_string(arm.sink), to_string(arm.gate),
                               arm.gate == GateKind::none ? "-" : to_string(arm.slot), to_string(arm.out_gate),
                               counts.arm_extra, counts.non_embedding, arm.summary);
    }
  });
}

}  // namespace attnlab::cli
