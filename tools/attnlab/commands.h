// Subcommands of the `attnlab` program; each lives in its own cmd_*.cpp and registers itself on the
// CLI11 app. A subcommand's callback throws on bad input; main() turns that into a one-line error.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

namespace attnlab::cli {

/// A number check for options. CLI11's PositiveNumber / NonNegativeNumber name their range as a
/// double printed in 300 digits; this one says "must be > 0, got '0'" and refuses non-numbers.
inline CLI::Validator number_at_least(double low, bool strict) {
  const std::string want = std::string(strict ? "> " : ">= ") + (low == 0 ? "0" : std::to_string(low));
  return CLI::Validator(
      [low, strict, want](std::string& text) -> std::string {
        double v = 0;
        size_t used = 0;
        try {
          v = std::stod(text, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used == 0 || used != text.size()) return "'" + text + "' is not a number";
        if (strict ? !(v > low) : !(v >= low)) return "must be " + want + ", got '" + text + "'";
        return "";
      },
      want);
}
inline CLI::Validator positive() { return number_at_least(0, true); }
inline CLI::Validator non_negative() { return number_at_least(0, false); }

/// A flag name the command no longer takes, kept hidden so that a script using it stops with the
/// name that replaced it ("--layer is now --residual: ...") instead of CLI11's "not expected".
/// `is_flag`: the old name took no value.
inline void add_renamed_option(CLI::App* cmd, const std::string& old_name, const std::string& new_name,
                               const std::string& meaning, bool is_flag = false) {
  const std::string why = old_name + " was renamed " + new_name + " (" + meaning + ")";
  auto* old = is_flag ? cmd->add_flag(old_name, "") : cmd->add_option(old_name, "");
  old->group("")->each([why](const std::string&) { throw CLI::ValidationError(why); });
}

/// Adds a range check to every integer option of every subcommand of `app` (CLI11's type names INT
/// and UINT, vectors included): CLI11 2.1 converts with strtoll / strtoull and ignores their
/// overflow, so `--tokens 1e30`'s digits became INT64_MAX and a negative unsigned value 2^64 - 1,
/// without a word. Now such a value is refused naming the option, its text and the type's range
/// (integer_options.cpp). main() calls it once, after every command is added.
void check_integer_ranges(CLI::App& app);

/// Points spdlog's default logger at stderr (a logger named `command`), for commands whose stdout is
/// their result (a table, generated text): `attnlab report DIR > report.md` then holds no log lines.
void log_to_stderr(const std::string& command);

void add_arms_command(CLI::App& app);
void add_config_command(CLI::App& app);
void add_train_command(CLI::App& app);
void add_eval_command(CLI::App& app);
void add_sweep_command(CLI::App& app);
void add_report_command(CLI::App& app);
void add_activations_command(CLI::App& app);
void add_retention_command(CLI::App& app);
void add_ablate_command(CLI::App& app);
void add_probe_command(CLI::App& app);
void add_inject_command(CLI::App& app);
void add_export_hf_command(CLI::App& app);
void add_import_hf_command(CLI::App& app);
void add_sample_command(CLI::App& app);
void add_watch_command(CLI::App& app);
void add_self_check_command(CLI::App& app);

}  // namespace attnlab::cli
