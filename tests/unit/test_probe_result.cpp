// Probe and injection results through their JSON form and back: the typed values survive (none
// where a measure does not apply to the arm, NaN where nothing was averaged: both written null),
// the shape is the documented one, and a file that does not fit is refused naming the key.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "attnlab/probe_measures.h"
#include "attnlab/probe_result.h"

namespace attnlab {
namespace {

// Equal values, NaN equal to NaN.
bool same(const MeasureValue& a, const MeasureValue& b) {
  if (!a || !b) return !a && !b;
  return (std::isnan(*a) && std::isnan(*b)) || *a == *b;
}

void expect_same(const ProbeSummary& a, const ProbeSummary& b) {
  const auto& table = probe_measure_table();
  ASSERT_EQ(a.layers.size(), b.layers.size());
  for (size_t l = 0; l < a.layers.size(); ++l) {
    EXPECT_EQ(a.layers[l].layer, b.layers[l].layer);
    ASSERT_EQ(a.layers[l].heads.size(), b.layers[l].heads.size());
    for (size_t i = 0; i < table.size(); ++i) {
      ASSERT_EQ(a.layers[l].heads[i].size(), b.layers[l].heads[i].size()) << table[i].name;
      for (size_t h = 0; h < a.layers[l].heads[i].size(); ++h)
        EXPECT_TRUE(same(a.layers[l].heads[i][h], b.layers[l].heads[i][h])) << table[i].name << " head " << h;
      EXPECT_TRUE(same(a.layers[l].mean.values[i], b.layers[l].mean.values[i])) << table[i].name;
    }
  }
  for (size_t i = 0; i < table.size(); ++i) EXPECT_TRUE(same(a.model.values[i], b.model.values[i])) << table[i].name;
}

// Two layers of two heads for an arm with a sink term and no gate. Nothing is added to the read-norm
// ratio (as at T = 1), so its every value is NaN; gates are none.
ProbeSummary hand_made_summary() {
  std::vector<LayerProbeSums> layers(2, LayerProbeSums(2));
  layers[0].first_key_mass.add(0, 0.2, 1.0);  // 0.2
  layers[0].first_key_mass.add(1, 0.6, 2.0);  // 0.3
  layers[1].first_key_mass.add(0, 0.5, 1.0);
  layers[1].first_key_mass.add(1, 0.7, 1.0);
  for (auto& l : layers)
    for (int64_t h = 0; h < 2; ++h) {
      l.sink_score.add(h, h == 0 ? 0.9 : 0.1, 1.0);
      l.phantom_mass.add(h, 0.25, 1.0);
      l.exposure.add(h, 0.1 * double(h + 1), 1.0);
    }
  return probe_summary(layers, ProbeFeatures{true, false});
}

TEST(ProbeResultJson, SummaryRoundTripKeepsNoneAndNaN) {
  const auto s = hand_made_summary();
  ASSERT_TRUE(s.model["read_norm_ratio"].has_value());
  EXPECT_TRUE(std::isnan(*s.model["read_norm_ratio"]));
  EXPECT_FALSE(s.model["gate_mean"].has_value());
  const auto j = nlohmann::json::parse(to_json(s).dump());
  // The documented shape, values computed by hand above.
  EXPECT_DOUBLE_EQ(j["layers"][0]["heads"]["first_key_mass"][1].get<double>(), 0.3);
  EXPECT_DOUBLE_EQ(j["layers"][0]["mean"]["first_key_mass"].get<double>(), 0.25);
  EXPECT_DOUBLE_EQ(j["layers"][0]["sink_rate"].get<double>(), 0.5);
  EXPECT_FALSE(j["layers"][0]["heads"].contains("sink_rate"));
  EXPECT_DOUBLE_EQ(j["model"]["first_key_mass"].get<double>(), 0.425);  // (0.2 + 0.3 + 0.5 + 0.7) / 4
  EXPECT_DOUBLE_EQ(j["model"]["sink_rate"].get<double>(), 0.5);
  EXPECT_TRUE(j["model"]["read_norm_ratio"].is_null());  // NaN
  EXPECT_TRUE(j["model"]["gate_mean"].is_null());        // not applicable
  EXPECT_TRUE(j["layers"][1]["heads"]["gate_closed_share"][0].is_null());
  expect_same(probe_summary_from_json(j, ProbeFeatures{true, false}), s);
}

TEST(ProbeResultJson, SummaryReadBackRefusesWhatDoesNotFit) {
  const auto j = to_json(hand_made_summary());
  auto unknown = j;
  unknown["model"]["first_key_share"] = 0.1;
  try {
    probe_summary_from_json(unknown, ProbeFeatures{true, false});
    FAIL() << "no throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("summary.model.first_key_share"), std::string::npos) << e.what();
  }
  auto missing = j;
  missing["layers"][0]["mean"].erase("exposure");
  EXPECT_THROW(probe_summary_from_json(missing, ProbeFeatures{true, false}), std::invalid_argument);
  auto ragged = j;
  ragged["layers"][1]["heads"]["exposure"].push_back(0.5);
  EXPECT_THROW(probe_summary_from_json(ragged, ProbeFeatures{true, false}), std::invalid_argument);
  // Phantom mass is a number, so the arm has a sink term: read as an arm without one, it is refused.
  try {
    probe_summary_from_json(j, ProbeFeatures{false, false});
    FAIL() << "no throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("phantom_mass"), std::string::npos) << e.what();
  }
}

Provenance provenance(const std::string& arm) {
  Provenance p;
  p.checkpoint = "/r/checkpoints/step_000008", p.step = 8, p.arm = arm, p.tier = "tiny", p.run_seed = 1;
  p.parent = ParentRecord{"/p/checkpoints/step_000004", 4};
  p.data = "v*.bin", p.data_files = {"v_000000.bin"}, p.sequences = 4, p.length = 16, p.batch_size = 2;
  p.selection = "the first N", p.val_fingerprint = 18446744073709551615ull, p.device = "cpu";
  p.dtype = "float32", p.attention = "reference", p.attnlab = "0.1 (abc)";
  return p;
}

// A cached summary is reused only when probe_summary() could have produced it for this model: each
// way a hand-edited file can disagree is refused, naming it.
TEST(ProbeSummaryCheck, RefusesWhatTheModelAndTheHeadsCouldNotHaveProduced) {
  const auto s = hand_made_summary();
  EXPECT_NO_THROW(check_probe_summary(s, ProbeFeatures{true, false}, 2, 2));
  EXPECT_THROW(check_probe_summary(s, ProbeFeatures{true, false}, 3, 2), std::invalid_argument);  // layer count
  EXPECT_THROW(check_probe_summary(s, ProbeFeatures{true, false}, 2, 3), std::invalid_argument);  // head count
  const size_t fkm = probe_measure_index("first_key_mass"), phantom = probe_measure_index("phantom_mass");
  auto refused = [&](const std::function<void(ProbeSummary&)>& edit, const std::string& named) {
    auto bad = s;
    edit(bad);
    try {
      check_probe_summary(bad, ProbeFeatures{true, false}, 2, 2);
      ADD_FAILURE() << "accepted; expected a refusal naming " << named;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(named), std::string::npos) << e.what();
    }
  };
  refused([&](ProbeSummary& x) { x.layers[1].layer = 7; }, "numbered 7");
  refused([&](ProbeSummary& x) { x.layers.pop_back(); }, "layers");
  refused([&](ProbeSummary& x) { x.layers[0].heads[fkm].push_back(0.5); }, "first_key_mass");
  refused([&](ProbeSummary& x) { x.layers[0].mean.values[fkm] = 0.9; }, "first_key_mass");
  refused([&](ProbeSummary& x) { x.model.values[phantom] = std::nan(""); }, "phantom_mass");  // null for NaN
  refused([&](ProbeSummary& x) { x.model["sink_rate"] = 1.0; }, "sink_rate");
  refused([&](ProbeSummary& x) { x.layers[0].heads[fkm][0] = -5.0; }, "outside [0, 1]");
  refused([&](ProbeSummary& x) { x.layers[0].heads[fkm][0] = 1e300; }, "outside [0, 1]");
}

TEST(ProbeResultJson, ProbeResultRoundTripTakesTheArmFromTheRegistry) {
  const ProbeResult probe{provenance("sink_logit"), {"a", "b"}, hand_made_summary()};
  const auto j = nlohmann::json::parse(to_json(probe).dump(1));
  const auto back = probe_result_from_json(j);
  EXPECT_EQ(to_json(back.provenance), to_json(probe.provenance));
  EXPECT_EQ(back.conventions, probe.conventions);
  expect_same(back.summary, probe.summary);
  auto other = j;
  other["provenance"]["arm"] = "baseline";  // no sink term: a phantom mass there does not fit
  EXPECT_THROW(probe_result_from_json(other), std::invalid_argument);
  other["provenance"]["arm"] = "no_such_arm";
  EXPECT_THROW(probe_result_from_json(other), std::invalid_argument);
  other = j;
  other["provenance"].erase("step");
  EXPECT_THROW(probe_result_from_json(other), std::invalid_argument);
}

void expect_same(const std::vector<DoseLoss>& a, const std::vector<DoseLoss>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t k = 0; k < a.size(); ++k) {
    EXPECT_EQ(a[k].eps, b[k].eps);
    EXPECT_TRUE(same(a[k].loss, b[k].loss));
    EXPECT_TRUE(same(a[k].increase, b[k].increase));
  }
}

TEST(ProbeResultJson, InjectResultRoundTripWithAndWithoutPerLayer) {
  InjectResult r{provenance("combo2"), {}, {"c"}, {}};
  r.options.kind = JunkKind::gate_direction, r.options.cutoff = QuietCutoff::p25;
  r.options.eps = {0.0, 0.8}, r.options.layers = {1}, r.options.per_layer = true, r.options.seed = 7;
  r.result.clean_loss = 4.125;
  r.result.layers = {1};
  r.result.doses = {{0.0, 4.125, 0.0}, {0.8, std::nan(""), std::nan("")}};  // a dose that diverged
  r.result.per_layer = std::vector<LayerDoses>{{1, {{0.0, 4.125, 0.0}, {0.8, 4.5, 0.375}}}};
  const auto j = nlohmann::json::parse(to_json(r).dump());
  EXPECT_TRUE(j["result"]["doses"][1]["loss"].is_null());
  EXPECT_EQ(j["options"], nlohmann::json::parse(
                              R"({"kind": "gate_direction", "cutoff": "p25", "eps": [0.0, 0.8], "layers": [1],
                                  "per_layer": true, "seed": 7})"));
  auto back = inject_result_from_json(j);
  EXPECT_EQ(to_json(back.provenance), to_json(r.provenance));
  EXPECT_EQ(to_json(back.options), to_json(r.options));
  EXPECT_EQ(back.conventions, r.conventions);
  EXPECT_EQ(back.result.clean_loss, 4.125);
  EXPECT_EQ(back.result.layers, r.result.layers);
  expect_same(back.result.doses, r.result.doses);
  ASSERT_TRUE(back.result.per_layer.has_value());
  ASSERT_EQ(back.result.per_layer->size(), 1u);
  EXPECT_EQ((*back.result.per_layer)[0].layer, 1);
  expect_same((*back.result.per_layer)[0].doses, (*r.result.per_layer)[0].doses);

  r.result.per_layer.reset();
  const auto without = to_json(r);
  EXPECT_FALSE(without["result"].contains("per_layer"));
  EXPECT_FALSE(inject_result_from_json(without).result.per_layer.has_value());
  auto bad = without;
  bad["options"]["kind"] = "sideways";
  EXPECT_THROW(inject_result_from_json(bad), std::invalid_argument);
}

}  // namespace
}  // namespace attnlab
