// The report's probe and injection tables from hand-made results: means and sds over seeds, the
// paper's rows labelled with their scale, and the cache key that decides reuse.
#include <gtest/gtest.h>

#include <fstream>

#include "attnlab/probe_report.h"
#include "unit/shard_files.h"

namespace attnlab {
namespace {

nlohmann::json probe_with(double first_key_mass, double exposure) {
  return {{"summary", {{"model", {{"first_key_mass", first_key_mass}, {"sink_rate", 0.0}, {"read_norm_ratio", 0.5},
                                  {"phantom_mass", nullptr}, {"exposure", exposure}, {"gate_mean", nullptr},
                                  {"gate_closed_share", nullptr}}}}}};
}

nlohmann::json inject_with(double clean, double increase) {
  return {{"options", {{"kind", "structured"}, {"cutoff", "p25"}}},
          {"result", {{"clean_loss", clean},
                      {"doses", nlohmann::json::array({{{"eps", 0.4}, {"loss", clean + increase}, {"increase", increase}}})}}}};
}

nlohmann::json run(const std::string& arm, int seed, double fk, double exposure, double increase) {
  return {{"name", "micro/" + arm + "/s" + std::to_string(seed)}, {"tier", "micro"}, {"variant", ""}, {"arm", arm},
          {"seed", seed}, {"probe", probe_with(fk, exposure)}, {"inject", nlohmann::json::array({inject_with(4.0, increase)})}};
}

TEST(ProbeTables, MeansAndSdsOverSeedsPerArm) {
  // baseline: first-key mass 2% and 4% -> 3.00% ± 1.41%; increases 0.01 and 0.03 -> +0.0200 ± 0.0141.
  const nlohmann::json results = {{"eps", nlohmann::json::array({0.4})},
                                  {"runs", nlohmann::json::array({run("baseline", 1, 0.02, 0.2, 0.01), run("baseline", 2, 0.04, 0.3, 0.03),
                                            run("sink_logit", 1, 0.005, 0.1, -0.002)})}};
  const auto md = probe_tables_markdown(results, false);
  EXPECT_NE(md.find("| baseline | 3.00% ± 1.41% | 0.00% ± 0.00% | 0.500 ± 0.000 | - | 25.00% ± 7.07% | - | - | 2 |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| sink_logit | 0.50% |"), std::string::npos) << md;
  EXPECT_NE(md.find("| baseline | 4.0000 ± 0.0000 | +0.0200 ± 0.0141 | 2 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| sink_logit | 4.0000 | -0.0020 | 1 |"), std::string::npos) << md;
  EXPECT_EQ(md.find("paper"), std::string::npos) << "no paper rows without --compare-paper";
  const auto with_paper = probe_tables_markdown(results, true);
  EXPECT_NE(with_paper.find("| *paper, 124m scale:* baseline | 6.0% | | 0.42 |"), std::string::npos) << with_paper;
  EXPECT_NE(with_paper.find("| *paper, 124m scale:* baseline | | +0.110 |"), std::string::npos) << with_paper;
}

TEST(ProbeTables, ARunThatFailedIsListedWithItsError) {
  nlohmann::json r = run("baseline", 1, 0.02, 0.2, 0.01);
  r["probe"] = nullptr;
  r["inject"] = nlohmann::json::array();
  r["error"] = "no checkpoint";
  const auto md = probe_tables_markdown({{"eps", nlohmann::json::array({0.4})}, {"runs", nlohmann::json::array({r})}}, false);
  EXPECT_NE(md.find("micro/baseline/s1: not probed (no checkpoint)"), std::string::npos) << md;
}

TEST(ProbeCache, ReusedOnlyWhenTheKeyMatches) {
  testing::TempDir tmp;
  const nlohmann::json result = {
      {"provenance", {{"checkpoint", "/r/checkpoints/step_000300"}, {"step", 300}, {"data", "v*.bin"}, {"sequences", 16},
                      {"length", 256}, {"batch_size", 8}, {"probe_seed", nullptr}, {"device", "cpu"}}},
      {"options", {{"kind", "gaussian"}, {"eps", nlohmann::json::array({0.4})}}}};
  std::ofstream(tmp.file("x.json")) << result.dump();
  auto key = result_key(result);
  EXPECT_EQ(read_cached(tmp.file("x.json"), key), result);
  key["step"] = 400;  // a newer checkpoint
  EXPECT_TRUE(read_cached(tmp.file("x.json"), key).is_null());
  key = result_key(result);
  key["options"]["eps"] = nlohmann::json::array({0.8});
  EXPECT_TRUE(read_cached(tmp.file("x.json"), key).is_null());
  EXPECT_TRUE(read_cached(tmp.file("missing.json"), result_key(result)).is_null());
  std::ofstream(tmp.file("bad.json")) << "{not json";
  EXPECT_TRUE(read_cached(tmp.file("bad.json"), result_key(result)).is_null());
}

}  // namespace
}  // namespace attnlab
