// The name tables of the enumerations (name_table.h): every name parses to its value and prints back,
// the lists in errors are the documented ones (written out here by hand), and a config value that is
// no name is refused naming the key and the valid names.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "attnlab/arm.h"
#include "attnlab/attention_backend.h"
#include "attnlab/backend_table.h"
#include "attnlab/device.h"
#include "attnlab/injection.h"
#include "attnlab/model_config.h"
#include "attnlab/probes.h"
#include "attnlab/run_config.h"
#include "shard_files.h"

namespace attnlab {
namespace {

// Each table against the names docs/config.md, docs/arms.md and docs/probes.md give, in their order.
template <class E>
void expect_names(const std::vector<std::pair<E, std::string>>& expected, const std::string& what) {
  const auto& table = name_table<E>();
  ASSERT_EQ(table.entries().size(), expected.size()) << what;
  std::string list;
  for (size_t i = 0; i < expected.size(); ++i) {
    const auto& [value, name] = expected[i];
    EXPECT_EQ(table.entries()[i].value, value) << what << " " << name;
    EXPECT_EQ(table.name(value), name) << what;
    EXPECT_EQ(table.parse(name), value) << what << " " << name;
    EXPECT_EQ(table.parse(name, "key"), value) << what << " " << name;
    EXPECT_TRUE(table.has(value)) << what << " " << name;
    list += (i ? ", " : "") + name;
  }
  EXPECT_EQ(table.valid_names(), list) << what;
  EXPECT_FALSE(table.find("bogus").has_value()) << what;
  EXPECT_FALSE(table.find(expected[0].second + " ").has_value()) << what;  // exact, no trimming
  try {
    table.parse("bogus");
    ADD_FAILURE() << what << ": 'bogus' parsed";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), "unknown " + what + " 'bogus'; valid: " + list);
  }
  try {
    table.parse("bogus", "some.key");
    ADD_FAILURE() << what << ": 'bogus' parsed";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), "some.key: 'bogus' is not one of " + list);
  }
}

TEST(NameTables, EveryNameParsesAndPrintsBack) {
  using B = AttentionBackend;
  expect_names<B>({{B::automatic, "auto"}, {B::fused, "fused"}, {B::reference, "reference"}, {B::sdpa, "sdpa"},
                   {B::flash, "flash"}, {B::cudnn, "cudnn"}},
                  "attention backend");
  expect_names<DeviceChoice>({{DeviceChoice::automatic, "auto"}, {DeviceChoice::cpu, "cpu"}, {DeviceChoice::cuda, "cuda"}},
                             "device");
  expect_names<Precision>({{Precision::bf16, "bf16"}, {Precision::fp32, "fp32"}}, "precision");
  expect_names<WindowSampling>({{WindowSampling::random, "random"}, {WindowSampling::document, "document"}},
                               "window sampling");
  expect_names<GeluKind>({{GeluKind::tanh, "tanh"}, {GeluKind::erf, "erf"}}, "GELU");
  expect_names<SinkKind>({{SinkKind::none, "none"}, {SinkKind::fixed_zero, "fixed_zero"}, {SinkKind::learned, "learned"}},
                         "sink term");
  expect_names<GateKind>({{GateKind::none, "none"}, {GateKind::norm, "norm"}, {GateKind::projection, "projection"}},
                         "gate form");
  expect_names<GateSlot>({{GateSlot::value, "value"}, {GateSlot::routing, "routing"}}, "gate slot");
  expect_names<JunkKind>({{JunkKind::structured, "structured"}, {JunkKind::gaussian, "gaussian"},
                          {JunkKind::gate_direction, "gate_direction"}},
                         "junk kind");
  expect_names<QuietCutoff>({{QuietCutoff::median, "median"}, {QuietCutoff::p25, "p25"}}, "quiet-read cutoff");
}

TEST(NameTables, TheOneLineWrappersAreTheTables) {
  EXPECT_EQ(to_string(AttentionBackend::automatic), "auto");
  EXPECT_EQ(parse_attention_backend("flash"), AttentionBackend::flash);
  EXPECT_EQ(to_string(DeviceChoice::automatic), "auto");
  EXPECT_EQ(to_string(Precision::fp32), "fp32");
  EXPECT_EQ(to_string(GeluKind::erf), "erf");
  EXPECT_EQ(to_string(SinkKind::fixed_zero), "fixed_zero");
  EXPECT_EQ(to_string(GateSlot::routing), "routing");
  EXPECT_EQ(parse_junk_kind("gate_direction"), JunkKind::gate_direction);
  EXPECT_EQ(to_string(QuietCutoff::p25), "p25");
}

TEST(NameTables, AnAliasParsesButIsNeverWritten) {
  EXPECT_EQ(parse_gate_kind("proj"), GateKind::projection);
  EXPECT_EQ(to_string(GateKind::projection), "projection");
  EXPECT_EQ(name_table<GateKind>().valid_names(), "none, norm, projection");
}

enum class Colour { red, green };

TEST(NameTables, ATableThatCouldNotRoundTripIsRefused) {
  using T = NameTable<Colour>;
  EXPECT_THROW(T("colour", {{Colour::red, "red"}, {Colour::green, "red"}}), std::logic_error);
  EXPECT_THROW(T("colour", {{Colour::red, "red"}, {Colour::red, "green"}}), std::logic_error);
  EXPECT_THROW(T("colour", {{Colour::red, "red"}, {Colour::green, "green"}}, {{Colour::green, "red"}}), std::logic_error);
  const T ok("colour", {{Colour::red, "red"}}, {{Colour::red, "rouge"}});
  EXPECT_EQ(ok.parse("rouge"), Colour::red);
  EXPECT_FALSE(ok.has(Colour::green));
  EXPECT_THROW(ok.name(Colour::green), std::logic_error);
}

class ConfigNames : public ::testing::Test {
 protected:
  void SetUp() override {
    tmp_.write_text("run.yaml", "model: {arm: baseline, n_layer: 1, n_head: 2, d_model: 32, block_size: 32, vocab_size: 64}\n"
                                "data: {train: a, val: b}\ntrain: {seq_len: 16, max_steps: 1}\n");
  }
  RunConfig load(const std::vector<std::string>& sets) { return load_run_config(tmp_.file("run.yaml"), sets); }
  std::string error_of_sets(const std::vector<std::string>& sets) {
    try {
      load(sets);
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "no error";
  }
  std::string error_of(const std::string& set) { return error_of_sets({set}); }
  testing::TempDir tmp_;
};

// key, its valid names as docs/config.md lists them.
const std::vector<std::pair<std::string, std::string>> kEnumKeys = {
    {"attention.backend", "auto, fused, reference, sdpa, flash, cudnn"},
    {"train.device", "auto, cpu, cuda"},
    {"train.precision", "bf16, fp32"},
    {"model.gelu", "tanh, erf"},
    {"model.routing_gate", "none, norm, projection"},
};

TEST_F(ConfigNames, AnUnknownValueIsRefusedNamingTheKeyAndTheValidNames) {
  for (const auto& [key, names] : kEnumKeys) {
    EXPECT_EQ(error_of(key + "=bogus"), key + ": 'bogus' is not one of " + names);
    EXPECT_EQ(error_of(key + "=[cpu]"), key + ": expected a string, got a list");
    EXPECT_EQ(error_of(key + "=Auto"), key + ": 'Auto' is not one of " + names);  // names are exact
  }
  // A value that cannot be printed is named by why, before any refusal would echo it.
  EXPECT_EQ(error_of("train.device=\"a\\tb\""), "train.device: control character 0x09 at byte 1 in \"a\\tb\"");
}

TEST_F(ConfigNames, EveryNameIsReadAndWrittenBackAsTheSameWord) {
  for (const auto& [key, names] : kEnumKeys) {
    for (size_t start = 0; start < names.size();) {
      const auto comma = names.find(", ", start);
      const std::string name = names.substr(start, comma - start);
      start = comma == std::string::npos ? names.size() : comma + 2;
      const auto cfg = load({key + "=" + name});
      const auto j = to_json(cfg);
      const auto dot = key.find('.');
      EXPECT_EQ(j[key.substr(0, dot)][key.substr(dot + 1)], name) << key;
      EXPECT_NE(to_yaml(cfg).find(key.substr(dot + 1) + ": " + name + "\n"), std::string::npos) << key << "=" << name;
      EXPECT_TRUE(differing_keys(cfg, run_config_from_json(j)).empty()) << key << "=" << name;
    }
  }
  EXPECT_EQ(load({"model.routing_gate=proj"}).model.routing_gate, GateKind::projection);  // the alias
  EXPECT_EQ(to_json(load({"model.routing_gate=proj"}))["model"]["routing_gate"], "projection");
}

// docs/kernels.md: sdpa computes the arms whose attention is the plain causal softmax, baseline and
// sink_token; the config check and arm_attention() ask the same refusal (backend_table.h).
TEST_F(ConfigNames, TheSdpaRuleIsOneFunctionForTheConfigAndTheBackend) {
  EXPECT_TRUE(computes_plain_softmax(arm_by_name("out_gate")));  // the output gate acts after the attention
  EXPECT_FALSE(computes_plain_softmax(arm_by_name("off_by_one")));
  for (const auto& spec : all_arms()) {
    const std::string& name = spec.name;
    // A prepended token or an output gate leaves the attention plain; a sink or a gate does not.
    const bool plain = spec.sink == SinkKind::none && spec.gate == GateKind::none;
    const auto arm = with_routing_gate(spec, GateKind::norm);
    EXPECT_EQ(computes_plain_softmax(arm), plain) << name;
    const AttentionRequest call;  // CPU float32, square: the arm is all that differs
    EXPECT_EQ(backend_refusal(AttentionBackend::sdpa, call, arm).empty(), plain) << name;
    for (auto b : {AttentionBackend::automatic, AttentionBackend::fused, AttentionBackend::reference, AttentionBackend::flash})
      EXPECT_EQ(backend_refusal(b, call, arm), "") << name << " " << to_string(b);
    const auto message = error_of_sets({"attention.backend=sdpa", "model.arm=" + name});
    EXPECT_EQ(message == "no error", plain) << name << ": " << message;
    if (!plain) {
      EXPECT_EQ(message.rfind("attention.backend: ", 0), 0u) << message;
      EXPECT_NE(message.find("model.arm '" + name + "'"), std::string::npos) << message;
    }
  }
}

TEST_F(ConfigNames, AValueCastIntoAnEnumIsRefusedByValidate) {
  auto cfg = load({});
  cfg.train.precision = static_cast<Precision>(7);
  try {
    validate(cfg);
    ADD_FAILURE() << "a precision of 7 passed";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), "train.precision: 7 is not one of bf16, fp32");
  }
}

}  // namespace
}  // namespace attnlab
