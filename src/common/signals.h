// SIGINT / SIGTERM while training: the handler only records the signal; the loop checks it after each
// step, saves a checkpoint and returns (never exit from a handler with a half-written file).
#pragma once

namespace attnlab::signals {

/// Installs the handlers for SIGINT and SIGTERM (restored by the destructor).
class StopRequestScope {
 public:
  StopRequestScope();
  ~StopRequestScope();
  StopRequestScope(const StopRequestScope&) = delete;
  StopRequestScope& operator=(const StopRequestScope&) = delete;
};

/// The signal received since the scope began, or 0.
int stop_requested();

}  // namespace attnlab::signals
