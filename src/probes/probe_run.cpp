// Loading a checkpoint and its validation tokens for a probe or an injection, with provenance.
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <stdexcept>

#include "attnlab/checkpoint.h"
#include "attnlab/device.h"
#include "attnlab/probe_run.h"
#include "attnlab/shards.h"
#include "attnlab/version.h"

namespace attnlab {
namespace {

struct Target {
  LoadedModel loaded;
  std::vector<Batch> batches;
  nlohmann::json provenance;
  c10::Device device = c10::Device(c10::kCPU);
  Progress* progress = nullptr;  // ProbeDataOptions::progress
};

std::string data_pattern(const ProbeSource& source, const LoadedModel& loaded) {
  if (!source.data.empty()) return source.data;
  const auto& cfg = loaded.config;
  if (cfg.contains("data") && cfg["data"].contains("val") && cfg["data"]["val"].is_string())
    return cfg["data"]["val"].get<std::string>();
  throw std::invalid_argument(loaded.source.string() + ": the run's config names no data.val; pass --data <val shards>");
}

int64_t sequence_length(const ProbeDataOptions& data, const LoadedModel& loaded) {
  int64_t T = data.length;
  if (T <= 0 && loaded.config.contains("train")) T = loaded.config["train"].value("seq_len", int64_t{0});
  if (T <= 0) T = loaded.model_config.block_size;
  const int64_t context = loaded.model_config.block_size;  // sink_token's token has no position: T may equal it
  if (T > context)
    throw std::invalid_argument("--length " + std::to_string(T) + " exceeds the model's context of " +
                                std::to_string(context) + " text tokens");
  return T;
}

std::vector<Batch> split(const Batch& all, int64_t batch_size) {
  std::vector<Batch> out;
  for (int64_t i = 0; i < all.x.size(0); i += batch_size) {
    const int64_t n = std::min(batch_size, all.x.size(0) - i);
    out.push_back({all.x.narrow(0, i, n), all.y.narrow(0, i, n)});
  }
  return out;
}

// The first N validation sequences, or N windows drawn with a seed; records which.
std::vector<Batch> choose_tokens(std::shared_ptr<const ShardSet> val, const ProbeDataOptions& data, int64_t T,
                                 nlohmann::json& provenance) {
  if (data.sequences <= 0 || data.batch_size <= 0)
    throw std::invalid_argument("--sequences and --batch-size must be positive");
  if (data.seed) {
    BatchSampler sampler(val, {data.sequences, T, *data.seed});
    provenance["selection"] = "windows drawn by BatchSampler (seed " + std::to_string(*data.seed) + ", step 0) over the val shards";
    return split(sampler.batch(0, 0), data.batch_size);
  }
  ValidationSet set(val, T, data.sequences * T + 1);
  if (set.num_sequences() < data.sequences)
    throw std::invalid_argument(val->pattern() + " holds only " + std::to_string(set.num_sequences()) +
                                " sequences of " + std::to_string(T) + " tokens; pass --sequences <= that");
  provenance["selection"] = "the first N consecutive sequences of the val stream (ValidationSet)";
  provenance["val_fingerprint"] = std::to_string(set.fingerprint());
  return split(set.sequences(0, data.sequences), data.batch_size);
}

Target load_target(const ProbeSource& source, const ProbeDataOptions& data) {
  Target t;
  std::vector<std::string> warnings;
  t.loaded = load_model(source.checkpoint, &warnings);
  for (const auto& w : warnings) spdlog::warn("{}", w);
  const std::string pattern = data_pattern(source, t.loaded);
  const int64_t T = sequence_length(data, t.loaded);
  auto val = std::make_shared<const ShardSet>(ShardSet::open(pattern, t.loaded.model_config.vocab_size));
  std::vector<std::string> files;
  for (const auto& s : val->shards()) files.push_back(s.path());
  t.provenance = {{"checkpoint", t.loaded.source.string()},
                  {"step", t.loaded.step},
                  {"arm", t.loaded.model_config.arm},
                  {"run_seed", t.loaded.config.value("seed", nlohmann::json())},
                  {"tier", t.loaded.config.value("tier", nlohmann::json())},
                  {"data", pattern},
                  {"data_files", files},
                  {"sequences", data.sequences},
                  {"length", T},
                  {"batch_size", data.batch_size},
                  {"probe_seed", data.seed ? nlohmann::json(*data.seed) : nlohmann::json()},
                  {"dtype", "float32 forward (no autocast), float64 statistics"},
                  {"attnlab", version() + " (" + git_revision() + ")"}};
  t.batches = choose_tokens(val, data, T, t.provenance);
  t.device = resolve_device(source.device);
  t.provenance["device"] = t.device.str();
  t.progress = data.progress;
  t.loaded.model->to(t.device);
  return t;
}

const std::vector<std::string>& position_conventions() {
  static const std::vector<std::string> lines = {
      "positions are the model's: for sink_token, position 0 is the learned token and the text starts at 1, so "
      "'first key' means the learned token and query 0 is the learned token's own query",
      "reads are the raw value vectors v_j of each head, before any gate; ||v_j|| is their Euclidean norm",
  };
  return lines;
}

nlohmann::json probe_target(Target& t) {
  t.provenance["attention"] = "reference backend, one layer's [B, H, T, T] probabilities at a time";
  nlohmann::json conventions = position_conventions();
  for (const char* line : {
           "first_key_mass: mean over sequences and queries i >= 1 of a_i0 (query 0 excluded: it sees only key 0)",
           "sink_score: mean over sequences and queries i >= 0 (every query sees key 0) of a_i0; sink_rate = share of "
           "heads with sink_score > 0.3",
           "phantom_mass: mean over sequences and queries i >= 0 of p_i = exp(b_h - lse_i); null without a sink",
           "read_norm_ratio: mean over sequences of ||v_0|| / median_{j>=1} ||v_j|| (per sequence and head)",
           "exposure: mean over sequences and queries i >= 0 of sum_j a_ij [||v_j|| < p25], p25 = 25th percentile "
           "(linear interpolation) of the sequence's T read norms of that head, position 0 included; the phantom "
           "mass counts in the denominator",
           "gate_mean, gate_closed_share: mean of g_j and of [g_j < 0.5] over all reads; null without a gate",
           "per layer: mean over heads; model: mean over every (layer, head)"})
    conventions.push_back(line);
  return {{"provenance", t.provenance}, {"conventions", conventions},
          {"summary", probe_model(*t.loaded.model, t.batches, t.device, t.progress)}};
}

nlohmann::json inject_options_json(const InjectOptions& options) {
  return {{"kind", to_string(options.kind)}, {"cutoff", to_string(options.cutoff)}, {"eps", options.eps},
          {"layers", options.layers},        {"per_layer", options.per_layer},      {"seed", options.seed}};
}

nlohmann::json inject_target(Target& t, const InjectOptions& options) {
  t.provenance["attention"] = "the model's attention backend as loaded (reference)";
  check_inject_options(*t.loaded.model, options);
  nlohmann::json conventions = position_conventions();
  for (const char* line : {
           "junk: v_j + eps * m_h * u_j on quiet reads (||v_j|| < the cutoff of that sequence and head), before any "
           "gate, in every injected layer at once; m_h = median read norm of that sequence and head",
           "draws depend on (seed, layer, batch index, B, H, T, d) only, one per head and position whatever the "
           "cutoff selects; sink_token's learned token takes draw slot T",
           "structured: the donor's raw read (same layer and head, another sequence of the batch, a text position) "
           "normalised; gaussian: a normalised standard normal vector; gate_direction: w_h / ||w_h||",
           "loss: token-weighted mean next-token cross-entropy (nats) over the N x T targets; increase = loss - clean"})
    conventions.push_back(line);
  return {{"provenance", t.provenance}, {"options", inject_options_json(options)}, {"conventions", conventions},
          {"result", inject_model(*t.loaded.model, t.batches, t.device, options, t.progress)}};
}

}  // namespace

nlohmann::json run_probe(const ProbeSource& source, const ProbeDataOptions& data) {
  auto t = load_target(source, data);
  return probe_target(t);
}

nlohmann::json run_inject(const ProbeSource& source, const ProbeDataOptions& data, const InjectOptions& options) {
  auto t = load_target(source, data);
  return inject_target(t, options);
}

// The key is built from the provenance of the loaded target, so a newer checkpoint or other tokens
// miss the cache; only the forward passes are saved.
nlohmann::json cached_probe(const ProbeSource& source, const ProbeDataOptions& data, const std::filesystem::path& dir,
                            bool* reused) {
  auto t = load_target(source, data);
  if (auto hit = read_cached(dir / "probe.json", result_key({{"provenance", t.provenance}})); !hit.is_null()) {
    if (reused) *reused = true;
    return hit;
  }
  if (reused) *reused = false;
  auto probe = probe_target(t);
  write_files(dir, probe_files(probe));
  return probe;
}

nlohmann::json cached_inject(const ProbeSource& source, const ProbeDataOptions& data, const InjectOptions& options,
                             const std::filesystem::path& dir, bool* reused) {
  auto t = load_target(source, data);
  const auto key = result_key({{"provenance", t.provenance}, {"options", inject_options_json(options)}});
  const auto file = dir / ("inject_" + to_string(options.kind) + "_" + to_string(options.cutoff) + ".json");
  if (auto hit = read_cached(file, key); !hit.is_null()) {
    if (reused) *reused = true;
    return hit;
  }
  if (reused) *reused = false;
  auto inject = inject_target(t, options);
  write_files(dir, inject_files(inject));
  return inject;
}

}  // namespace attnlab
