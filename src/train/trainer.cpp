// The training loop (SPEC sections 2, 3, 6): AdamW on the model's parameter groups, warm-up + cosine,
// clipping, gradient accumulation to a fixed tokens-per-step, bf16 autocast on CUDA, periodic
// evaluation and atomic checkpoints, exact resume.
#include "attnlab/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <sstream>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include "attnlab/activation_capture.h"
#include "attnlab/batch_sampler.h"
#include "attnlab/checkpoint.h"
#include "attnlab/cpu_memory.h"
#include "attnlab/device.h"
#include "attnlab/distributed.h"
#include "attnlab/eta.h"
#include "attnlab/evaluate.h"
#include "attnlab/fused_adamw.h"
#include "attnlab/grad_clip.h"
#include "attnlab/init.h"
#include "attnlab/lr_schedule.h"
#include "attnlab/param_groups.h"
#include "attnlab/progress.h"
#include "attnlab/run_dir.h"
#include "attnlab/shards.h"
#include "attnlab/version.h"
#include "common/signals.h"

namespace attnlab {
namespace fs = std::filesystem;
namespace {

using Clock = std::chrono::steady_clock;

// AdamW stepped by the fused kernel (fused_adamw.h): torch::optim::AdamW's state, so checkpoints and
// exact resume are unchanged; one pass per parameter instead of the per-parameter chain of ops.
std::unique_ptr<torch::optim::AdamW> make_optimizer(GPTImpl& model, const OptimConfig& o) {
  const auto groups = parameter_groups(model);
  auto options = [&](double wd) {
    return std::make_unique<torch::optim::AdamWOptions>(
        torch::optim::AdamWOptions(o.lr).betas({o.beta1, o.beta2}).eps(o.eps).weight_decay(wd));
  };
  std::vector<torch::optim::OptimizerParamGroup> param_groups;
  param_groups.emplace_back(groups.decay, options(o.weight_decay));
  param_groups.emplace_back(groups.no_decay, options(0.0));  // SPEC section 1: excluded from decay
  return std::make_unique<FusedAdamW>(param_groups, torch::optim::AdamWOptions(o.lr));
}

void set_learning_rate(torch::optim::AdamW& opt, double lr) {
  for (auto& group : opt.param_groups()) static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);
}

// Model FLOPs per token for MFU: 6 N (forward + backward of every weight) + 12 L d_model T attention.
double flops_per_token(const RunConfig& cfg) {
  const auto counts = count_params(cfg.model);
  return 6.0 * double(counts.non_embedding + cfg.model.padded_vocab() * cfg.model.d_model) +
         12.0 * double(cfg.model.n_layer * cfg.model.d_model * cfg.train.seq_len);
}

std::set<int64_t> log_spaced_steps(const CheckpointConfig& c) {
  std::set<int64_t> steps;
  if (c.log_spaced)
    for (int64_t s = 1; s <= c.log_spaced_until; s *= 2) steps.insert(s);
  return steps;
}

// The run layer's errors (a foreign or damaged directory) stop a run like the trainer's own.
template <class F>
auto as_train_error(F&& f) {
  try {
    return f();
  } catch (const FileError& e) {
    if (dynamic_cast<const CheckpointError*>(&e)) throw;
    throw TrainError(e.what());
  }
}

// Everything one run holds while it trains.
struct Session {
  const RunConfig& cfg;
  fs::path dir;
  std::optional<RunWriter> writer;  // once the directory is claimed
  c10::Device device{c10::kCPU};
  bool autocast = false;
  GPT model{nullptr};
  std::unique_ptr<torch::optim::AdamW> opt;
  std::unique_ptr<BatchSampler> sampler;
  std::unique_ptr<ValidationSet> val;
  TrainState state;
  double elapsed_before = 0.0;  // seconds spent in earlier sessions of this run
  Clock::time_point started = Clock::now();
  double peak = 0.0;
  TimeSplit time;  // where this session's time went: the loop's overhead is everything but compute
  at::Tensor probe;  // the fixed activation-tracking batch [sequences, seq_len]; undefined when off
  // Data parallelism (docs/distributed.md): this process's rank, the gradient all-reduce and the
  // collectives; a world of one unless launched as a rank. Rank 0 alone writes the run directory.
  dist::DataParallel dp;
  int64_t micro_batches = 1;  // per rank and optimizer step
  nlohmann::json schedule_change;  // a resume's changed step budget (a metrics.jsonl record); null when none

  double elapsed() const {
    return elapsed_before + std::chrono::duration<double>(Clock::now() - started).count();
  }
};

void open_data(Session& s) {
  auto data = open_train_val(s.cfg.data.train, s.cfg.data.val, s.cfg.model.vocab_size);
  for (const auto& note : data.notes) spdlog::info("data: {}", note);
  spdlog::info("data: train {} tokens ({}), val {} tokens ({})", data.train->num_tokens(), s.cfg.data.train,
               data.val->num_tokens(), s.cfg.data.val);
  s.sampler = std::make_unique<BatchSampler>(
      data.train, BatchSamplerOptions{s.cfg.train.batch_size, s.cfg.train.seq_len, s.cfg.seed});
  s.val = std::make_unique<ValidationSet>(data.val, s.cfg.train.seq_len, s.cfg.data.val_tokens);
}

// The first track.activations.sequences validation sequences: the same batch at every probe.
void open_probe(Session& s) {
  const auto& t = s.cfg.track.activations;
  if (t.every == 0) return;
  if (t.sequences > s.val->num_sequences())
    throw TrainError(fmt::format("track.activations.sequences = {} exceeds the {} validation sequences of {}",
                                 t.sequences, s.val->num_sequences(), s.cfg.data.val));
  s.probe = s.val->sequences(0, t.sequences).x.to(s.device);
}

// One forward pass on the probe batch, logged as its own record type (SPEC section 5).
void track_activations(Session& s, MetricsLog& metrics) {
  const auto t0 = Clock::now();
  const auto& t = s.cfg.track.activations;
  CaptureOptions options;
  options.top_k = t.top_k;
  options.massive = {t.massive_max, t.massive_ratio};
  const auto capture = capture_activations(*s.model, s.probe, options);
  metrics.append({{"type", "activations"},
                  {"step", s.state.step},
                  {"probe_sequences", t.sequences},
                  {"massive", {{"min_max", t.massive_max}, {"min_ratio", t.massive_ratio}}},
                  {"layers", layers_json(capture)}});
  s.time.track += std::chrono::duration<double>(Clock::now() - t0).count();
}

void build_model(Session& s) {
  s.model = GPT(s.cfg.model);
  init_parameters(*s.model, s.cfg.seed);
  s.model->to(s.device);
  s.model->set_attention_backend(parse_attention_backend(s.cfg.attention.backend));
  s.opt = make_optimizer(*s.model, s.cfg.optim);
  const auto counts = count_params(s.cfg.model);
  spdlog::info("model: arm {} | {} layers, d_model {}, {} heads | {:.2f}M params ({:.2f}M non-embedding, {} arm) | {}",
               s.cfg.model.arm, s.cfg.model.n_layer, s.cfg.model.d_model, s.cfg.model.n_head, counts.total / 1e6,
               counts.non_embedding / 1e6, counts.arm_extra, device_name(s.device));
}

void adopt(Session& s, const LoadedCheckpoint& ckpt) {
  restore(ckpt, *s.model, *s.opt);
  s.state = ckpt.state;
  s.state.config = to_json(s.cfg);
  s.elapsed_before = s.state.extra.value("elapsed_s", 0.0);
}

// What resuming needs beyond check_restorable: the trainer's own fields in state.json's "extra".
void check_resumable(const LoadedCheckpoint& ckpt, const Session& s) {
  check_restorable(ckpt, *s.model, *s.opt);
  const auto& extra = ckpt.state.extra;
  if (extra.contains("elapsed_s") && !(extra["elapsed_s"].is_number() && extra["elapsed_s"].get<double>() >= 0))
    throw CheckpointError(ckpt.dir / "state.json",
                          "extra.elapsed_s is " + extra["elapsed_s"].dump() + ", not a duration in seconds");
}

// The newest checkpoint of `source` (a run directory, or one checkpoint) that loads and restores
// into this session; a damaged one is skipped for the one before it.
std::optional<LoadedCheckpoint> usable_checkpoint(const Session& s, const fs::path& source,
                                                  std::vector<std::string>* warnings) {
  const CheckpointCheck check = [&](const LoadedCheckpoint& c) { check_resumable(c, s); };
  if (!fs::exists(source / "state.json")) return load_latest(source, warnings, true, check);
  auto ckpt = load_checkpoint(source);
  check(ckpt);
  return ckpt;
}

// A resume under another step budget re-shapes the cosine of the steps still to come: said in the
// log and recorded for metrics.jsonl, with the learning rate of the next step before and after.
void note_budget_change(Session& s, const LoadedCheckpoint& ckpt) {
  const int64_t before = run_config_from_json(ckpt.state.config).total_steps(), after = s.cfg.total_steps();
  if (before == after) return;
  const int64_t next = ckpt.state.step;  // 0-based index of the next step
  const double lr_before = learning_rate(s.cfg.optim, next, before), lr_after = learning_rate(s.cfg.optim, next, after);
  spdlog::warn(
      "resume: the step budget changed from {} to {} steps (train.max_steps / train.token_budget), so the "
      "learning-rate schedule of steps {}..{} is re-shaped: step {} gets lr {:.3e} instead of {:.3e}",
      before, after, next + 1, after, next + 1, lr_after, lr_before);
  s.schedule_change = {{"type", "schedule_change"},    {"step", next},
                       {"total_steps_before", before}, {"total_steps", after},
                       {"next_lr_before", lr_before},  {"next_lr", lr_after}};
}

// Resume from the newest good checkpoint (or branch from another run's). Returns false when fresh.
bool resume(Session& s, const TrainOptions& options) {
  if (options.branch_from) {
    const auto source = *options.branch_from;
    auto found = usable_checkpoint(s, source, nullptr);
    if (!found) throw TrainError("--branch-from " + source.string() + ": no checkpoint there");
    auto& ckpt = *found;
    adopt(s, ckpt);
    s.state.extra["parent"] = {{"checkpoint", ckpt.dir.string()}, {"step", ckpt.state.step}};
    s.elapsed_before = 0.0;
    spdlog::info("branch: starting from {} (step {})", ckpt.dir.string(), ckpt.state.step);
    return true;
  }
  std::vector<std::string> warnings;
  auto ckpt = usable_checkpoint(s, s.dir, &warnings);
  if (!ckpt) return false;
  for (const auto& w : warnings) spdlog::warn("resume: {}", w);
  const auto differing = resume_incompatible_keys(run_config_from_json(ckpt->state.config), s.cfg);
  if (!differing.empty()) {
    std::ostringstream msg;
    msg << "cannot resume " << ckpt->dir.string() << ": the config differs in";
    for (const auto& key : differing) msg << ' ' << key;
    msg << " (" << kResumeRule << ")";
    throw TrainError(msg.str());
  }
  note_budget_change(s, *ckpt);
  adopt(s, *ckpt);
  spdlog::info("resume: from {} (step {})", ckpt->dir.string(), ckpt->state.step);
  return true;
}

// The error that stops a diverged run at `step` (1-based) before anything of that step is saved.
TrainError diverged(const Session& s, const std::string& what, int64_t step) {
  const auto kept = list_checkpoints(s.dir);
  return TrainError(fmt::format(
      "non-finite {} at step {}; stopped without saving. {}; lower optim.lr, set "
      "optim.grad_clip, or check the data",
      what, step,
      kept.empty()
          ? "The run has no checkpoint yet"
          : fmt::format("The newest checkpoint, {} (step {}), is kept", kept.back().dir.string(), kept.back().step)));
}

// One optimizer step: accumulate gradients over micro-batches, clip, update. Returns (loss, grad norm).
std::pair<double, double> train_step(Session& s, int64_t step, const TrainOptions& options) {
  set_learning_rate(*s.opt, learning_rate(s.cfg.optim, step, s.cfg.total_steps()));
  s.opt->zero_grad();
  const int64_t accum = s.micro_batches;
  double loss_sum = 0.0;
  for (int64_t micro = 0; micro < accum; ++micro) {
    const auto t_data = Clock::now();
    // This rank's share of the step's global batch (batch_sampler.h): the same sequences for any split.
    const auto batch = s.sampler->batch(step, (s.dp.rank() * accum + micro) * s.cfg.train.batch_size);
    s.time.data += std::chrono::duration<double>(Clock::now() - t_data).count();
    at::Tensor loss;
    {
      AutocastGuard autocast(s.device, s.autocast);
      loss = lm_loss(s.model->forward(batch.x.to(s.device)), batch.y.to(s.device)) / double(accum);
    }
    s.dp.backward(loss, /*reduce=*/micro + 1 == accum);  // gradients averaged over ranks on the last one
    loss_sum += loss.item<double>();
  }
  loss_sum = s.dp.sum({loss_sum})[0] / s.dp.world_size();  // a NaN on any rank stops every rank
  if (!std::isfinite(loss_sum)) throw diverged(s, "training loss", step + 1);
  if (options.after_backward) options.after_backward(*s.model, step);
  // A non-finite norm stops the run before the update, so the weights and AdamW moments stay as
  // they were (docs/checkpoints.md, "Numerics of a step").
  const auto params = s.model->parameters();
  const double grad_norm = global_grad_norm(params);
  if (!std::isfinite(grad_norm)) throw diverged(s, fmt::format("gradient norm ({})", grad_norm), step + 1);
  clip_gradients(params, grad_norm, s.cfg.optim.grad_clip);
  s.opt->step();
  return {loss_sum, grad_norm};
}

// Validation loss: each rank evaluates every world_size-th batch, the token-weighted sums are added
// over ranks (evaluate.h), so the value is the single-process one up to float64 round-off.
double validation_loss(Session& s) {
  const auto part = evaluate_sum(*s.model, *s.val, s.cfg.train.batch_size, s.device, s.autocast, s.dp.rank(),
                                 s.dp.world_size());
  const auto total = s.dp.sum({part.nats, double(part.tokens)});
  return total[0] / total[1];
}

// The validation loss of the model as it is now; a non-finite one stops the run before anything
// of this step is saved.
double checked_evaluation(Session& s) {
  const auto t_eval = Clock::now();
  const double val = validation_loss(s);
  s.time.eval += std::chrono::duration<double>(Clock::now() - t_eval).count();
  if (!std::isfinite(val)) throw diverged(s, "validation loss", s.state.step);
  return val;
}

void save(Session& s) {
  RetentionPolicy policy;
  policy.keep_last = s.cfg.checkpoint.keep_last;
  policy.keep_steps = log_spaced_steps(s.cfg.checkpoint);
  policy.keep_every = s.cfg.checkpoint.keep_every;
  s.state.extra["elapsed_s"] = s.elapsed();
  save_checkpoint(s.dir, *s.model, *s.opt, s.state, policy);
}

void write_final(Session& s, double val_loss) {
  FinalRecord r;
  r.final_val_loss = val_loss;
  r.best_val_loss = s.state.best_val_loss;
  r.steps = s.state.step;
  r.tokens_seen = s.state.tokens_seen;
  r.params = count_params(s.cfg.model);
  r.wall_time_s = s.elapsed();
  r.git_revision = git_revision();
  r.config_hash = config_hash(s.cfg);
  r.arm = s.cfg.model.arm;
  r.seed = s.cfg.seed;
  r.tier = s.cfg.tier;
  r.device = device_name(s.device);
  r.world_size = s.dp.world_size();
  r.val_tokens = s.val->num_targets();
  r.val_fingerprint = s.val->fingerprint();
  r.time_s = s.time;
  if (s.state.extra.contains("parent"))
    r.parent = ParentRecord{s.state.extra["parent"]["checkpoint"].get<std::string>(),
                            s.state.extra["parent"]["step"].get<int64_t>()};
  s.writer->write_final(r);
}

}  // namespace

StopSignalScope::StopSignalScope() : scope_(std::make_unique<signals::StopRequestScope>()) {}
StopSignalScope::~StopSignalScope() = default;

TrainResult train(const RunConfig& cfg, const TrainOptions& options) {
  // First, so a SIGINT / SIGTERM during the start-up is honoured as one during training is.
  StopSignalScope stop_scope;
  validate(cfg);
  if (cfg.train.threads > 0) torch::set_num_threads(static_cast<int>(cfg.train.threads));
  Session s{cfg, fs::path(cfg.out_dir)};
  s.device = resolve_device(cfg.train.device, "train.device");
  if (s.device.is_cpu()) keep_freed_cpu_memory();  // cpu_memory.h: no page faults on every step's activations
  s.dp = dist::DataParallel::from_environment(s.device, options.collective_timeout);  // CUDA: cuda:LOCAL_RANK
  s.micro_batches = dist::micro_batches_per_rank(cfg, s.dp.world_size());
  check_fits_memory(cfg, device_memory_bytes(s.device), device_name(s.device));  // before any allocation
  if (s.dp.is_main())
    for (const auto& warning : config_warnings(cfg)) spdlog::warn("config: {}", warning);
  s.autocast = cfg.train.precision == "bf16" && s.device.is_cuda();
  s.peak = peak_flops(s.device);
  if (options.branch_from && !fs::exists(*options.branch_from))
    throw TrainError("--branch-from " + options.branch_from->string() + ": no such checkpoint or run directory");
  // Everything that can refuse the input (data, model, the branch's source) runs before the directory
  // is claimed, so a failed start leaves no config.yaml that would refuse the corrected retry.
  open_data(s);
  open_probe(s);
  build_model(s);
  s.state.config = to_json(cfg);
  const RunDir run(s.dir);
  if (!options.branch_from && s.dp.is_main())
    s.writer = as_train_error([&] { return run.claim(cfg, /*must_be_new=*/false); });
  const bool resumed = resume(s, options);
  const int64_t total = cfg.total_steps();
  if (options.branch_from) {
    if (s.state.step >= total)
      throw TrainError("--branch-from " + options.branch_from->string() + ": the checkpoint is at step " +
                       std::to_string(s.state.step) + ", so a branch of " + std::to_string(total) +
                       " steps (train.max_steps / train.token_budget) has nothing to train");
    if (s.dp.is_main()) s.writer = as_train_error([&] { return run.claim(cfg, /*must_be_new=*/true); });
  }

  TrainResult result{TrainStatus::finished, s.state.step, 0.0, s.dir};
  if (s.state.step >= total) {
    if (const auto final_record = as_train_error([&] { return run.final_record(); })) {
      spdlog::info("{}: already finished ({} steps)", s.dir.string(), s.state.step);
      result.final_val_loss = final_record->final_val_loss;
      return result;
    }
  }
  s.dp.verify_identical(*s.model, {{"resume step", s.state.step},
                                   {"config hash", config_hash(cfg)},
                                   {"config", to_json(cfg)},
                                   {"--stop-after", options.stop_after_steps},
                                   {"--branch-from", options.branch_from ? options.branch_from->string() : ""}});
  s.dp.attach(*s.model);
  // A fresh start drops every line, step 0's probe included, that a run which never checkpointed left.
  std::optional<MetricsLog> metrics;  // rank 0's
  if (s.dp.is_main()) metrics.emplace(s.writer->open_metrics(resumed ? s.state.step : -1));
  if (metrics && !s.schedule_change.is_null()) metrics->append(s.schedule_change);
  // A signal during the start-up (StopSignalScope above) stops before the first step, on every rank.
  if (const int sig = static_cast<int>(s.dp.max(signals::stop_requested()))) {
    spdlog::info("stopped before step {} (signal {}), during the start-up; nothing was trained, so nothing to save",
                 s.state.step + 1, sig);
    return {TrainStatus::interrupted, s.state.step, 0.0, s.dir, sig};
  }
  const int64_t tokens_per_step = cfg.effective_tokens_per_step();
  const auto keep = log_spaced_steps(cfg.checkpoint);
  const int64_t first_step = s.state.step;
  double last_val = std::numeric_limits<double>::quiet_NaN();
  spdlog::info("train: steps {}..{} of {}, {} tokens/step ({} micro-batches of {}x{}{}), out {}", first_step + 1,
               total, total, tokens_per_step, s.micro_batches, cfg.train.batch_size, cfg.train.seq_len,
               s.dp.world_size() > 1 ? fmt::format(" on each of {} ranks", s.dp.world_size()) : "", s.dir.string());

  if (metrics && s.probe.defined() && first_step == 0) track_activations(s, *metrics);  // the initial state

  // The ETA's window spans the longest periodic cost, so evaluations and checkpoints are amortised.
  EtaEstimator eta(std::max({cfg.eval.every, cfg.checkpoint.every, cfg.track.activations.every, int64_t{20}}));
  auto step_done = Clock::now();
  for (int64_t step = first_step; step < total; ++step) {
    const auto t0 = Clock::now();
    const double data_before = s.time.data;
    const auto [loss, grad_norm] = train_step(s, step, options);
    const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
    s.time.compute += dt - (s.time.data - data_before);
    s.state.step = step + 1;
    s.state.tokens_seen += tokens_per_step;
    s.state.data_position = s.state.step;
    const bool last = s.state.step == total;
    nlohmann::json line = {{"step", s.state.step},
                           {"tokens", s.state.tokens_seen},
                           {"train_loss", loss},
                           {"val_loss", nullptr},
                           {"lr", learning_rate(cfg.optim, step, total)},
                           {"grad_norm", grad_norm},
                           {"tokens_per_s", tokens_per_step / dt},
                           {"elapsed_s", s.elapsed()}};
    if (s.peak > 0) line["mfu"] = flops_per_token(cfg) * tokens_per_step / dt / (s.peak * s.dp.world_size());
    s.state.val_loss = std::numeric_limits<double>::quiet_NaN();
    if (s.state.step % cfg.eval.every == 0 || last) {
      last_val = checked_evaluation(s);
      s.state.val_loss = last_val;
      s.state.best_val_loss = std::min(s.state.best_val_loss, last_val);
      line["val_loss"] = last_val;
    }
    const auto t_log = Clock::now();
    if (metrics) metrics->append(line);
    s.time.log += std::chrono::duration<double>(Clock::now() - t_log).count();
    if (metrics && s.probe.defined() &&
        (s.state.step % cfg.track.activations.every == 0 || last || keep.count(s.state.step)))
      track_activations(s, *metrics);
    const auto t_print = Clock::now();
    eta.record(std::chrono::duration<double>(t_print - step_done).count());  // with the last checkpoint
    step_done = t_print;
    const bool evaluated = !std::isnan(s.state.val_loss);  // every evaluation is printed
    if (s.state.step % cfg.train.log_every == 0 || last || s.state.step == first_step + 1 || evaluated) {
      spdlog::info("step {:>6}/{} | loss {:.4f}{} | lr {:.2e} | {:.0f} tok/s{} | ETA {}", s.state.step, total, loss,
                   std::isnan(s.state.val_loss) ? "" : fmt::format(" | val {:.4f}", s.state.val_loss),
                   line["lr"].get<double>(), tokens_per_step / dt,
                   line.contains("mfu") ? fmt::format(" | MFU {:.1f}%", 100 * line["mfu"].get<double>()) : "",
                   format_duration(eta.remaining_seconds(total - s.state.step)));
    }
    s.time.log += std::chrono::duration<double>(Clock::now() - t_print).count();
    const int stop_signal = static_cast<int>(s.dp.max(signals::stop_requested()));  // every rank stops at one step
    const bool stop = stop_signal != 0 ||
                      (options.stop_after_steps > 0 && s.state.step - first_step >= options.stop_after_steps);
    if (last || stop || s.state.step % cfg.checkpoint.every == 0 || keep.count(s.state.step)) {
      const auto t_ckpt = Clock::now();
      if (metrics) metrics->sync();  // the log is durable up to the step a resume will start from
      s.dp.run_on_main(fmt::format("the checkpoint of step {}", s.state.step), [&] { save(s); });
      s.time.checkpoint += std::chrono::duration<double>(Clock::now() - t_ckpt).count();
    }
    if (stop && !last) {
      s.dp.barrier();  // no rank exits (which would end a torchrun job) before the checkpoint is written
      spdlog::info("stopped at step {}{}; checkpoint saved, resume with the same command", s.state.step,
                   stop_signal ? fmt::format(" (signal {})", stop_signal) : "");
      return {TrainStatus::interrupted, s.state.step, 0.0, s.dir, stop_signal};
    }
  }
  if (std::isnan(last_val)) last_val = checked_evaluation(s);
  s.dp.run_on_main("final.json", [&] { write_final(s, last_val); });
  s.dp.barrier();
  spdlog::info("done: {} steps, final val loss {:.4f} nats/token, {}", s.state.step, last_val,
               format_duration(s.elapsed()));
  result.step = s.state.step;
  result.final_val_loss = last_val;
  return result;
}

}  // namespace attnlab
