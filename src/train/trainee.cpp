// The trainee: device, ranks, data, model and optimizer of a run, and one optimizer step (trainee.h).
#include "train/trainee.h"

#include <chrono>
#include <cmath>
#include <exception>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include "attnlab/attention_self_check.h"
#include "attnlab/cpu_memory.h"
#include "attnlab/device.h"
#include "attnlab/document_windows.h"
#include "attnlab/grad_clip.h"
#include "attnlab/init.h"
#include "attnlab/lr_schedule.h"
#include "attnlab/shards.h"
#include "attnlab/optimizer_factory.h"

namespace attnlab::training {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Model FLOPs per token for MFU: 6 N (forward + backward of every weight) + 12 L d_model T attention.
double flops_per_token(const RunConfig& cfg) {
  const auto counts = count_params(cfg.model);
  return 6.0 * double(counts.non_embedding + cfg.model.padded_vocab() * cfg.model.d_model) +
         12.0 * double(cfg.model.n_layer * cfg.model.d_model * cfg.train.seq_len);
}

// The document separator of a data.sampling: document run (document_windows.h), else none.
std::optional<int64_t> window_separator(const RunConfig& cfg, const TrainValData& data) {
  if (cfg.data.sampling != WindowSampling::document) return std::nullopt;
  return document_separator(data.tokenizer, cfg.model.vocab_size, cfg.data.train);
}

void say_aligned_windows(const BatchSampler& sampler, const ValidationSet& val, int64_t separator) {
  const int64_t starts = sampler.num_windows(), at_doc = sampler.num_document_starts();
  spdlog::info("data: document-aligned windows (separator {}): train {} starts, {} at a document start and {} "
               "continuations; val {} sequences, {} at a document start",
               separator, starts, at_doc, starts - at_doc, val.num_sequences(), val.num_document_starts());
}

void open_data(Trainee& t, const RunConfig& cfg) {
  auto data = open_train_val(cfg.data.train, cfg.data.val, cfg.model.vocab_size);
  for (const auto& note : data.notes) spdlog::info("data: {}", note);
  spdlog::info("data: train {} tokens ({}), val {} tokens ({})", data.train->num_tokens(), cfg.data.train,
               data.val->num_tokens(), cfg.data.val);
  const auto separator = window_separator(cfg, data);
  t.sampler = std::make_unique<BatchSampler>(
      data.train, BatchSamplerOptions{cfg.train.batch_size, cfg.train.seq_len, cfg.effective_data_seed(), separator});
  t.val = std::make_shared<const ValidationSet>(data.val, cfg.train.seq_len, cfg.data.val_tokens, separator);
  if (separator && t.dp.is_main()) say_aligned_windows(*t.sampler, *t.val, *separator);
}

void build_model(Trainee& t, const RunConfig& cfg) {
  t.model = GPT(cfg.model);
  init_parameters(*t.model, cfg.effective_init_seed());
  t.model->to(t.device);
  t.model->set_attention_backend(cfg.attention.backend);
  auto built = make_optimizer(*t.model, cfg.optim);
  t.opt = std::move(built.opt);
  t.peak_lr = std::move(built.peak_lr);
  const auto counts = count_params(cfg.model);
  spdlog::info("model: arm {} | {} layers, d_model {}, {} heads | {:.2f}M params ({:.2f}M non-embedding, {} arm) | {}",
               cfg.model.arm, cfg.model.n_layer, cfg.model.d_model, cfg.model.n_head, counts.total / 1e6,
               counts.non_embedding / 1e6, counts.arm_extra, device_name(t.device));
}

// The first-use self-check of the run's attention (docs/kernels.md): its arm, backend and head_dim on
// its device, in the dtype its kernels see (bfloat16 under autocast). Every rank checks its own
// device; the ranks agree on the outcome before any throws, so a failure on one rank stops every rank
// at once instead of leaving the others waiting in the next collective.
std::optional<SelfCheckResult> check_attention(Trainee& t, const RunConfig& cfg, const TrainOptions& options) {
  if (!t.device.is_cuda() && !options.self_check_on_cpu) return std::nullopt;
  SelfCheckCase c;
  c.arm = cfg.model.arm_spec(), c.backend = cfg.attention.backend, c.device = t.device;
  c.dtype = t.autocast ? at::kBFloat16 : at::kFloat, c.head_dim = cfg.model.head_dim();
  std::optional<SelfCheckResult> result;
  std::exception_ptr failure;
  try {
    result = first_use_self_check(c, options.self_check);
  } catch (...) {
    failure = std::current_exception();
  }
  const bool any_failed = t.dp.max(failure ? 1 : 0) != 0;
  if (failure) std::rethrow_exception(failure);
  if (any_failed)
    throw TrainError("the attention self-check failed on another rank (its log names the tensor); set "
                     "attention.backend: reference to run on the composed ops instead");
  return result;
}

}  // namespace

Trainee make_trainee(const RunConfig& cfg, const TrainOptions& options) {
  validate(cfg);
  if (cfg.train.threads > 0) torch::set_num_threads(static_cast<int>(cfg.train.threads));
  Trainee t;
  t.device = resolve_device(cfg.train.device, "train.device");
  if (t.device.is_cpu()) keep_freed_cpu_memory();  // cpu_memory.h: no page faults on every step's activations
  t.dp = dist::DataParallel::from_environment(t.device, options.collective_timeout);  // CUDA: cuda:LOCAL_RANK
  t.micro_batches = dist::micro_batches_per_rank(cfg, t.dp.world_size());
  check_fits_memory(cfg, device_memory_bytes(t.device), device_name(t.device));  // before any allocation
  if (t.dp.is_main())
    for (const auto& warning : config_warnings(cfg)) spdlog::warn("config: {}", warning);
  t.autocast = cfg.train.precision == Precision::bf16 && t.device.is_cuda();
  t.peak_flops = peak_flops(t.device);
  if (options.branch_from && !std::filesystem::exists(*options.branch_from))
    throw TrainError("--branch-from " + options.branch_from->string() + ": no such checkpoint or run directory");
  open_data(t, cfg);
  build_model(t, cfg);
  t.self_check = check_attention(t, cfg, options);
  return t;
}

StepOutcome train_step(Trainee& t, const RunConfig& cfg, int64_t step, const TrainOptions& options, const RunDir& run) {
  const auto t0 = Clock::now();
  StepOutcome out;
  out.lr = learning_rate(cfg.optim, step, cfg.total_steps());
  set_learning_rates(*t.opt, t.peak_lr, cfg.optim, step, cfg.total_steps());
  t.opt->zero_grad();
  const int64_t accum = t.micro_batches;
  for (int64_t micro = 0; micro < accum; ++micro) {
    const auto t_data = Clock::now();
    // This rank's share of the step's global batch (batch_sampler.h): the same sequences for any split.
    const auto batch = t.sampler->batch(step, (t.dp.rank() * accum + micro) * cfg.train.batch_size);
    out.data_seconds += seconds_since(t_data);
    at::Tensor loss;
    {
      AutocastGuard autocast(t.device, t.autocast);
      loss = lm_loss(t.model->forward(batch.x.to(t.device)), batch.y.to(t.device)) / double(accum);
    }
    t.dp.backward(loss, /*reduce=*/micro + 1 == accum);  // gradients averaged over ranks on the last one
    out.loss += loss.item<double>();
  }
  out.loss = t.dp.sum({out.loss})[0] / t.dp.world_size();  // a NaN on any rank stops every rank
  if (!std::isfinite(out.loss)) throw diverged(run, "training loss", step + 1);
  if (options.after_backward) options.after_backward(*t.model, step);
  // A non-finite norm stops the run before the update, so the weights and optimizer state stay as
  // they were (docs/checkpoints.md, "Numerics of a step").
  const auto params = t.model->parameters();
  out.grad_norm = global_grad_norm(params);
  if (!std::isfinite(out.grad_norm)) throw diverged(run, fmt::format("gradient norm ({})", out.grad_norm), step + 1);
  clip_gradients(params, out.grad_norm, cfg.optim.grad_clip);
  t.opt->step();
  out.seconds = seconds_since(t0);
  t.data_seconds += out.data_seconds;
  t.compute_seconds += out.seconds - out.data_seconds;
  return out;
}

TrainError diverged(const RunDir& run, const std::string& what, int64_t step) {
  const auto kept = run.checkpoints();
  return TrainError(fmt::format(
      "non-finite {} at step {}; stopped without saving. {}; lower optim.lr, set "
      "optim.grad_clip, or check the data",
      what, step,
      kept.empty()
          ? "The run has no checkpoint yet"
          : fmt::format("The newest checkpoint, {} (step {}), is kept", kept.back().dir.string(), kept.back().step)));
}

std::optional<double> model_flops_utilisation(const RunConfig& cfg, const Trainee& t, int64_t tokens, double seconds) {
  if (t.peak_flops <= 0) return std::nullopt;
  return flops_per_token(cfg) * tokens / seconds / (t.peak_flops * t.dp.world_size());
}

}  // namespace attnlab::training
