// The noise floor of paired differences: each null twin (an arm again under another init seed, on
// the same data order) against its original, so the report can say how far a contrast is from
// what two identical arms differ by (docs/sweeps.md, "Null pairs").
#include <algorithm>

#include <fmt/format.h>

#include "attnlab/report.h"

namespace attnlab {

NoiseFloor noise_floor(const std::vector<const RunRecord*>& runs, const std::vector<const RunRecord*>& twins,
                       const PairedQuantity& quantity) {
  NoiseFloor floor;
  std::vector<const RunRecord*> ordered = twins;
  std::sort(ordered.begin(), ordered.end(), [](const RunRecord* a, const RunRecord* b) {
    return a->arm != b->arm ? a->arm < b->arm : a->seed < b->seed;
  });
  std::vector<double> values;
  for (const auto* twin : ordered) {
    const auto what = fmt::format("{} s{}", twin->arm, twin->seed);
    const RunRecord* original = nullptr;
    for (const auto* r : runs)
      if (r->arm == twin->arm && r->seed == twin->seed && r->finished()) original = r;
    if (!twin->finished() || !original) {
      floor.skipped.push_back(what + ": " + (!twin->finished() ? "the null twin" : "its original run") + " has not finished");
      continue;
    }
    const auto a = quantity.value(*twin), b = quantity.value(*original);
    if (!a || !b) {
      floor.skipped.push_back(what + ": " + (!a ? "the null twin" : "its original run") + " has no " + quantity.name);
      continue;
    }
    if (quantity.data(*twin) != quantity.data(*original)) {
      floor.skipped.push_back(what + ": the null twin was judged on other " + quantity.data_name);
      continue;
    }
    floor.pairs.push_back({twin->arm, twin->seed, *a - *b});
    values.push_back(floor.pairs.back().value);
  }
  floor.stats = summarize(values);
  return floor;
}

}  // namespace attnlab
