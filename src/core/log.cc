#include "core/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>

namespace baton {

Status InitLogging(std::string_view level, LogFormat format) {
  auto parsed = spdlog::level::from_str(std::string(level));
  if (parsed == spdlog::level::off && level != "off") {
    return InvalidArgumentError("log level '" + std::string(level) +
                                "': expected trace, debug, info, warn, error or off");
  }
  auto logger = spdlog::stderr_color_mt("baton");
  spdlog::set_default_logger(logger);
  spdlog::set_level(parsed);
  if (format == LogFormat::kJson) {
    spdlog::set_pattern(R"({"ts":"%Y-%m-%dT%H:%M:%S.%fZ","level":"%l","msg":"%v"})",
                        spdlog::pattern_time_type::utc);
  } else {
    spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
  }
  return Status::Ok();
}

}  // namespace baton
