// The junk of SPEC section 4: seeded draws (identical across arms), unit directions, and the dose
// added to quiet reads.
#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <stdexcept>

#include "attnlab/gates.h"
#include "attnlab/injection.h"
#include "common/seed_mix.h"

namespace attnlab {
namespace {

using seed_mix::mix;
using seed_mix::splitmix64;

constexpr uint64_t kJunkDomain = 0x6a756e6b6a756e6bULL;  // "junkjunk": apart from init and data seeds

// Draw slot of each model position: text position t -> slot t; sink_token's learned token -> slot T.
at::Tensor slots_of_positions(int64_t T, bool sink_token) {
  if (!sink_token) return at::arange(T, at::kLong);
  return at::cat({at::full({1}, T, at::kLong), at::arange(T, at::kLong)});
}

at::Tensor unit(const at::Tensor& x) {  // (..., d) float64; zero rows stay zero
  auto n = x.norm(2, -1, /*keepdim=*/true);
  return at::where(n > 0, x / n.clamp_min(1e-300), at::zeros_like(x));
}

at::Tensor structured_directions(const JunkDraws& draws, const at::Tensor& v, const at::Tensor& slots, bool sink_token) {
  const int64_t H = v.size(1);
  auto seq = draws.donor_seq.index_select(2, slots);                           // (B, H, Tm)
  auto pos = draws.donor_pos.index_select(2, slots) + (sink_token ? 1 : 0);  // donor text pos -> model pos
  auto head = at::arange(H, at::kLong).view({1, H, 1}).expand_as(seq);
  auto donor = v.detach().to(at::kDouble).index({seq, head, pos});            // (B, H, Tm, d)
  return unit(donor);
}

at::Tensor gate_directions(const at::Tensor& gate_w, const at::Tensor& v) {
  if (!gate_w.defined())
    throw std::invalid_argument("junk kind gate_direction needs a projection gate (proj_gate, combo2, or renorm with "
                                "routing_gate: projection); this model has none");
  auto w = gate_w.detach().to(at::kDouble);  // (H, d)
  if ((w.norm(2, -1) == 0).any().item<bool>())
    throw std::invalid_argument("junk kind gate_direction: a head's gate direction w_h is zero (untrained gate?)");
  return unit(w).view({1, w.size(0), 1, w.size(1)}).expand({v.size(0), v.size(1), v.size(2), v.size(3)});
}

}  // namespace

template <>
const NameTable<JunkKind>& name_table<JunkKind>() {
  static const NameTable<JunkKind> table("junk kind", {{JunkKind::structured, "structured"},
                                                       {JunkKind::gaussian, "gaussian"},
                                                       {JunkKind::gate_direction, "gate_direction"}});
  return table;
}

JunkKind parse_junk_kind(const std::string& name) { return name_table<JunkKind>().parse(name); }

std::string to_string(JunkKind kind) { return name_table<JunkKind>().name(kind); }

JunkDraws draw_junk(JunkKind kind, uint64_t seed, int64_t layer, int64_t batch_index, int64_t B, int64_t H, int64_t T,
                    int64_t d) {
  JunkDraws draws;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(
      mix(mix(splitmix64(seed ^ kJunkDomain), uint64_t(layer)), uint64_t(batch_index)));
  if (kind == JunkKind::structured) {
    if (B < 2)
      throw std::invalid_argument("structured junk takes reads from another sequence of the batch: the batch has " +
                                  std::to_string(B) + " sequence; use --batch-size >= 2 and >= 2 sequences");
    auto offset = at::randint(1, B, {B, H, T + 1}, gen, at::kLong);  // never the read's own sequence
    draws.donor_seq = (at::arange(B, at::kLong).view({B, 1, 1}) + offset).remainder(B);
    draws.donor_pos = at::randint(0, T, {B, H, T + 1}, gen, at::kLong);
  } else if (kind == JunkKind::gaussian) {
    draws.gaussian = unit(at::randn({B, H, T + 1, d}, gen, at::kDouble));
  }
  return draws;
}

at::Tensor junk_directions(JunkKind kind, const JunkDraws& draws, const at::Tensor& v, const at::Tensor& gate_w,
                           bool sink_token) {
  const int64_t T = v.size(2) - (sink_token ? 1 : 0);
  const auto slots = slots_of_positions(T, sink_token);
  switch (kind) {
    case JunkKind::structured: return structured_directions(draws, v, slots, sink_token);
    case JunkKind::gaussian: return draws.gaussian.index_select(2, slots);
    case JunkKind::gate_direction: return gate_directions(gate_w, v);
  }
  throw std::logic_error("junk_directions: unknown kind");
}

at::Tensor inject_junk(const at::Tensor& v, const at::Tensor& u, double eps, QuietCutoff cutoff) {
  auto norms = read_norms(v.detach());                                 // (B, H, Tm)
  auto median = read_norm_cutoff(norms, QuietCutoff::median);          // (B, H) m_h
  auto quiet = quiet_reads(norms, cutoff).unsqueeze(-1);               // (B, H, Tm, 1)
  auto delta = (eps * median.view({median.size(0), median.size(1), 1, 1}) * u).to(v.scalar_type());
  return at::where(quiet, v + delta, v);
}

}  // namespace attnlab
