#include "attention/flash_kernels.h"

#include <ATen/ops/_flash_attention_backward.h>
#include <ATen/ops/_flash_attention_forward.h>
#include <ATen/ops/_scaled_dot_product_flash_attention.h>
#include <ATen/ops/_scaled_dot_product_flash_attention_backward.h>
#include <ATen/ops/_scaled_dot_product_flash_attention_for_cpu.h>
#include <ATen/ops/_scaled_dot_product_flash_attention_for_cpu_backward.h>

#include <algorithm>
#include <limits>
#include <optional>
#include <tuple>
#include <vector>

namespace attnlab::detail {
namespace {

constexpr bool kCausal = true;
constexpr double kNoDropout = 0.0;
// Key columns: a float32 quantity that must reach a half-precision kernel (the routing bias in the
// keys, the lse gradient in `out`) rides in three columns, hi + mid + lo parts each exact in the half
// type, so the kernel's float32 dot products sum them back to about float32 precision.
constexpr int64_t kParts = 3;
// ... and the bias is clamped below at -1000 first: exp(-1000) is 0 in float32, so nothing changes
// unless every key of a row lies below it (gate logits under -1000).
constexpr double kBiasFloor = -1000.0;
// r_j / scale must stay inside float16's range (65504) for its parts to be finite: with the default
// scale 1 / sqrt(head_dim) -1000 / scale does; an explicit scale under 1/60 raises the floor.
constexpr double kHalfKeyLimit = 60000.0;
// FlashAttention-2 takes head dims in multiples of 8.
constexpr int64_t kHeadDimAlign = 8;

int64_t round_up(int64_t x, int64_t multiple) { return (x + multiple - 1) / multiple * multiple; }

/// A column added by widen(): a scalar filled in, or a [B, H, T] tensor copied in.
struct Column {
  double value = 0.0;
  at::Tensor values;  ///< when defined, used instead of `value`
};

/// t [B, H, T, d] widened to `width` columns: t, then `columns`, then zeros. Laid out [B, T, H, width]
/// like the model's tensors, so the kernels' transposed view of it is contiguous (their backward would
/// otherwise copy dO into that layout). Returns t itself when nothing is added.
at::Tensor widen(const at::Tensor& t, int64_t width, const std::vector<Column>& columns = {}) {
  const int64_t d = t.size(-1);
  if (width == d) return t;
  auto out = at::empty({t.size(0), t.size(2), t.size(1), width}, t.options()).transpose(1, 2);
  out.narrow(-1, 0, d).copy_(t);
  int64_t c = d;
  for (const auto& column : columns) {
    auto slot = out.select(-1, c++);
    column.values.defined() ? slot.copy_(column.values) : slot.fill_(column.value);
  }
  if (c < width) out.narrow(-1, c, width - c).fill_(0.0);
  return out;
}

/// The kernels read rows through strides but need each row (the last dimension) contiguous.
at::Tensor rows_contiguous(const at::Tensor& t) { return t.stride(-1) == 1 ? t : t.contiguous(); }

/// The first `n` of hi, mid and lo parts of x in `type`: each the rounding of what the previous ones
/// left, so that their sum in the accumulator type is x to about that type's precision (in float32
/// and float64 the first part is x and the others 0).
std::vector<Column> parts_of(const at::Tensor& x, at::ScalarType type, int64_t n = kParts) {
  auto rest = x.to(attention_acc_dtype(type));
  std::vector<Column> parts;
  for (int64_t i = 0; i < n; ++i) {
    parts.push_back({0.0, rest.to(type)});
    if (i + 1 < n) rest = rest - parts.back().values.to(rest.scalar_type());
  }
  return parts;
}

/// How many parts a float32 quantity needs in `type`: one in float32 and float64, kParts in half types.
int64_t parts_needed(at::ScalarType type) { return type == at::kFloat || type == at::kDouble ? 1 : kParts; }

// ---- LibTorch's flash kernels of the device on operands already prepared. Only the CPU kernel takes a mask. ----

FlashForward device_flash_forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                  const std::optional<at::Tensor>& mask, double scale) {
  if (q.is_cuda()) {
    auto r = at::_scaled_dot_product_flash_attention(q, k, v, kNoDropout, kCausal, /*return_debug_mask=*/false, scale);
    // The kernel's lse may be padded along the rows: keep the first T.
    return {std::get<0>(r), std::get<1>(r).narrow(-1, 0, q.size(2)), std::get<6>(r), std::get<7>(r), {}};
  }
  auto [o, lse] = at::_scaled_dot_product_flash_attention_for_cpu(q, k, v, kNoDropout, kCausal, mask, scale);
  return {o, lse, {}, {}, {}};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> device_flash_backward(const at::Tensor& d_o, const at::Tensor& q,
                                                                     const at::Tensor& k, const at::Tensor& v,
                                                                     const at::Tensor& out, const at::Tensor& lse,
                                                                     const std::optional<at::Tensor>& mask,
                                                                     double scale, const FlashForward& forward) {
  if (q.is_cuda()) {
    const int64_t T = q.size(2);
    return at::_scaled_dot_product_flash_attention_backward(
        rows_contiguous(d_o), q, k, v, rows_contiguous(out), lse.contiguous(), at::Tensor(), at::Tensor(), T, T,
        kNoDropout, kCausal, forward.philox_seed, forward.philox_offset, scale);
  }
  return at::_scaled_dot_product_flash_attention_for_cpu_backward(d_o, q, k, v, out, lse, kNoDropout, kCausal, mask,
                                                                 scale);
}

// ---- A local layer (docs/windows.md, "Backends"). CUDA: FlashAttention-2's own window, the ops under
// _scaled_dot_product_flash_attention, which take window_size_left / right, on the [B, T, H, d] views
// (the model's layout: no copy). CPU: LibTorch's CPU flash kernel, which has no window, over chunks of
// queries, each against only the keys its queries see (the kept ones, then the window's), the band as
// the kernel's additive mask: O(T (W + n)) work, every row exact. The chunks in the middle of the
// sequence all look alike (the same band against the same number of keys), so one call per batch row
// serves them, the kernel's batch dimension running over the chunks through strides (no copy: a
// call over every row would need one, and measured slower); the first and last few go one call each. ----

/// Queries [q0, q1) of a chunk and the keys they see: [0, kept) and [k0, k1), kept < k0.
struct Chunk {
  int64_t q0, q1, kept, k0, k1;
  int64_t keys() const { return kept + k1 - k0; }
};

/// Queries per chunk: about half the window (the band's share of a chunk's keys stays near 2/3),
/// within the CPU kernel's own query blocks of 32 to 256.
int64_t chunk_size(const AttentionWindow& w) { return std::clamp<int64_t>(w.window / 2, 32, 256); }

/// How the chunks of T queries are served: `count` whole chunks from query `first` on, each of
/// `size` queries against the kept keys and the `lead + size` keys ending at its last query (`lead`
/// = W - 1 rounded up to whole chunks, so a key gradient folds back in whole-chunk slices), in one
/// batched call; every other query in a chunk of its own, `single`.
struct ChunkPlan {
  int64_t size, lead, first = 0, count = 0;
  std::vector<Chunk> single;
  /// The batched chunks' common shape, the first one's positions (its band is every one's).
  Chunk model(const AttentionWindow& w) const { return {first, first + size, w.keep_first, first - lead, first + size}; }
};

ChunkPlan plan_chunks(int64_t T, const AttentionWindow& w) {
  ChunkPlan plan{chunk_size(w), round_up(w.window - 1, chunk_size(w))};
  // Batched: the whole chunks whose oldest window key is past the kept ones (no key twice, none missing).
  const int64_t first = round_up(w.keep_first + plan.lead, plan.size), end = T / plan.size * plan.size;
  if (first < end) plan.first = first, plan.count = (end - first) / plan.size;
  for (int64_t q0 = 0; q0 < T; q0 += plan.size) {
    if (q0 >= plan.first && q0 < plan.first + plan.count * plan.size) continue;
    const int64_t q1 = std::min(T, q0 + plan.size), k0 = std::max<int64_t>(0, q0 - w.window + 1);
    plan.single.push_back({q0, q1, std::min(w.keep_first, k0), k0, q1});
  }
  return plan;
}

/// The chunk's keys of t along `dim`: the kept ones, then the window's (a view when none is kept).
at::Tensor chunk_keys(const at::Tensor& t, const Chunk& c, int64_t dim) {
  const auto recent = t.narrow(dim, c.k0, c.k1 - c.k0);
  return c.kept > 0 ? at::cat({t.narrow(dim, 0, c.kept), recent}, dim) : recent;
}

/// The kernel's additive mask of a chunk: 0 where query position p sees key position j, -inf
/// elsewhere, [q1 - q0, keys]; plus the routing bias's mask columns [B, H, 1, T] when given.
at::Tensor chunk_mask(const Chunk& c, const AttentionWindow& w, const at::Tensor& q,
                      const std::optional<at::Tensor>& bias_mask) {
  const auto opts = at::TensorOptions().dtype(at::kLong);
  const auto p = at::arange(c.q0, c.q1, opts).view({-1, 1});
  const auto kept = at::arange(0, c.kept, opts), recent = at::arange(c.k0, c.k1, opts);
  const auto j = at::cat({kept, recent}).view({1, -1});
  const auto visible = (j <= p).logical_and((p - j < w.window).logical_or(j < w.keep_first));
  const auto type = bias_mask ? bias_mask->scalar_type() : q.scalar_type();
  auto band = at::zeros(visible.sizes(), q.options().dtype(type))
                  .masked_fill(visible.logical_not().to(q.device()), -std::numeric_limits<double>::infinity())
                  .view({1, 1, c.q1 - c.q0, c.keys()});  // [1, 1, queries, keys]: broadcast over B and H
  return bias_mask ? chunk_keys(*bias_mask, c, 3) + band : band;
}

/// dst's rows of the chunk's keys (along dim 2) += the chunk's key gradient.
void add_chunk_keys(at::Tensor& dst, const at::Tensor& grad, const Chunk& c) {
  if (c.kept > 0) dst.narrow(2, 0, c.kept).add_(grad.narrow(2, 0, c.kept));
  dst.narrow(2, c.k0, c.k1 - c.k0).add_(grad.narrow(2, c.kept, c.k1 - c.k0));
}

/// [B, H, T, w] laid out [B, T, H, w], as the kernels return o and take dO.
at::Tensor bthw_like(const at::Tensor& t) {
  return at::empty({t.size(0), t.size(2), t.size(1), t.size(3)}, t.options()).transpose(1, 2);
}

// ---- The batched chunks: t [B, H, T, ...] seen as [B, count, H, rows, ...], chunk u's rows starting at
// row start + u * size (a view; windows of neighbouring chunks overlap). ----

at::Tensor chunk_rows(const at::Tensor& t, int64_t start, int64_t count, int64_t rows, int64_t size) {
  auto sizes = t.sizes().vec(), strides = t.strides().vec();
  sizes[2] = rows;
  sizes.insert(sizes.begin() + 1, count);
  strides.insert(strides.begin() + 1, size * t.stride(2));
  return t.as_strided(sizes, strides, t.storage_offset() + start * t.stride(2));
}

/// The kernel's operands for the batched chunks, [B * count, H, rows, ...].
at::Tensor batched_queries(const at::Tensor& t, const ChunkPlan& plan) {
  return chunk_rows(t, plan.first, plan.count, plan.size, plan.size).flatten(0, 1);
}

/// t [B, H, T, ...] along T: each batched chunk's kept keys, then its window's, [B * count, H, keys, ...].
at::Tensor batched_keys(const at::Tensor& t, const ChunkPlan& plan, const AttentionWindow& w) {
  auto recent = chunk_rows(t, plan.first - plan.lead, plan.count, plan.lead + plan.size, plan.size);
  if (w.keep_first == 0) return recent.flatten(0, 1);
  auto sizes = recent.sizes().vec();
  sizes[3] = w.keep_first;
  return at::cat({t.narrow(2, 0, w.keep_first).unsqueeze(1).expand(sizes), recent}, 3).flatten(0, 1);
}

/// The batched chunks' mask: `band`, the one they share [1, 1, size, keys] (batched_band), plus each
/// one's routing-bias columns (bias_mask [B, H, 1, T]) when given, [B * count, H, size, keys].
at::Tensor batched_mask(const ChunkPlan& plan, const AttentionWindow& w, const at::Tensor& band,
                        const std::optional<at::Tensor>& bias_mask) {
  if (!bias_mask) return band;
  return batched_keys(bias_mask->squeeze(2), plan, w).unsqueeze(2) + band;
}

/// The band every batched chunk shares, in the mask's dtype (the bias's when given, else q's); made
/// once per call, not once per batch row.
at::Tensor batched_band(const ChunkPlan& plan, const AttentionWindow& w, const at::Tensor& q,
                        const std::optional<at::Tensor>& bias_mask) {
  return chunk_mask(plan.model(w), w, q, std::nullopt).to(bias_mask ? bias_mask->scalar_type() : q.scalar_type());
}

/// dst's rows += the batched chunks' key gradient grad [B * count, H, keys, d]: the kept rows summed
/// over the chunks, the window's in whole-chunk slices (slice m of every chunk covers distinct rows).
void add_batched_keys(at::Tensor dst, const at::Tensor& grad, const ChunkPlan& plan, const AttentionWindow& w) {
  const auto g = grad.unflatten(0, {dst.size(0), plan.count});
  const int64_t n = w.keep_first;
  if (n > 0) dst.narrow(2, 0, n).add_(g.narrow(3, 0, n).sum(1));
  for (int64_t m = 0; m * plan.size < plan.lead + plan.size; ++m) {
    chunk_rows(dst, plan.first - plan.lead + m * plan.size, plan.count, plan.size, plan.size)
        .add_(g.narrow(3, n + m * plan.size, plan.size));
  }
}

/// The batched chunks' rows of dst [B, H, T, ...] (a view written through) = src [B * count, H, size, ...].
void write_batched_queries(at::Tensor dst, const at::Tensor& src, const ChunkPlan& plan) {
  chunk_rows(dst, plan.first, plan.count, plan.size, plan.size).copy_(src.unflatten(0, {dst.size(0), plan.count}));
}

/// Row b of t's batch [B, ...] as [1, ...] (a view), of a mask too when given.
at::Tensor row(const at::Tensor& t, int64_t b) { return t.narrow(0, b, 1); }
std::optional<at::Tensor> row(const std::optional<at::Tensor>& t, int64_t b) {
  return t ? std::optional<at::Tensor>(row(*t, b)) : std::nullopt;
}

void batched_forward(const AttentionWindow& w, const ChunkPlan& plan, const at::Tensor& band, const at::Tensor& q,
                     const at::Tensor& k, const at::Tensor& v, const std::optional<at::Tensor>& mask, double scale,
                     at::Tensor o, at::Tensor lse) {
  auto [o_b, lse_b] = at::_scaled_dot_product_flash_attention_for_cpu(
      batched_queries(q, plan), batched_keys(k, plan, w), batched_keys(v, plan, w), kNoDropout, /*is_causal=*/false,
      batched_mask(plan, w, band, mask), scale);
  write_batched_queries(o, o_b, plan);
  write_batched_queries(lse, lse_b, plan);
}

FlashForward windowed_cpu_forward(const AttentionWindow& w, const at::Tensor& q, const at::Tensor& k,
                                  const at::Tensor& v, const std::optional<at::Tensor>& mask, double scale) {
  auto o = bthw_like(q);
  auto lse = at::empty({q.size(0), q.size(1), q.size(2)}, q.options().dtype(attention_acc_dtype(q.scalar_type())));
  const auto plan = plan_chunks(q.size(2), w);
  const auto band = plan.count > 0 ? batched_band(plan, w, q, mask) : at::Tensor();
  for (int64_t b = 0; plan.count > 0 && b < q.size(0); ++b)
    batched_forward(w, plan, band, row(q, b), row(k, b), row(v, b), row(mask, b), scale, row(o, b), row(lse, b));
  for (const auto& c : plan.single) {
    auto [o_c, lse_c] = at::_scaled_dot_product_flash_attention_for_cpu(
        q.narrow(2, c.q0, c.q1 - c.q0), chunk_keys(k, c, 2), chunk_keys(v, c, 2), kNoDropout, /*is_causal=*/false,
        chunk_mask(c, w, q, mask), scale);
    o.narrow(2, c.q0, c.q1 - c.q0).copy_(o_c);
    lse.narrow(2, c.q0, c.q1 - c.q0).copy_(lse_c);
  }
  return {o, lse, {}, {}, {}};
}

void batched_backward(const AttentionWindow& w, const ChunkPlan& plan, const at::Tensor& band, const at::Tensor& d_o,
                      const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& out, const at::Tensor& lse,
                      const std::optional<at::Tensor>& mask, double scale, at::Tensor dq, at::Tensor dk,
                      at::Tensor dv) {
  auto [dq_b, dk_b, dv_b] = at::_scaled_dot_product_flash_attention_for_cpu_backward(
      batched_queries(d_o, plan), batched_queries(q, plan), batched_keys(k, plan, w), batched_keys(v, plan, w),
      batched_queries(out, plan), batched_queries(lse, plan).contiguous(), kNoDropout, /*is_causal=*/false,
      batched_mask(plan, w, band, mask), scale);
  write_batched_queries(dq, dq_b, plan);  // every query's keys are in its own chunk: one write
  add_batched_keys(dk, dk_b, plan, w);
  add_batched_keys(dv, dv_b, plan, w);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> windowed_cpu_backward(const AttentionWindow& w, const at::Tensor& d_o,
                                                                     const at::Tensor& q, const at::Tensor& k,
                                                                     const at::Tensor& v, const at::Tensor& out,
                                                                     const at::Tensor& lse,
                                                                     const std::optional<at::Tensor>& mask,
                                                                     double scale) {
  auto dq = bthw_like(q), dk = at::zeros_like(k), dv = at::zeros_like(v);
  const auto plan = plan_chunks(q.size(2), w);
  const auto band = plan.count > 0 ? batched_band(plan, w, q, mask) : at::Tensor();
  for (int64_t b = 0; plan.count > 0 && b < q.size(0); ++b) {
    batched_backward(w, plan, band, row(d_o, b), row(q, b), row(k, b), row(v, b), row(out, b), row(lse, b), row(mask, b),
                     scale, row(dq, b), row(dk, b), row(dv, b));
  }
  for (const auto& c : plan.single) {
    const int64_t n = c.q1 - c.q0;
    auto [dq_c, dk_c, dv_c] = at::_scaled_dot_product_flash_attention_for_cpu_backward(
        d_o.narrow(2, c.q0, n), q.narrow(2, c.q0, n), chunk_keys(k, c, 2), chunk_keys(v, c, 2), out.narrow(2, c.q0, n),
        lse.narrow(2, c.q0, n).contiguous(), kNoDropout, /*is_causal=*/false, chunk_mask(c, w, q, mask), scale);
    dq.narrow(2, c.q0, n).copy_(dq_c);
    add_chunk_keys(dk, dk_c, c);
    add_chunk_keys(dv, dv_c, c);
  }
  return {dq, dk, dv};
}

KernelCalls windowed_calls(const AttentionWindow& w) {
  auto bthd = [](const at::Tensor& t) { return t.transpose(1, 2); };  // [B, H, T, d] <-> [B, T, H, d]
  const int64_t left = w.window - 1;
  auto forward = [=](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const std::optional<at::Tensor>& mask,
                     double scale) {
    if (!q.is_cuda()) return windowed_cpu_forward(w, q, k, v, mask, scale);
    const int64_t T = q.size(2);
    auto r = at::_flash_attention_forward(bthd(q), bthd(k), bthd(v), std::nullopt, std::nullopt, T, T, kNoDropout,
                                          kCausal, /*return_debug_mask=*/false, scale, left, /*window_size_right=*/0);
    return FlashForward{bthd(std::get<0>(r)), std::get<1>(r).narrow(-1, 0, T), std::get<2>(r), std::get<3>(r), {}};
  };
  auto backward = [=](const at::Tensor& d_o, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                      const at::Tensor& out, const at::Tensor& lse, const std::optional<at::Tensor>& mask, double scale,
                      const FlashForward& f) {
    if (!q.is_cuda()) return windowed_cpu_backward(w, d_o, q, k, v, out, lse, mask, scale);
    const int64_t T = q.size(2);
    auto [dq, dk, dv] = at::_flash_attention_backward(
        bthd(rows_contiguous(d_o)), bthd(q), bthd(k), bthd(v), bthd(rows_contiguous(out)), lse.contiguous(),
        at::Tensor(), at::Tensor(), T, T, kNoDropout, kCausal, f.philox_seed, f.philox_offset, scale, left, 0);
    return std::make_tuple(bthd(dq), bthd(dk), bthd(dv));
  };
  return {forward, backward};
}

/// The calls of a route: its own, the windowed ones of a local layer, or LibTorch's flash kernels.
std::shared_ptr<const KernelCalls> calls_of(const KernelRoute& route) {
  static const auto device_flash = std::make_shared<const KernelCalls>(KernelCalls{device_flash_forward, device_flash_backward});
  if (route.calls) return route.calls;
  if (route.window.local()) return std::make_shared<const KernelCalls>(windowed_calls(route.window));
  return device_flash;
}

FlashGrads narrowed(const std::tuple<at::Tensor, at::Tensor, at::Tensor>& grads, int64_t d) {
  const auto& [dq, dk, dv] = grads;
  return {dq.narrow(-1, 0, d), dk.narrow(-1, 0, d), dv.narrow(-1, 0, d), {}};
}

// ---- Kernel mask (CPU): the bias is the kernel's additive mask, the lse gradient one more column. ----

std::optional<at::Tensor> bias_mask(const at::Tensor& bias) {
  if (!bias.defined()) return std::nullopt;
  return bias.unsqueeze(2);  // [B, H, 1, T]: the kernel broadcasts a size-1 query dimension
}

FlashForward mask_forward(const KernelCalls& calls, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                          const at::Tensor& bias, double scale) {
  return calls.forward(q, k, v, bias_mask(bias), scale);
}

FlashGrads mask_backward(const KernelCalls& calls, const at::Tensor& d_o, const at::Tensor& q, const at::Tensor& k,
                         const at::Tensor& v, const at::Tensor& out, const at::Tensor& lse, const at::Tensor& d_lse,
                         const at::Tensor& bias, double scale, const FlashForward& forward) {
  if (!bias.defined() && !d_lse.defined()) {
    return narrowed(calls.backward(d_o, q, k, v, out, lse, std::nullopt, scale, forward), q.size(-1));
  }
  // One more column (flash_kernels.h): q 1, k 0, v 0, giving d_bias in dk. With d_lse, out carries
  // -d_lse against d_o 1 in as many columns as its parts need (one, or three in half types).
  const int64_t d = q.size(-1);
  const bool lse_grad = d_lse.defined();
  const auto lse_parts = lse_grad ? parts_of(at::neg(d_lse), out.scalar_type(), parts_needed(out.scalar_type()))
                                  : std::vector<Column>{};
  const int64_t width = d + std::max<int64_t>(1, static_cast<int64_t>(lse_parts.size()));
  const std::vector<Column> ones(lse_parts.size(), Column{1.0});
  const auto grads = calls.backward(widen(d_o, width, ones), widen(q, width, {{1.0}}), widen(k, width),
                                    widen(v, width), widen(out, width, lse_parts), lse, bias_mask(bias), scale,
                                    forward);
  auto g = narrowed(grads, d);
  if (bias.defined()) g.d_bias = std::get<1>(grads).select(-1, d).to(bias.scalar_type()) / scale;
  return g;
}

// ---- Key columns (CUDA; CPU on request): no mask, everything rides in head_dim columns. ----

struct ColumnOperands {
  at::Tensor q, k, v;
  int64_t width;
};

/// q, k, v widened to a multiple of 8 columns, with kParts columns reserved after head_dim when
/// `reserve` (a bias, or an lse gradient in the backward); with a bias, k holds the parts of
/// max(r, -1000) / scale there and q holds 1.
ColumnOperands column_operands(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& bias,
                               double scale, bool reserve) {
  const int64_t width = round_up(q.size(-1) + (reserve ? kParts : 0), kHeadDimAlign);
  if (!bias.defined()) return {widen(q, width), widen(k, width), widen(v, width), width};
  const double floor = k.scalar_type() == at::kHalf ? std::max(kBiasFloor, -kHalfKeyLimit * scale) : kBiasFloor;
  const auto bias_keys = bias.to(attention_acc_dtype(k.scalar_type())).clamp_min(floor) / scale;
  return {widen(q, width, {{1.0}, {1.0}, {1.0}}), widen(k, width, parts_of(bias_keys, k.scalar_type())),
          widen(v, width), width};
}

FlashForward column_forward(const KernelCalls& calls, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            const at::Tensor& bias, double scale) {
  const auto ops = column_operands(q, k, v, bias, scale, bias.defined());
  auto f = calls.forward(ops.q, ops.k, ops.v, std::nullopt, scale);
  f.o = f.o.narrow(-1, 0, q.size(-1));
  return f;
}

FlashGrads column_backward(const KernelCalls& calls, const at::Tensor& d_o, const at::Tensor& q, const at::Tensor& k,
                           const at::Tensor& v, const at::Tensor& out, const at::Tensor& lse, const at::Tensor& d_lse,
                           const at::Tensor& bias, double scale, const FlashForward& forward) {
  const int64_t d = q.size(-1);
  const bool lse_grad = d_lse.defined();
  const auto ops = column_operands(q, k, v, bias, scale, bias.defined() || lse_grad);
  // Columns d..d+2 carry the lse gradient (flash_kernels.h) as parts of -dlse against dO = 1; v is 0
  // there in every case.
  const auto d_o_w = lse_grad ? widen(d_o, ops.width, {{1.0}, {1.0}, {1.0}}) : widen(d_o, ops.width);
  const auto out_w = lse_grad ? widen(out, ops.width, parts_of(at::neg(d_lse), out.scalar_type()))
                              : widen(out, ops.width);
  const auto grads = calls.backward(d_o_w, ops.q, ops.k, ops.v, out_w, lse, std::nullopt, scale, forward);
  auto g = narrowed(grads, d);
  if (bias.defined()) g.d_bias = std::get<1>(grads).select(-1, d).to(bias.scalar_type()) / scale;
  return g;
}

bool uses_key_columns(const at::Tensor& q, const KernelRoute& route) {
  return q.is_cuda() || route.composition == FlashComposition::key_columns;
}

}  // namespace

FlashForward flash_kernel_forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                  const at::Tensor& bias, double scale, const KernelRoute& route) {
  const auto qc = rows_contiguous(q), kc = rows_contiguous(k), vc = rows_contiguous(v);
  const auto calls = calls_of(route);
  return uses_key_columns(q, route) ? column_forward(*calls, qc, kc, vc, bias, scale)
                                    : mask_forward(*calls, qc, kc, vc, bias, scale);
}

FlashGrads flash_kernel_backward(const at::Tensor& d_o, const at::Tensor& q, const at::Tensor& k,
                                 const at::Tensor& v, const at::Tensor& out, const at::Tensor& lse,
                                 const at::Tensor& d_lse, const at::Tensor& bias, double scale,
                                 const FlashForward& forward, const KernelRoute& route) {
  const auto qc = rows_contiguous(q), kc = rows_contiguous(k), vc = rows_contiguous(v);
  const auto d_oc = rows_contiguous(d_o);
  const auto calls = calls_of(route);
  return uses_key_columns(q, route)
             ? column_backward(*calls, d_oc, qc, kc, vc, out, lse, d_lse, bias, scale, forward)
             : mask_backward(*calls, d_oc, qc, kc, vc, out, lse, d_lse, bias, scale, forward);
}

}  // namespace attnlab::detail
