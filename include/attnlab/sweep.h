// Sweeps: one YAML names a base run config, a grid and an output root; it expands into
// runs with stable names, a manifest, and either local worker processes or a Slurm job array.
// Every run is an ordinary `attnlab train --config <file> --set ...`, so a sweep adds nothing a
// single run cannot reproduce. Format and workflow: docs/sweeps.md.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "attnlab/run_config.h"
#include "attnlab/run_state.h"

namespace attnlab {

/// One grid key and its values (YAML scalars as written). `per_tier` replaces `values` for the
/// tiers it names (e.g. 350m's single seed); a key given only per tier has empty `values`.
struct GridAxis {
  std::string key;  ///< "tier" (includes <tiers_dir>/<value>.yaml) or any run-config key
  std::vector<std::string> values;
  std::map<std::string, std::vector<std::string>> per_tier;
};

/// `null_pairs:` the sweep's null (A/A) runs (docs/sweeps.md, "Null pairs"): every run of these
/// arms again, with init_seed = its init seed + init_seed_offset and its data seed unchanged, named
/// in the variant "<variant>/null" ("null" for plain grids). The report pairs each with its original.
struct NullPairs {
  std::vector<std::string> arms;
  uint64_t init_seed_offset = 1000;
  /// `grids: [i, ...]`: twin only the runs of these items of a grid list (0-based); none: every grid's.
  std::optional<std::vector<size_t>> grids;
};

/// The variant part that marks a null twin ("<tier>/<arm>[/<variant>]/null/s<seed>").
inline constexpr const char* kNullVariantPart = "null";

/// A sweep file, paths resolved (relative ones against the sweep file's directory, except `out`,
/// which is relative to the working directory like a run's out_dir).
struct SweepSpec {
  std::filesystem::path file;
  std::string name;                   ///< the file's stem unless `name:` is given
  std::filesystem::path base;         ///< base run config
  std::filesystem::path tiers_dir;    ///< where `tier` values are looked up (default ../tiers)
  std::filesystem::path out;          ///< output root
  int64_t threads_per_run = 1;        ///< train.threads of every run (fixed, so the config hash is)
  std::vector<std::string> set;       ///< "key=value" overrides for every run
  /// `grid:` as one mapping, or a list of mappings whose runs are added in list order (sklearn's
  /// ParameterGrid convention): each one a cartesian product of its axes, in file order. A list lets a
  /// sweep run one arm under a second optimizer without the product running every arm under it.
  std::vector<std::vector<GridAxis>> grids;
  std::vector<std::pair<std::string, std::string>> slurm;  ///< extra #SBATCH --key=value lines
  /// `slurm: time` in seconds; std::nullopt without one (the partition's limit, unknown here) or for none.
  std::optional<int64_t> time_limit_s;
  /// Seconds before the time limit at which Slurm sends a task USR1 (--signal=B:USR1@<this>), so the
  /// trainer checkpoints and the task requeues itself: `slurm_signal_margin:`, else
  /// default_slurm_signal_margin(time_limit_s). load_sweep() refuses a limit it does not fit.
  int64_t slurm_signal_margin = 300;
  std::optional<NullPairs> null_pairs;  ///< `null_pairs:`; none without it
};

/// Error in a sweep file or its expansion; the message names the file and the key.
struct SweepError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Parses a sweep YAML. Throws SweepError for unknown keys, a missing base / grid / out, an empty grid
/// list or a list item that is not a mapping (naming grid[i]), a tier file
/// that does not exist, a per-tier mapping without a tier axis, a `slurm: time` Slurm cannot read, a
/// `slurm: signal` (the sweep owns --signal), or a slurm_signal_margin outside 1..65535 s or that
/// leaves less than kSlurmSignalSlackSeconds of the time limit before it (naming both values).
SweepSpec load_sweep(const std::filesystem::path& path);

/// A Slurm time limit (sbatch --time: "minutes", "minutes:seconds", "hours:minutes:seconds",
/// "days-hours", "days-hours:minutes", "days-hours:minutes:seconds") in seconds; std::nullopt for no
/// limit ("0", "INFINITE", "UNLIMITED"). Throws SweepError naming `text` when it is none of these.
std::optional<int64_t> slurm_time_seconds(const std::string& text);

/// Slurm may send --signal's warning up to 60 s early (sbatch(1), "--signal"): a margin must leave at
/// least this much of the limit before it, or a task could be told to stop as soon as it starts.
constexpr int64_t kSlurmSignalSlackSeconds = 60;

/// The margin when the sweep gives none: a tenth of the time limit, between 10 s and 300 s (a
/// checkpoint of the paper's largest tier takes seconds); 300 s when the limit is not known.
int64_t default_slurm_signal_margin(std::optional<int64_t> time_limit_s);

/// One run of the grid.
struct SweepRun {
  std::string name;                    ///< "<tier>/<arm>[/<key>-<value>...]/s<seed>", unique in the sweep
  std::string variant;                 ///< the "<key>-<value>" parts joined by '/'; "" for tier x arm x seed grids
  std::filesystem::path out_dir;       ///< <out>/<name>
  std::filesystem::path config;        ///< the file `attnlab train --config` reads
  std::vector<std::string> includes;   ///< what `config` includes: the base, then the tier file
  std::vector<std::pair<std::string, std::string>> point;  ///< the grid values of this run, in grid order
  std::vector<std::string> overrides;  ///< every --set, in order: threads, sweep set, grid point, out_dir
  RunConfig resolved;                  ///< the config the trainer will run
  std::string config_hash;             ///< config_hash(resolved), compared with final.json's
};

/// The name of one grid value in a run's variant: "<key>-<value>" with '/', ' ' and '\\' as '_'.
std::string variant_part(const std::string& key, const std::string& value);
/// A run's name: "<tier>/<arm>[/<variant>]/s<seed>" (the directory under the sweep's out).
std::string sweep_run_name(const std::string& tier, const std::string& arm, const std::string& variant, uint64_t seed);
/// The variant of the run directory `name` (relative to the sweep's out) when it has the form above
/// for this tier, arm and seed; "" otherwise (a directory laid out by hand).
std::string variant_of_run_name(const std::filesystem::path& name, const std::string& tier, const std::string& arm,
                                uint64_t seed);
/// "<variant>/null" ("null" for ""): the variant of `variant`'s null twins.
std::string null_variant(const std::string& variant);
/// The variant whose null twins `variant` holds ("a/null" -> "a", "null" -> ""), or std::nullopt
/// when `variant` is not a null twins' variant.
std::optional<std::string> null_twin_of(const std::string& variant);
/// `variant` without the part of grid key `key` (e.g. optim.weight_decay): runs that differ only there.
std::string variant_without(const std::string& variant, const std::string& key);

/// Expands each grid (the cartesian product, tier axis first in file order) into runs and resolves
/// each run's config exactly as `attnlab train` will, then the null twins of `null_pairs` after
/// them. Writes nothing outside a temporary directory. Throws SweepError on duplicate names, a
/// null_pairs arm with no run, or an init seed + offset beyond 2^64 - 1; ConfigError (naming the
/// run) on an invalid config.
std::vector<SweepRun> expand_sweep(const SweepSpec& spec);

/// Writes <out>/configs/<tier>.yaml for the tiers of `runs`: a file that includes the base, then the
/// tier (tier-less sweeps train from the base directly), each atomically. Throws FileError naming the
/// file when it cannot write.
void write_run_configs(const SweepSpec& spec, const std::vector<SweepRun>& runs);

/// `attnlab train` arguments of a run (argv[1...]): train --config <file> --set k=v ...
std::vector<std::string> train_arguments(const SweepRun& run);

/// The manifest (<out>/manifest.json): the sweep, and per run its name, grid point, overrides,
/// command, config hash and current state. Written atomically whenever a run changes state.
nlohmann::json manifest_json(const SweepSpec& spec, const std::vector<SweepRun>& runs,
                             const std::vector<RunState>& states, const std::filesystem::path& executable);
void write_manifest(const SweepSpec& spec, const nlohmann::json& manifest);

/// What the report needs of one manifest entry.
struct ManifestEntry {
  std::string name, tier, arm, variant, config_hash;
  uint64_t seed = 0;
};
/// The runs <sweep_out>/manifest.json lists, in its order; std::nullopt when there is no manifest.
/// Throws SweepError naming the file and key when it does not parse or an entry lacks a key.
std::optional<std::vector<ManifestEntry>> read_manifest(const std::filesystem::path& sweep_out);

/// Every run's state (inspect_run against its expected config hash).
std::vector<RunState> inspect_runs(const std::vector<SweepRun>& runs);

struct SweepOptions {
  std::filesystem::path executable;  ///< the attnlab binary the workers run (the CLI: /proc/self/exe)
  int64_t workers = 0;               ///< concurrent runs; 0 = default_workers()
  int64_t gpus = 0;                  ///< > 0: worker slot k gets CUDA_VISIBLE_DEVICES = k-th device
  /// > 1: each run is a data-parallel job of this many ranks (`train --nproc`, docs/distributed.md):
  /// worker slot k gets the k-th disjoint set of gpus_per_run devices.
  int64_t gpus_per_run = 1;
  std::function<void(const std::string&)> log;  ///< progress lines (default: spdlog info)
};

struct SweepOutcome {
  int64_t skipped = 0;    ///< already finished
  int64_t finished = 0;   ///< finished in this invocation
  int64_t failed = 0;     ///< exited with an error (their logs say why); the others still ran
  int64_t interrupted = 0;
  int64_t damaged = 0;    ///< not started: a file of the run is missing or unreadable (RunStatus::damaged)
  int64_t held = 0;       ///< not started: another process holds the run directory (it is training it)
  int signal = 0;         ///< SIGINT / SIGTERM that stopped the sweep, or 0
  /// 0 all done, 128 + signal when stopped, 1 when a run failed or was damaged or held.
  int exit_code() const;
};

/// max(1, cores / threads per run), or gpus / gpus_per_run when `gpus` > 0: workers that fit the machine.
int64_t default_workers(const std::vector<SweepRun>& runs, int64_t gpus, int64_t gpus_per_run = 1);

/// A sweep's remaining wall time in seconds, assuming each run takes `mean_run_seconds` (the mean of
/// the runs finished so far in this invocation): the work left, `queued` runs plus what each active
/// run has left of the mean (`active_elapsed`: seconds each has run; none is counted below 0), over
/// the workers that work keeps busy, min(workers, queued + active). 0 with nothing left; NaN when
/// `mean_run_seconds` is NaN (no run finished yet). An estimate: runs of different tiers differ.
double sweep_eta_seconds(double mean_run_seconds, int64_t queued, const std::vector<double>& active_elapsed,
                         int64_t workers);

/// Runs every unfinished run with `workers` concurrent child processes (`executable train ...`,
/// output appended to <out>/logs/<name with '/' as '_'>.log), skipping finished ones; an
/// interrupted run resumes by itself from its checkpoint. Each run is looked at again just before
/// it would start: a damaged run is not started (its log line says what is wrong and what to do),
/// nor is a run another process holds (an orphaned worker of a killed sweep, a `train` by hand): the
/// sweep skips it rather than waiting, and goes on with the others (docs/runs.md). SIGINT / SIGTERM
/// are forwarded to the children; no new run starts, and the sweep returns once they have
/// checkpointed and exited. Rewrites the manifest at every change. A run whose process cannot be
/// started counts as failed. Throws SweepError when `executable` does not exist or another sweep
/// holds <out>/sweep.lock. As each run ends, logs "k of N runs finished" with the queue and
/// sweep_eta_seconds().
SweepOutcome run_sweep(const SweepSpec& spec, const std::vector<SweepRun>& runs, const SweepOptions& options);

/// Slurm's default MaxArraySize is 1001: an array's highest task index may be at most 1000.
constexpr int64_t kSlurmMaxArrayIndex = 1000;

/// The resources of each run's Slurm task.
struct SlurmLayout {
  /// 0: one process per run (GPUs through the sweep file's `slurm:` lines). > 0: a data-parallel job
  /// of `gpus_per_node` ranks on each of `nodes` nodes, one srun task per GPU with torchrun's
  /// variables set from Slurm's (docs/distributed.md).
  int64_t gpus_per_node = 0;
  int64_t nodes = 1;
};

/// Writes <out>/slurm/<name>.sbatch: a job array with one task per run (in manifest order) that runs
/// the same `executable train ...` command. Slurm's USR1, spec.slurm_signal_margin seconds before the
/// time limit, makes the trainer checkpoint and the task requeue itself, so it resumes from that
/// checkpoint; a SIGTERM (scancel, preemption) stops the trainer the same way but never requeues. A grid of more than
/// kSlurmMaxArrayIndex + 1 runs is split into <name>.part<i>.sbatch files of at most 1000 tasks each
/// (task k of part i runs run 1000 i + k). Returns the scripts' paths, in run order. Throws
/// SweepError for an empty grid or a layout with nodes < 1 or gpus_per_node < 0.
std::vector<std::filesystem::path> emit_slurm(const SweepSpec& spec, const std::vector<SweepRun>& runs,
                                              const std::filesystem::path& executable, const SlurmLayout& layout = {});

}  // namespace attnlab
