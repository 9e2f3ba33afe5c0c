#include "common/signals.h"

#include <atomic>
#include <csignal>

namespace attnlab::signals {
namespace {

std::atomic<int> g_signal{0};
int g_depth = 0;  // scopes alive; only the outermost installs and restores (main thread only)
struct sigaction g_old_int, g_old_term;

extern "C" void on_signal(int sig) { g_signal.store(sig); }

}  // namespace

StopRequestScope::StopRequestScope() {
  if (g_depth++ > 0) return;  // an inner scope keeps what arrived before it
  g_signal.store(0);
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sa.sa_flags = SA_RESTART;  // a blocking read during the start-up resumes instead of failing
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &g_old_int);
  sigaction(SIGTERM, &sa, &g_old_term);
}

StopRequestScope::~StopRequestScope() {
  if (--g_depth > 0) return;
  sigaction(SIGINT, &g_old_int, nullptr);
  sigaction(SIGTERM, &g_old_term, nullptr);
}

int stop_requested() { return g_signal.load(); }

}  // namespace attnlab::signals
