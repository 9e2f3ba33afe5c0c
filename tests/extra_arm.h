// The test-only registry extension behind the tenth-arm test (docs/adding-an-arm.md): when
// ATTNLAB_TEST_EXTRA_ARM is "name:sink=learned,gate=norm,slot=routing" (features omitted: none, none,
// value; sink_token=1 for a prepended token; out_gate=headwise|elementwise for an output gate), the arm is registered before any suite enumerates the
// registry, so every test parameterised over all_arms() also runs over it. ATTNLAB_TEST_GOLDEN_FILE
// names a file of tools/golden_arms.py whose arms are added to tests/data/golden/attention_arms.json,
// or to output_gate_arms.json for an arm with an output gate, or to window_arms.json for a windowed
// case of the arm (a window is the model's, not the arm's: tests/CMakeLists.txt's tenth_arm_window).
// Every suite that enumerates arms includes this header.
#pragma once

#include "support/build_paths.h"
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attnlab/arm.h"

namespace attnlab::testing_extra {

inline ArmSpec parse_extra_arm(const std::string& text) {
  ArmSpec arm;
  const auto colon = text.find(':');
  arm.name = text.substr(0, colon);
  arm.summary = "test-only arm " + text;
  std::stringstream features(colon == std::string::npos ? "" : text.substr(colon + 1));
  for (std::string item; std::getline(features, item, ',');) {
    const auto eq = item.find('=');
    const std::string key = item.substr(0, eq), value = eq == std::string::npos ? "" : item.substr(eq + 1);
    if (key == "sink") {
      arm.sink = name_table<SinkKind>().parse(value, "sink");
    } else if (key == "gate") {
      arm.gate = parse_gate_kind(value);
    } else if (key == "slot") {
      arm.slot = name_table<GateSlot>().parse(value, "slot");
    } else if (key == "out_gate") {
      arm.out_gate = name_table<OutputGate>().parse(value, "out_gate");
    } else if (key == "sink_token") {
      arm.sink_token = value == "1";
    } else {
      throw std::invalid_argument("ATTNLAB_TEST_EXTRA_ARM: unknown feature '" + key + "'");
    }
  }
  return arm;
}

/// The extension's arm name, or "" when none is registered.
inline std::string extra_arm_name() {
  const char* text = std::getenv("ATTNLAB_TEST_EXTRA_ARM");
  return text && *text ? parse_extra_arm(text).name : "";
}

inline bool register_extra_arm() {
  const char* text = std::getenv("ATTNLAB_TEST_EXTRA_ARM");
  if (!text || !*text) return false;
  register_arm(parse_extra_arm(text));
  return true;
}

/// Runs at static initialisation in every test program that includes this header (once per program).
inline const bool kExtraArmRegistered = register_extra_arm();

/// The names of every arm in the registry, the extension's included: what parameterised suites run over.
inline std::vector<std::string> registry_arm_names() {
  std::vector<std::string> names;
  for (const auto& arm : all_arms()) names.push_back(arm.name);
  return names;
}

/// The registry's arm names as the items of a YAML flow list ("baseline, off_by_one, ..."), for
/// sweep files that train every arm.
inline std::string registry_arm_yaml_items() {
  std::string items;
  for (const auto& name : registry_arm_names()) items += (items.empty() ? "" : ", ") + name;
  return items;
}

/// `file` of tests/data/golden/ plus the arms of ATTNLAB_TEST_GOLDEN_FILE that have (or, without
/// `output_gate`, lack) an output gate: an output-gate arm's case stores its gate values ("out_gate").
/// `windowed` takes the cases with a window instead (they store "window"), with or without a gate.
/// The extra file must hold the same inputs.
inline nlohmann::json golden_file_with_extra(const std::string& file, bool output_gate, bool windowed = false) {
  auto read = [](const std::string& path) {
    std::ifstream in(path);
    if (!in) throw std::runtime_error("cannot open " + path);
    return nlohmann::json::parse(in);
  };
  auto g = read(attnlab::test::source_dir().string() + "/tests/data/golden/" + file);
  if (const char* extra = std::getenv("ATTNLAB_TEST_GOLDEN_FILE"); extra && *extra) {
    const auto more = read(extra);
    for (const char* input : {"q", "k", "v", "R"})
      if (more[input] != g[input]) throw std::runtime_error(std::string(extra) + ": other inputs than the golden file");
    for (const auto& [name, values] : more["arms"].items()) {
      if (values.contains("window") != windowed) continue;
      if (!windowed && values.contains("out_gate") != output_gate) continue;
      if (output_gate && more["x"] != g["x"]) throw std::runtime_error(std::string(extra) + ": another x than " + file);
      g["arms"][name] = values;
    }
  }
  return g;
}

/// tests/data/golden/attention_arms.json, plus the extra file's arms without an output gate.
inline const nlohmann::json& golden_values() {
  static const nlohmann::json data = golden_file_with_extra("attention_arms.json", false);
  return data;
}

/// tests/data/golden/window_arms.json, plus the extra file's windowed cases.
inline const nlohmann::json& window_golden_values() {
  static const nlohmann::json data = golden_file_with_extra("window_arms.json", false, true);
  return data;
}

/// tests/data/golden/output_gate_arms.json, plus the extra file's arms with an output gate.
inline const nlohmann::json& output_gate_golden_values() {
  static const nlohmann::json data = golden_file_with_extra("output_gate_arms.json", true);
  return data;
}

}  // namespace attnlab::testing_extra
