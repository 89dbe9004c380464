// Logging: spdlog underneath, configured once by the composition root (cli). Library code logs
// through the LOG_* macros below; it never configures sinks itself.
#pragma once

#include <spdlog/spdlog.h>

#include <string_view>

#include "core/status.h"

namespace baton {

enum class LogFormat { kText, kJson };

// Sets the global level ("trace", "debug", "info", "warn", "error", "off") and format. Call once
// at start-up, before threads start.
Status InitLogging(std::string_view level, LogFormat format = LogFormat::kText);

}  // namespace baton

#define LOG_DEBUG(...) SPDLOG_DEBUG(__VA_ARGS__)
#define LOG_INFO(...) SPDLOG_INFO(__VA_ARGS__)
#define LOG_WARN(...) SPDLOG_WARN(__VA_ARGS__)
#define LOG_ERROR(...) SPDLOG_ERROR(__VA_ARGS__)
