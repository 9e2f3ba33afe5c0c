// Probe and injection results as files (JSON, CSV, Markdown), and the cache the report reuses.
#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "common/csv_table.h"

#include "attnlab/probe_measures.h"
#include "attnlab/probe_run.h"
#include "attnlab/run_dir.h"

namespace attnlab {
namespace fs = std::filesystem;
namespace {

std::string cell(const nlohmann::json& v, const char* spec = "{:.6g}") {
  return v.is_number() ? fmt::format(fmt::runtime(spec), v.get<double>()) : std::string();
}

std::string percent(const nlohmann::json& v) { return v.is_number() ? fmt::format("{:.2f}%", 100 * v.get<double>()) : "-"; }

std::vector<const ProbeMeasure*> measures(bool tables_only, bool per_head_only) {
  std::vector<const ProbeMeasure*> out;
  for (const auto& m : probe_measure_table())
    if ((!tables_only || m.in_tables) && (!per_head_only || m.kind == ProbeMeasure::Kind::per_head)) out.push_back(&m);
  return out;
}

std::string heads_csv(const nlohmann::json& summary) {
  std::vector<std::string> header = {"layer", "head"};
  for (const auto* m : measures(false, true)) header.push_back(m->name);
  csv::Table t(header);
  for (const auto& layer : summary["layers"]) {
    const size_t H = layer["heads"]["first_key_mass"].size();
    for (size_t h = 0; h < H; ++h) {
      std::vector<std::string> row = {std::to_string(layer["layer"].get<int64_t>()), std::to_string(h)};
      for (const auto* m : measures(false, true)) row.push_back(cell(layer["heads"][m->name][h]));
      t.row(row);
    }
  }
  return t.str();
}

std::string matrix_csv(const nlohmann::json& summary, const std::string& measure) {
  const size_t H = summary["layers"].empty() ? 0 : summary["layers"][0]["heads"][measure].size();
  std::vector<std::string> header = {"layer"};
  for (size_t h = 0; h < H; ++h) header.push_back("h" + std::to_string(h));
  csv::Table t(header);
  for (const auto& layer : summary["layers"]) {
    std::vector<std::string> row = {std::to_string(layer["layer"].get<int64_t>())};
    for (const auto& v : layer["heads"][measure]) row.push_back(cell(v));
    t.row(row);
  }
  return t.str();
}

// A measure's value in probe.md: a share in percent, else 3 decimals; "-" where there is none.
std::string table_cell(const ProbeMeasure& m, const nlohmann::json& v) {
  if (m.percent) return percent(v);
  return v.is_number() ? cell(v, "{:.3f}") : "-";
}

std::string probe_markdown(const nlohmann::json& probe) {
  const auto& p = probe["provenance"];
  const auto& s = probe["summary"];
  std::ostringstream out;
  out << fmt::format("# Probe of {} (arm {}, step {})\n\n", p["checkpoint"].get<std::string>(),
                     p["arm"].get<std::string>(), p["step"].get<int64_t>())
      << fmt::format("{} sequences x {} tokens of {}; {}.\n\n", p["sequences"].get<int64_t>(), p["length"].get<int64_t>(),
                     p["data"].get<std::string>(), p["dtype"].get<std::string>());
  out << "| layer |";
  for (const auto* m : measures(true, false)) out << " " << m->label << " |";
  out << "\n|---|";
  for (size_t i = 0; i < measures(true, false).size(); ++i) out << "---:|";
  out << "\n";
  // A layer's means and its sink rate, or the model's (which holds both).
  auto row = [&](const std::string& label, const nlohmann::json& means, const nlohmann::json& rate) {
    out << "| " << label << " |";
    for (const auto* m : measures(true, false))
      out << " " << table_cell(*m, m->kind == ProbeMeasure::Kind::sink_rate ? rate : means[m->name]) << " |";
    out << "\n";
  };
  for (const auto& layer : s["layers"]) row(std::to_string(layer["layer"].get<int64_t>()), layer["mean"], layer["sink_rate"]);
  row("model", s["model"], s["model"]["sink_rate"]);
  out << "\nConventions:\n";
  for (const auto& c : probe["conventions"]) out << "- " << c.get<std::string>() << "\n";
  return out.str();
}

std::string inject_stem(const nlohmann::json& inject) {
  return "inject_" + inject["options"]["kind"].get<std::string>() + "_" + inject["options"]["cutoff"].get<std::string>();
}

void dose_rows(csv::Table& t, const std::string& layers, const nlohmann::json& doses) {
  for (const auto& d : doses)
    t.row({layers, fmt::format("{:g}", d["eps"].get<double>()), fmt::format("{:.6f}", d["loss"].get<double>()),
           fmt::format("{:.6f}", d["increase"].get<double>())});
}

std::string layer_list(const nlohmann::json& layers) {
  std::string s;
  for (const auto& l : layers) s += (s.empty() ? "" : " ") + std::to_string(l.get<int64_t>());
  return s;
}

std::string inject_csv(const nlohmann::json& inject) {
  const auto& r = inject["result"];
  csv::Table t({"layers", "eps", "loss", "increase"});
  dose_rows(t, layer_list(r["layers"]), nlohmann::json::array({{{"eps", 0.0}, {"loss", r["clean_loss"]}, {"increase", 0.0}}}));
  dose_rows(t, layer_list(r["layers"]), r["doses"]);
  if (r.contains("per_layer"))
    for (const auto& pl : r["per_layer"]) dose_rows(t, std::to_string(pl["layer"].get<int64_t>()), pl["doses"]);
  return t.str();
}

std::string inject_markdown(const nlohmann::json& inject) {
  const auto& p = inject["provenance"];
  const auto& o = inject["options"];
  const auto& r = inject["result"];
  std::ostringstream out;
  out << fmt::format("# Junk injection into {} (arm {}, step {})\n\n", p["checkpoint"].get<std::string>(),
                     p["arm"].get<std::string>(), p["step"].get<int64_t>())
      << fmt::format("{} junk on reads below the {} read norm, layers {}, seed {}; {} sequences x {} tokens of {}.\n\n",
                     o["kind"].get<std::string>(), o["cutoff"].get<std::string>(), layer_list(r["layers"]),
                     o["seed"].get<uint64_t>(), p["sequences"].get<int64_t>(), p["length"].get<int64_t>(),
                     p["data"].get<std::string>())
      << fmt::format("Clean loss: {:.4f} nats/token.\n\n| layers | eps | loss | increase (nats) |\n|---|---:|---:|---:|\n",
                     r["clean_loss"].get<double>());
  auto rows = [&](const std::string& layers, const nlohmann::json& doses) {
    for (const auto& d : doses)
      out << fmt::format("| {} | {} | {:.4f} | {:+.4f} |\n", layers, d["eps"].get<double>(), d["loss"].get<double>(),
                         d["increase"].get<double>());
  };
  rows(layer_list(r["layers"]), r["doses"]);
  if (r.contains("per_layer"))
    for (const auto& pl : r["per_layer"]) rows(std::to_string(pl["layer"].get<int64_t>()) + " alone", pl["doses"]);
  out << "\nConventions:\n";
  for (const auto& c : inject["conventions"]) out << "- " << c.get<std::string>() << "\n";
  return out.str();
}

}  // namespace

std::map<std::string, std::string> probe_files(const nlohmann::json& probe) {
  std::map<std::string, std::string> files = {{"probe.json", probe.dump(1) + "\n"},
                                              {"probe.md", probe_markdown(probe)},
                                              {"probe_heads.csv", heads_csv(probe["summary"])}};
  for (const auto* m : measures(false, true)) files["probe_" + m->name + ".csv"] = matrix_csv(probe["summary"], m->name);
  return files;
}

std::map<std::string, std::string> inject_files(const nlohmann::json& inject) {
  const auto stem = inject_stem(inject);
  return {{stem + ".json", inject.dump(1) + "\n"}, {stem + ".csv", inject_csv(inject)}, {stem + ".md", inject_markdown(inject)}};
}

fs::path default_probe_dir(const fs::path& checkpoint) {
  const auto run = RunDir::containing(checkpoint);
  return run ? run->probes_path() : fs::path("probes");
}

nlohmann::json result_key(const nlohmann::json& result) {
  const auto& p = result.at("provenance");
  nlohmann::json key;
  for (const char* k : {"checkpoint", "step", "data", "sequences", "length", "batch_size", "probe_seed"})
    key[k] = p.value(k, nlohmann::json());
  if (result.contains("options")) key["options"] = result["options"];
  return key;
}

nlohmann::json read_cached(const fs::path& file, const nlohmann::json& key) {
  std::ifstream in(file);
  if (!in) return nullptr;
  auto j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || !j.contains("provenance")) return nullptr;
  return result_key(j) == key ? j : nlohmann::json();
}

}  // namespace attnlab
