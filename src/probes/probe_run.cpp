// Probes and injections of a trained run (open_trained chooses the tokens and records provenance),
// and the cache the report reuses.
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <stdexcept>

#include "attnlab/activation_capture.h"
#include "attnlab/probe_measures.h"
#include "attnlab/probe_run.h"
#include "attnlab/run_dir.h"
#include "attnlab/trained_run.h"

namespace attnlab {
namespace {

TrainedRun load_target(const ProbeSource& source, const ProbeDataOptions& data) {
  OpenOptions o;
  o.tokens.data = source.data;
  o.tokens.sequences = data.sequences;
  o.tokens.length = data.length;
  o.tokens.batch_size = data.batch_size;
  o.tokens.seed = data.seed;
  o.device = source.device;
  auto t = open_trained(source.checkpoint, o);
  t.provenance.dtype = "float32 forward (no autocast), float64 statistics";
  return t;
}

std::vector<std::string> position_conventions() {
  return {
      "positions are the model's: for sink_token, position 0 is the learned token and the text starts at 1, so "
      "'first key' means the learned token and query 0 is the learned token's own query",
      "reads are the raw value vectors v_j of each head, before any gate; ||v_j|| is their Euclidean norm",
  };
}

// The largest sink-state ratio max / median |x_c| over the residual layers after block 1..n_layer.
SinkStateRatio sink_state_ratio(GPTImpl& model, const Batch& batch, const c10::Device& device) {
  const auto capture = capture_activations(model, batch.x.to(device));
  SinkStateRatio best{-1.0, 0};
  for (const auto& l : capture.layers)
    if (l.layer >= 1 && l.sink.ratio > best.max_ratio) best = {l.sink.ratio, l.layer};  // ratios are >= 0 or +inf
  return best;
}

// The lines of the extreme-token measures that no table row says: trigger queries, chance, layers.
void add_extreme_token_conventions(std::vector<std::string>& conventions, const std::vector<int64_t>& triggers) {
  std::string list;
  for (int64_t token : triggers) list += (list.empty() ? "" : ",") + std::to_string(token);
  conventions.push_back(triggers.empty() ? "trigger queries: none (no trigger tokens given), so the trigger and other "
                                           "masses are null"
                                         : "trigger queries: the queries i >= 1 that see key 0 and whose input token is "
                                           "one of " + list + " (sink_token's learned token never is); other: the rest");
  conventions.push_back("chance: the mass uniform attention over the keys each query sees would put on key 0, so a "
                        "mass near its chance is no sink; the sink term (phantom mass) is no key and never counts");
  conventions.push_back("per-layer measures (residual_peak, inf_norm, kurtosis) read the residual stream after block l, "
                        "the layer of the other measures (activations.md's layer l + 1); medians of an even count are "
                        "the mean of the two middle values");
}

ProbeResult probe_target(TrainedRun& t, const std::vector<int64_t>& triggers, Progress* progress) {
  t.provenance.attention = "reference backend, one layer's [B, H, T, T] probabilities at a time";
  auto conventions = position_conventions();
  const auto& cfg = t.model->config();
  const bool windowed = cfg.has_local_layer();
  for (const auto& m : probe_measure_table())
    if (m.listed(windowed)) conventions.push_back(m.definition);
  conventions.push_back("per layer: mean over heads; model: mean over every (layer, head)");
  if (windowed) {  // docs/windows.md, "Probes under a window"
    conventions.push_back(fmt::format(
        "window: a local layer's query i sees keys j <= i with i - j < {} or j < {} (model.window, "
        "model.window_keep_first); first_key_mass and sink_score average only the queries that see key 0 (so not "
        "every query, as the sink_score line says of a model without a window); on a local layer with "
        "window_keep_first 0 those include queries without a choice (W = 1: only query 0, a_00 = 1 - p_0), so read "
        "its sink_score and sink_rate with care, and oldest_key_mass instead",
        *cfg.window, cfg.window_keep_first.value_or(0)));
    conventions.push_back("layers carry their type (local or global); by_type: the means over the local and over the "
                          "global layers, every (layer, head) of the type");
  }
  conventions.push_back("sink_state.max_ratio: the largest over residual layers l >= 1 of max_c |x_c| / median_c |x_c| "
                        "at position 0 of the first probe sequence (the massive-activation ratio; null = +inf)");
  add_extreme_token_conventions(conventions, triggers);
  auto summary = probe_model(*t.model, t.batches, t.device, progress, triggers);
  std::optional<SinkStateRatio> sink;
  if (!t.batches.empty()) sink = sink_state_ratio(*t.model, t.batches.front(), t.device);
  return {t.provenance, conventions, std::move(summary), sink, triggers};
}

InjectResult inject_target(TrainedRun& t, const InjectOptions& options, Progress* progress) {
  t.provenance.attention = "the model's attention backend as loaded (reference)";
  check_inject_options(*t.model, options);
  auto conventions = position_conventions();
  for (const char* line : {
           "junk: v_j + eps * m_h * u_j on quiet reads (||v_j|| < the cutoff of that sequence and head), before any "
           "gate, in every injected layer at once; m_h = median read norm of that sequence and head",
           "draws depend on (seed, layer, batch index, B, H, T, d) only, one per head and position whatever the "
           "cutoff selects; sink_token's learned token takes draw slot T",
           "structured: the donor's raw read (same layer and head, another sequence of the batch, a text position) "
           "normalised; gaussian: a normalised standard normal vector; gate_direction: w_h / ||w_h||",
           "loss: token-weighted mean next-token cross-entropy (nats) over the N x T targets; increase = loss - clean"})
    conventions.push_back(line);
  return {t.provenance, options, conventions, inject_model(*t.model, t.batches, t.device, options, progress)};
}

}  // namespace

namespace {

// The trigger tokens given, else the run's own eval.trigger_tokens (the queries its loss splits by).
std::vector<int64_t> trigger_tokens_of(const ProbeDataOptions& data, const TrainedRun& t) {
  if (!data.trigger_tokens.empty() || !t.config) return data.trigger_tokens;
  return t.config->eval.trigger_tokens;
}

}  // namespace

ProbeResult run_probe(const ProbeSource& source, const ProbeDataOptions& data) {
  auto t = load_target(source, data);
  return probe_target(t, trigger_tokens_of(data, t), data.progress);
}

InjectResult run_inject(const ProbeSource& source, const ProbeDataOptions& data, const InjectOptions& options) {
  auto t = load_target(source, data);
  return inject_target(t, options, data.progress);
}

// The key is built from the provenance of the loaded target, so a newer checkpoint or other tokens
// miss the cache; only the forward passes are saved.
ProbeResult cached_probe(const ProbeSource& source, const ProbeDataOptions& data, const std::filesystem::path& dir,
                         bool* reused) {
  auto t = load_target(source, data);
  const auto triggers = trigger_tokens_of(data, t);
  const auto file = dir / "probe.json";
  const auto& cfg = t.model->config();
  auto features = probe_features(cfg);
  features.triggers = !triggers.empty();
  auto fits = [&](const ProbeResult& r) {
    check_probe_summary(r.summary, features, cfg.n_layer, cfg.n_head);
    if (!r.sink_state) throw std::invalid_argument("written before the sink-state ratio");  // probe again
  };
  if (auto hit = read_cached_probe(file, result_key(t.provenance, triggers), fits)) {
    if (reused) *reused = true;
    return *hit;
  }
  if (reused) *reused = false;
  auto probe = probe_target(t, triggers, data.progress);
  write_outputs(dir, probe_files(probe));
  return probe;
}

InjectResult cached_inject(const ProbeSource& source, const ProbeDataOptions& data, const InjectOptions& options,
                           const std::filesystem::path& dir, bool* reused) {
  auto t = load_target(source, data);
  const auto file = dir / (inject_file_stem(options) + ".json");
  auto fits = [&](const InjectResult& r) { check_inject_outcome(r.result, *t.model, options); };
  if (auto hit = read_cached_inject(file, result_key(t.provenance, options), fits)) {
    if (reused) *reused = true;
    return *hit;
  }
  if (reused) *reused = false;
  auto inject = inject_target(t, options, data.progress);
  write_outputs(dir, inject_files(inject));
  return inject;
}

}  // namespace attnlab
