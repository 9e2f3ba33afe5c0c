// The report's probe and injection tables from hand-made results: means and sds over seeds, the
// paper's rows labelled with their scale, and the cache key that decides reuse.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "attnlab/probe_report.h"
#include "unit/shard_files.h"

namespace attnlab {
namespace {

ProbeResult probe_with(double first_key_mass, double exposure) {
  ProbeResult p;  // phantom mass and gates stay none, as for an arm without them
  p.summary.model["first_key_mass"] = first_key_mass;
  p.summary.model["sink_rate"] = 0.0;
  p.summary.model["read_norm_ratio"] = 0.5;
  p.summary.model["exposure"] = exposure;
  return p;
}

InjectResult inject_with(double clean, double increase) {
  InjectResult r;
  r.options.kind = JunkKind::structured;
  r.options.cutoff = QuietCutoff::p25;
  r.result.clean_loss = clean;
  r.result.doses = {{0.4, clean + increase, increase}};
  return r;
}

ProbeReportRun run(const std::string& arm, int seed, double fk, double exposure, double increase) {
  return {"micro/" + arm + "/s" + std::to_string(seed), "micro", "", arm, uint64_t(seed), probe_with(fk, exposure),
          {inject_with(4.0, increase)}, std::nullopt};
}

TEST(ProbeTables, MeansAndSdsOverSeedsPerArm) {
  // baseline: first-key mass 2% and 4% -> 3.00% ± 1.41%; increases 0.01 and 0.03 -> +0.0200 ± 0.0141.
  const ProbeReport results{
      {run("baseline", 1, 0.02, 0.2, 0.01), run("baseline", 2, 0.04, 0.3, 0.03), run("sink_logit", 1, 0.005, 0.1, -0.002)},
      {0.4},
      0};
  ProbeReport with_ratio = results;  // the massive-activation ratio 200 and 400 -> 300.0 ± 141.4
  with_ratio.runs[0].probe->sink_state = SinkStateRatio{200.0, 2};
  with_ratio.runs[1].probe->sink_state = SinkStateRatio{400.0, 1};
  const auto md = probe_tables_markdown(with_ratio, false);
  // first-key chance and the extreme-token columns are none in these hand-made probes: "-".
  EXPECT_NE(md.find("| baseline | 3.00% ± 1.41% | - | 0.00% ± 0.00% | 0.500 ± 0.000 | - | 25.00% ± 7.07% | - | - | - | - "
                    "| - | - | - | - | - | - | - | - | - | - | 300.0 ± 141.4 | 2 |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| sink_logit | 0.50% |"), std::string::npos) << md;
  EXPECT_NE(md.find("| baseline | 4.0000 ± 0.0000 | +0.0200 ± 0.0141 | 2 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| sink_logit | 4.0000 | -0.0020 | 1 |"), std::string::npos) << md;
  EXPECT_EQ(md.find("paper"), std::string::npos) << "no paper rows without --compare-paper";
  const auto with_paper = probe_tables_markdown(results, true);
  EXPECT_NE(with_paper.find("| *paper, 124m scale:* baseline | 6.0% | | | 0.42 |"), std::string::npos) << with_paper;
  EXPECT_NE(with_paper.find("| *paper, 124m scale:* baseline | | +0.110 |"), std::string::npos) << with_paper;
}

// A windowed run: model means as probe_with's, first-key mass 15.9% over the local layers and 1.9%
// over the global ones (none of the type when `types` lacks it).
ProbeReportRun windowed_run(const std::vector<bool>& types) {
  auto r = run("baseline", 1, 0.088, 0.3, 0.01);
  auto& s = r.probe->summary;
  for (bool local : types) {
    ProbeLayerSummary layer;
    layer.local = local;
    s.layers.push_back(layer);
    auto& means = local ? s.local : s.global;
    means.emplace();
    (*means)["first_key_mass"] = local ? 0.159 : 0.019;
    (*means)["exposure"] = 0.3;
  }
  return r;
}

TEST(ProbeTables, AWindowedModelWithBothLayerTypesHasNoModelMeanOfQuerySetMeasures) {
  // Local and global layers: first-key mass and sink rate average different queries on each type, so
  // the model-level cells are "-" (read-norm ratio and exposure stay); the types have their columns.
  const auto both = windowed_run({true, false});
  const auto md = probe_tables_markdown({{both}, {0.4}, 0}, false);
  EXPECT_NE(md.find("| baseline | - | - | - | 0.500 | - | 30.00% |"), std::string::npos) << md;
  EXPECT_NE(md.find("| 15.90% | 1.90% | - | - | - | - | 30.00% | 30.00% |"), std::string::npos) << md;
  EXPECT_NE(md.find("a model with both types has no model-level value of them"), std::string::npos) << md;
  EXPECT_FALSE(report_probe_value(both, "first_key_mass"));
  EXPECT_FALSE(report_probe_value(both, "sink_rate"));
  EXPECT_EQ(report_probe_value(both, "exposure"), 0.3);
  // Every layer local: one query set, so the model mean is read as it is.
  const auto local_only = windowed_run({true, true});
  EXPECT_EQ(report_probe_value(local_only, "first_key_mass"), 0.088);
  EXPECT_NE(probe_tables_markdown({{local_only}, {0.4}, 0}, false).find("| baseline | 8.80% |"), std::string::npos);
}

TEST(ProbeTables, ARunThatFailedIsListedWithItsError) {
  auto r = run("baseline", 1, 0.02, 0.2, 0.01);
  r.probe.reset();
  r.inject.clear();
  r.error = "no checkpoint";
  const auto md = probe_tables_markdown({{r}, {0.4}, 0}, false);
  EXPECT_NE(md.find("micro/baseline/s1: not probed (no checkpoint)"), std::string::npos) << md;
}

TEST(ProbeCache, ReusedOnlyWhenTheKeyMatches) {
  testing::TempDir tmp;
  InjectResult result = inject_with(4.0, 0.01);
  auto& p = result.provenance;
  p.checkpoint = "/r/checkpoints/step_000300", p.step = 300, p.arm = "baseline", p.data = "v*.bin";
  p.sequences = 16, p.length = 256, p.batch_size = 8, p.device = "cpu";
  result.options.kind = JunkKind::gaussian;
  result.options.eps = {0.4};
  std::ofstream(tmp.file("x.json")) << to_json(result).dump();
  auto key = result_key(result);
  const auto hit = read_cached_inject(tmp.file("x.json"), key);
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(to_json(*hit), to_json(result));
  key["step"] = 400;  // a newer checkpoint
  EXPECT_FALSE(read_cached_inject(tmp.file("x.json"), key).has_value());
  key = result_key(result);
  key["options"]["eps"] = nlohmann::json::array({0.8});
  EXPECT_FALSE(read_cached_inject(tmp.file("x.json"), key).has_value());
  EXPECT_FALSE(read_cached_inject(tmp.file("missing.json"), result_key(result)).has_value());
  std::ofstream(tmp.file("bad.json")) << "{not json";
  EXPECT_FALSE(read_cached_inject(tmp.file("bad.json"), result_key(result)).has_value());
  // A file whose key matches but that does not read back (here: no result) is computed again.
  auto partial = to_json(result);
  partial.erase("result");
  std::ofstream(tmp.file("partial.json")) << partial.dump();
  EXPECT_FALSE(read_cached_inject(tmp.file("partial.json"), result_key(result)).has_value());
  // One that reads back but does not fit the checkpoint (its check throws) is computed again too;
  // one that fits is reused.
  auto refuse = [](const InjectResult&) { throw std::invalid_argument("does not fit"); };
  EXPECT_FALSE(read_cached_inject(tmp.file("x.json"), result_key(result), refuse).has_value());
  EXPECT_TRUE(read_cached_inject(tmp.file("x.json"), result_key(result), [](const InjectResult&) {}).has_value());
  // A directory where the file should be is an error naming it; nothing is written over it.
  std::filesystem::create_directories(tmp.file("dir.json"));
  try {
    read_cached_inject(tmp.file("dir.json"), result_key(result));
    ADD_FAILURE() << "a directory was taken for a cache miss";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("dir.json is not a regular file"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace attnlab
