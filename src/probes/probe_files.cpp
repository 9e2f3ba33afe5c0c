// Probe and injection results as files (JSON, CSV, Markdown), and the cache the report reuses.
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <cmath>
#include <functional>
#include <sstream>
#include <stdexcept>

#include "common/csv_table.h"
#include "common/json_read.h"

#include "attnlab/probe_measures.h"
#include "attnlab/probe_run.h"
#include "attnlab/run_dir.h"

namespace attnlab {
namespace fs = std::filesystem;
namespace {

bool has_number(const MeasureValue& v) { return v && std::isfinite(*v); }

std::string cell(const MeasureValue& v, const char* spec = "{:.6g}") {
  return has_number(v) ? fmt::format(fmt::runtime(spec), *v) : std::string();
}

std::string percent(const MeasureValue& v) { return has_number(v) ? fmt::format("{:.2f}%", 100 * *v) : "-"; }

bool windowed(const ProbeSummary& s) { return !s.layers.empty() && s.layers[0].local.has_value(); }

// The measures a model's files list (ProbeMeasure::listed), in the table's order.
std::vector<const ProbeMeasure*> measures(bool tables_only, bool per_head_only, bool windowed_model) {
  std::vector<const ProbeMeasure*> out;
  for (const auto& m : probe_measure_table())
    if ((!tables_only || m.in_tables) && (!per_head_only || m.kind == ProbeMeasure::Kind::per_head) &&
        m.listed(windowed_model))
      out.push_back(&m);
  return out;
}

std::string heads_csv(const ProbeSummary& summary) {
  std::vector<std::string> header = {"layer", "head"};
  for (const auto* m : measures(false, true, windowed(summary))) header.push_back(m->name);
  csv::Table t(header);
  for (const auto& layer : summary.layers) {
    const size_t H = layer.head_values("first_key_mass").size();
    for (size_t h = 0; h < H; ++h) {
      std::vector<std::string> row = {std::to_string(layer.layer), std::to_string(h)};
      for (const auto* m : measures(false, true, windowed(summary))) row.push_back(cell(layer.head_values(m->name).at(h)));
      t.row(row);
    }
  }
  return t.str();
}

std::string matrix_csv(const ProbeSummary& summary, const std::string& measure) {
  const size_t H = summary.layers.empty() ? 0 : summary.layers[0].head_values(measure).size();
  std::vector<std::string> header = {"layer"};
  for (size_t h = 0; h < H; ++h) header.push_back("h" + std::to_string(h));
  csv::Table t(header);
  for (const auto& layer : summary.layers) {
    std::vector<std::string> row = {std::to_string(layer.layer)};
    for (const auto& v : layer.head_values(measure)) row.push_back(cell(v));
    t.row(row);
  }
  return t.str();
}

// A row per layer (its means, per-layer values and sink rate) and one for the model (every measure;
// the max_* measures only there), each measure a column.
std::string layers_csv(const ProbeSummary& summary) {
  const auto columns = measures(false, false, windowed(summary));
  std::vector<std::string> header = {"layer"};
  for (const auto* m : columns) header.push_back(m->name);
  csv::Table t(header);
  auto row = [&](const std::string& label, const MeasureValues& values) {
    std::vector<std::string> cells = {label};
    for (const auto* m : columns) cells.push_back(cell(values[m->name]));
    t.row(cells);
  };
  for (const auto& layer : summary.layers) row(std::to_string(layer.layer), layer.mean);
  row("model", summary.model);
  return t.str();
}

// A measure's value in probe.md: a share in percent, else 3 decimals; "-" where there is none.
std::string table_cell(const ProbeMeasure& m, const MeasureValue& v) {
  if (m.percent) return percent(v);
  return has_number(v) ? cell(v, "{:.3f}") : "-";
}

std::string probe_markdown(const ProbeResult& probe) {
  const auto& p = probe.provenance;
  std::ostringstream out;
  out << fmt::format("# Probe of {} (arm {}, step {})\n\n", p.checkpoint, p.arm, p.step)
      << fmt::format("{} sequences x {} tokens of {}; {}.\n\n", p.sequences, p.length, p.data, p.dtype);
  const auto& s = probe.summary;
  const auto columns = measures(true, false, windowed(s));
  out << "| layer |";
  for (const auto* m : columns) out << " " << m->label << " |";
  out << "\n|---|";
  for (size_t i = 0; i < columns.size(); ++i) out << "---:|";
  out << "\n";
  // A layer's means and its sink rate, or the model's.
  auto row = [&](const std::string& label, const MeasureValues& values) {
    out << "| " << label << " |";
    for (const auto* m : columns) out << " " << table_cell(*m, values[m->name]) << " |";
    out << "\n";
  };
  for (const auto& layer : s.layers)
    row(std::to_string(layer.layer) + (layer.local ? (*layer.local ? " (local)" : " (global)") : ""), layer.mean);
  if (s.local) row("local layers", *s.local);
  if (s.global) row("global layers", *s.global);
  row("model", s.model);
  out << "\nConventions:\n";
  for (const auto& c : probe.conventions) out << "- " << c << "\n";
  return out.str();
}

void dose_rows(csv::Table& t, const std::string& layers, const std::vector<DoseLoss>& doses) {
  for (const auto& d : doses)
    t.row({layers, fmt::format("{:g}", d.eps), fmt::format("{:.6f}", d.loss), fmt::format("{:.6f}", d.increase)});
}

std::string layer_list(const std::vector<int64_t>& layers) {
  std::string s;
  for (int64_t l : layers) s += (s.empty() ? "" : " ") + std::to_string(l);
  return s;
}

std::string inject_csv(const InjectResult& inject) {
  const auto& r = inject.result;
  csv::Table t({"layers", "eps", "loss", "increase"});
  dose_rows(t, layer_list(r.layers), {{0.0, r.clean_loss, 0.0}});
  dose_rows(t, layer_list(r.layers), r.doses);
  if (r.per_layer)
    for (const auto& pl : *r.per_layer) dose_rows(t, std::to_string(pl.layer), pl.doses);
  return t.str();
}

std::string inject_markdown(const InjectResult& inject) {
  const auto& p = inject.provenance;
  const auto& o = inject.options;
  const auto& r = inject.result;
  std::ostringstream out;
  out << fmt::format("# Junk injection into {} (arm {}, step {})\n\n", p.checkpoint, p.arm, p.step)
      << fmt::format("{} junk on reads below the {} read norm, layers {}, seed {}; {} sequences x {} tokens of {}.\n\n",
                     to_string(o.kind), to_string(o.cutoff), layer_list(r.layers), o.seed, p.sequences, p.length, p.data)
      << fmt::format("Clean loss: {:.4f} nats/token.\n\n| layers | eps | loss | increase (nats) |\n|---|---:|---:|---:|\n",
                     r.clean_loss);
  auto rows = [&](const std::string& layers, const std::vector<DoseLoss>& doses) {
    for (const auto& d : doses) out << fmt::format("| {} | {} | {:.4f} | {:+.4f} |\n", layers, d.eps, d.loss, d.increase);
  };
  rows(layer_list(r.layers), r.doses);
  if (r.per_layer)
    for (const auto& pl : *r.per_layer) rows(std::to_string(pl.layer) + " alone", pl.doses);
  out << "\nConventions:\n";
  for (const auto& c : inject.conventions) out << "- " << c << "\n";
  return out.str();
}

}  // namespace

std::map<std::string, std::string> probe_files(const ProbeResult& probe) {
  std::map<std::string, std::string> files = {{"probe.json", to_json(probe).dump(1) + "\n"},
                                              {"probe.md", probe_markdown(probe)},
                                              {"probe_heads.csv", heads_csv(probe.summary)},
                                              {"probe_layers.csv", layers_csv(probe.summary)}};
  for (const auto* m : measures(false, true, windowed(probe.summary)))
    files["probe_" + m->name + ".csv"] = matrix_csv(probe.summary, m->name);
  return files;
}

std::string inject_file_stem(const InjectOptions& options) {
  return "inject_" + to_string(options.kind) + "_" + to_string(options.cutoff);
}

std::map<std::string, std::string> inject_files(const InjectResult& inject) {
  const auto stem = inject_file_stem(inject.options);
  return {{stem + ".json", to_json(inject).dump(1) + "\n"}, {stem + ".csv", inject_csv(inject)},
          {stem + ".md", inject_markdown(inject)}};
}

fs::path default_probe_dir(const fs::path& checkpoint) {
  const auto run = RunDir::containing(checkpoint);
  return run ? run->probes_path() : fs::path("probes");
}

nlohmann::json result_key(const Provenance& provenance) {
  const auto p = to_json(provenance);
  nlohmann::json key;
  for (const char* k : {"checkpoint", "step", "arm", "data", "sequences", "length", "batch_size", "probe_seed"})
    key[k] = p.at(k);
  return key;
}

nlohmann::json result_key(const Provenance& provenance, const InjectOptions& options) {
  auto key = result_key(provenance);
  key["options"] = to_json(options);
  return key;
}

nlohmann::json result_key(const Provenance& provenance, const std::vector<int64_t>& trigger_tokens) {
  auto key = result_key(provenance);
  if (!trigger_tokens.empty()) key["trigger_tokens"] = trigger_tokens;  // without any: the key of before them
  return key;
}

nlohmann::json result_key(const ProbeResult& probe) { return result_key(probe.provenance, probe.trigger_tokens); }
nlohmann::json result_key(const InjectResult& inject) { return result_key(inject.provenance, inject.options); }

namespace {

// `file` read back with `from_json` when it exists, its key matches and `fits` accepts it; none otherwise.
template <class Result, class FromJson>
std::optional<Result> read_cached(const fs::path& file, const nlohmann::json& key, FromJson from_json,
                                  const std::function<void(const Result&)>& fits) {
  std::error_code ec;
  const auto status = fs::status(file, ec);
  if (!fs::exists(status)) return std::nullopt;
  if (!fs::is_regular_file(status))
    throw std::runtime_error(file.string() + " is not a regular file: move it away so that the result can be written there");
  try {
    const auto j = detail::read_json_file(file);  // unreadable, not JSON, nested too deep: computed again
    auto result = from_json(j);
    if (result_key(result) != key) return std::nullopt;
    if (fits) fits(result);
    return result;
  } catch (const std::exception& e) {
    spdlog::warn("{} is not a result to reuse ({}); computing it again", file.string(), e.what());
  }
  return std::nullopt;
}

}  // namespace

std::optional<ProbeResult> read_cached_probe(const fs::path& file, const nlohmann::json& key,
                                             const std::function<void(const ProbeResult&)>& fits) {
  return read_cached<ProbeResult>(file, key, probe_result_from_json, fits);
}

std::optional<InjectResult> read_cached_inject(const fs::path& file, const nlohmann::json& key,
                                               const std::function<void(const InjectResult&)>& fits) {
  return read_cached<InjectResult>(file, key, inject_result_from_json, fits);
}

}  // namespace attnlab
