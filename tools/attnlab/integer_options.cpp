// check_integer_ranges(): every integer option is refused beyond its 64-bit type, where CLI11 2.1's
// own conversion (strtoll / strtoull without an errno check) would saturate or wrap (commands.h).
#include <cerrno>
#include <cstdlib>
#include <limits>
#include <string>

#include <fmt/format.h>

#include "commands.h"

namespace attnlab::cli {
namespace {

// The text's value as CLI11 reads it (base 0: 0x.. hex and 0.. octal too) fits in a signed
// (`is_unsigned` false) or unsigned 64-bit integer; "" when it does, else why not. Text that is no
// integer at all passes, for CLI11's conversion to refuse as it does.
std::string beyond_range(const std::string& text, bool is_unsigned) {
  const char* begin = text.c_str();
  char* end = nullptr;
  errno = 0;
  if (is_unsigned) {
    const auto first = text.find_first_not_of(" \t");
    if (first != std::string::npos && text[first] == '-' && std::strtoll(begin, &end, 0) != 0)
      return fmt::format("'{}' is negative: an unsigned integer is >= 0", text);
    errno = 0;
    std::strtoull(begin, &end, 0);
  } else {
    std::strtoll(begin, &end, 0);
  }
  if (errno != ERANGE) return "";
  return is_unsigned ? fmt::format("'{}' is beyond an unsigned 64-bit integer (at most {})", text,
                                   std::numeric_limits<uint64_t>::max())
                     : fmt::format("'{}' is beyond a 64-bit integer ({} to {})", text,
                                   std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max());
}

void check_options(CLI::App& app) {
  for (CLI::Option* option : app.get_options([](CLI::Option*) { return true; })) {
    const std::string type = option->get_type_name();
    const bool is_unsigned = type.rfind("UINT", 0) == 0;
    if (!is_unsigned && type.rfind("INT", 0) != 0) continue;
    option->check(CLI::Validator([is_unsigned](std::string& text) { return beyond_range(text, is_unsigned); }, ""));
  }
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) check_options(*sub);
}

}  // namespace

void check_integer_ranges(CLI::App& app) { check_options(app); }

}  // namespace attnlab::cli
