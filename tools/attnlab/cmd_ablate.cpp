// `attnlab ablate --checkpoint <dir> --layer l --channels c,..|top:k|random:k --mode zero|mean|scale:a
// --out <dir>`: one forward and backward pass with and without the edit at the sink token, and the
// matched-rms ceiling experiment at the same layer (SPEC section 5).
#include <cmath>
#include <iostream>
#include <limits>
#include <memory>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "attnlab/ablation.h"
#include "attnlab/rms_ceiling.h"
#include "commands.h"
#include "probe_input.h"

namespace attnlab::cli {
namespace {

nlohmann::json pass_json(const AblationPass& p) {
  return {{"loss", p.loss}, {"rms", p.rms}, {"grad_norm", p.grad_norm}, {"product", p.product},
          {"sink_attention", p.sink_attention}};
}

nlohmann::json ceiling_json(const CeilingResult& c, const CeilingOptions& o) {
  nlohmann::json arms = nlohmann::json::array();
  for (const auto& a : c.arms)
    arms.push_back({{"name", a.name}, {"channels", a.channels}, {"growth", a.growth}, {"excess", a.excess},
                    {"out_shift", a.out_shift}, {"removed_share", number_or_null(a.removed_share)},
                    {"distortion_in", a.distortion_in}, {"distortion_out", a.distortion_out}});
  return {{"layer", o.layer}, {"shift", o.shift}, {"top", o.top}, {"random_k", o.random_k}, {"seed", o.seed},
          {"rms_in", c.rms_in}, {"rms_out", c.rms_out}, {"arms", arms},
          {"definition", "grow channel set S by one factor so that rms(x'_in) = (1+shift) rms(x_in) at the sink "
                         "entering block `layer`; removed share = 1 - (rms(x'_out) - rms(x_out)) / (rms(x'_in) - "
                         "rms(x_in)); distortion = 1 - cos"}};
}

double ratio(double a, double b) { return b != 0.0 ? a / b : std::numeric_limits<double>::quiet_NaN(); }

std::string markdown(const nlohmann::json& doc, const AblationResult& r, const CeilingResult* c) {
  const auto& p = doc["provenance"];
  std::string out = fmt::format(
      "# Ablation at the sink\n\n{} (step {}, arm {}, seed {}); batch {} of {} x {} tokens of {}.\n"
      "Layer {} (the residual stream after {} blocks; 0 = the embedding output), position {}, mode {}, channels {} = {}.\n\n"
      "| pass | loss (nats/token) | rms(x) | grad norm | rms x grad norm |\n|---|---|---|---|---|\n",
      p["checkpoint"].get<std::string>(), p["step"].get<int64_t>(), p["arm"].get<std::string>(), p["seed"].dump(),
      doc["batch"].get<int64_t>(), p["batch_size"].get<int64_t>(), p["seq_len"].get<int64_t>(),
      p["data"].get<std::string>(), doc["layer"].get<int64_t>(), doc["layer"].get<int64_t>(),
      doc["position"].get<int64_t>(), doc["mode"].get<std::string>(), doc["channel_spec"].get<std::string>(),
      doc["channels"].dump());
  for (const auto* pass : {&r.reference, &r.ablated})
    out += fmt::format("| {} | {:.6f} | {:.4g} | {:.4g} | {:.4g} |\n", pass == &r.reference ? "unablated" : "ablated",
                       pass->loss, pass->rms, pass->grad_norm, pass->product);
  const auto shown = [](double v) { return std::isfinite(v) ? fmt::format("{:.4f}", v) : std::string("n/a"); };
  out += fmt::format("\nLoss change {:+.6f} nats/token; ablated / unablated: rms {}, grad norm {}, product {}.\n",
                     r.ablated.loss - r.reference.loss, shown(ratio(r.ablated.rms, r.reference.rms)),
                     shown(ratio(r.ablated.grad_norm, r.reference.grad_norm)),
                     shown(ratio(r.ablated.product, r.reference.product)));
  out += "\n| block | sink attention, unablated | ablated | change |\n|---|---|---|---|\n";
  for (size_t l = 0; l < r.reference.sink_attention.size(); ++l)
    out += fmt::format("| {} | {:.5f} | {:.5f} | {:+.5f} |\n", l, r.reference.sink_attention[l], r.ablated.sink_attention[l],
                       r.ablated.sink_attention[l] - r.reference.sink_attention[l]);
  if (c == nullptr) return out + "\nCeiling experiment: none (no block after the last layer).\n";
  const auto& cj = doc["ceiling"];
  out += fmt::format("\n## Matched-rms ceiling (state entering block {}, rms +{:.0f}%)\n\nrms(x_in) {:.4g}, rms(x_out) {:.4g}.\n\n"
                     "| grown | channels | factor | removed share of the rms excess | 1 - cos in | 1 - cos out |\n"
                     "|---|---|---|---|---|---|\n",
                     cj["layer"].get<int64_t>(), 100 * cj["shift"].get<double>(), c->rms_in, c->rms_out);
  for (const auto& a : c->arms)
    out += fmt::format("| {} | {} | {:.4g} | {:.1f}% | {:.3e} | {:.3e} |\n", a.name, a.channels.size(), a.growth,
                       100 * a.removed_share, a.distortion_in, a.distortion_out);
  return out;
}

std::string channels_csv(const AblationResult& r) {
  std::string out = "channel,mean_x_unablated,mean_x_ablated,mean_abs_grad_unablated,mean_abs_grad_ablated\n";
  for (int64_t c : r.channels)
    out += fmt::format("{},{:.9g},{:.9g},{:.9g},{:.9g}\n", c, r.reference.state.select(1, c).mean().item<double>(),
                       r.ablated.state.select(1, c).mean().item<double>(),
                       r.reference.grad.select(1, c).abs().mean().item<double>(),
                       r.ablated.grad.select(1, c).abs().mean().item<double>());
  return out;
}

std::string ceiling_csv(const CeilingResult& c) {
  std::string out = "arm,n_channels,growth,excess,out_shift,removed_share,distortion_in,distortion_out\n";
  for (const auto& a : c.arms)
    out += fmt::format("{},{},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g}\n", a.name, a.channels.size(), a.growth, a.excess,
                       a.out_shift, a.removed_share, a.distortion_in, a.distortion_out);
  return out;
}

}  // namespace

void add_ablate_command(CLI::App& app) {
  struct Args {
    ProbeArgs probe;
    int64_t layer = 0, position = 0, batch = 0;
    std::string channels, mode = "zero", out;
    uint64_t seed = 0;
    CeilingOptions ceiling;
    bool no_ceiling = false;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("ablate", "Ablate residual channels at the sink token: rms, grad norm, sink attention, loss; "
                                           "and the matched-rms ceiling experiment");
  cmd->add_option("--checkpoint", args->probe.checkpoint, "Checkpoint directory, or a run directory (its newest)")->required();
  cmd->add_option("--layer", args->layer, "Residual layer l in [0, n_layer] (after block l; 0 = embedding output)")->required();
  cmd->add_option("--channels", args->channels, "c1,c2,... | top:k | random:k (random excludes the dominant channel)")
      ->required();
  cmd->add_option("--mode", args->mode, "zero | mean (over the sequence's other positions) | scale:a")->capture_default_str();
  cmd->add_option("--out", args->out, "Directory for ablate.json, ablate.md, ablate_channels.csv, ceiling.csv")->required();
  cmd->add_option("--position", args->position, "Position of the edited state (0: the sink; the learned token for sink_token)")
      ->capture_default_str();
  cmd->add_option("--seed", args->seed, "Seed of random:k and of the ceiling's random channels")->capture_default_str();
  cmd->add_option("--data", args->probe.data, "Validation shard glob (default: the run's data.val)");
  cmd->add_option("--batch", args->batch, "Which validation batch (index)")->capture_default_str();
  cmd->add_option("--batch-size", args->probe.batch_size, "Sequences per batch")->capture_default_str();
  cmd->add_option("--seq-len", args->probe.seq_len, "Tokens per sequence (default: the run's train.seq_len)")
      ->check(positive());
  cmd->add_option("--ceiling-shift", args->ceiling.shift, "Ceiling: relative rms increase")->capture_default_str();
  cmd->add_option("--ceiling-top", args->ceiling.top, "Ceiling: size of the proportionally grown top set")->capture_default_str();
  cmd->add_option("--ceiling-random", args->ceiling.random_k, "Ceiling: random channels outside the top set (0 = none)")
      ->capture_default_str();
  cmd->add_flag("--no-ceiling", args->no_ceiling, "Skip the ceiling experiment");
  cmd->add_option("--device", args->probe.device, "auto | cpu | cuda")->capture_default_str();
  cmd->callback([args] {
    const auto mode = parse_ablation_mode(args->mode);  // before loading anything
    if (args->batch < 0) throw std::invalid_argument("--batch must be >= 0");
    args->probe.batches = args->batch + 1;
    auto in = open_probe(args->probe);
    const int64_t d = in.ckpt.model_config.d_model, n_layer = in.ckpt.model_config.n_layer;
    if (args->layer < 0 || args->layer > n_layer)
      throw std::invalid_argument(fmt::format("--layer {} outside [0, {}] (n_layer = {})", args->layer, n_layer, n_layer));
    AblationOptions o;
    o.layer = args->layer, o.position = args->position, o.seed = args->seed, o.mode = mode;
    o.channels = parse_channel_spec(args->channels, d);
    const Batch& batch = in.batches.back();
    const auto r = ablate(*in.model, batch, o);

    nlohmann::json doc = {{"provenance", in.provenance}, {"batch", args->batch}, {"layer", args->layer},
                          {"position", args->position}, {"mode", mode.text}, {"channel_spec", o.channels.text},
                          {"seed", args->seed}, {"channels", r.channels},
                          {"unablated", pass_json(r.reference)}, {"ablated", pass_json(r.ablated)},
                          {"change", {{"loss", r.ablated.loss - r.reference.loss},
                                      {"rms_ratio", number_or_null(ratio(r.ablated.rms, r.reference.rms))},
                                      {"grad_norm_ratio", number_or_null(ratio(r.ablated.grad_norm, r.reference.grad_norm))},
                                      {"product_ratio", number_or_null(ratio(r.ablated.product, r.reference.product))}}},
                          {"ceiling", nullptr}};
    std::optional<CeilingResult> ceiling;
    if (!args->no_ceiling && args->layer < n_layer) {
      args->ceiling.layer = args->layer, args->ceiling.position = args->position, args->ceiling.seed = args->seed;
      args->ceiling.top = std::min(args->ceiling.top, d);
      args->ceiling.random_k = std::min(args->ceiling.random_k, d - args->ceiling.top);
      ceiling = rms_ceiling(*in.model, batch, args->ceiling);
      doc["ceiling"] = ceiling_json(*ceiling, args->ceiling);
    }
    const std::string md = markdown(doc, r, ceiling ? &*ceiling : nullptr);
    write_output(args->out, "ablate.json", doc.dump(2) + "\n");
    write_output(args->out, "ablate.md", md);
    write_output(args->out, "ablate_channels.csv", channels_csv(r));
    if (ceiling) write_output(args->out, "ceiling.csv", ceiling_csv(*ceiling));
    std::cout << md;
  });
}

}  // namespace attnlab::cli
