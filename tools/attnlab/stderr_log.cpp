#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "commands.h"

namespace attnlab::cli {

void log_to_stderr(const std::string& command) {
  if (auto existing = spdlog::get(command)) return spdlog::set_default_logger(existing);
  spdlog::set_default_logger(spdlog::stderr_color_mt(command));
}

}  // namespace attnlab::cli
