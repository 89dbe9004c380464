#include "server/store/postgres_errors.h"

#include <algorithm>
#include <exception>
#include <pqxx/pqxx>

#include "server/store/postgres_job_store.h"

namespace baton::server {

std::string WithoutPassword(std::string url) {
  if (IsPostgresUrl(url)) {
    std::size_t start = url.find("://") + 3;
    std::size_t at = url.find('@', start);
    std::size_t colon = url.find(':', start);
    if (at != std::string::npos && url.find('/', start) > at && colon < at) {
      url.replace(colon + 1, at - colon - 1, "***");
    }
  }
  for (std::size_t p = url.find("password="); p != std::string::npos;
       p = url.find("password=", p + 1)) {
    std::size_t value = p + 9;
    std::size_t end = url.find_first_of(" &", value);
    url.replace(value, (end == std::string::npos ? url.size() : end) - value, "***");
  }
  return url;
}

namespace {
std::string Trimmed(std::string_view s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.remove_suffix(1);
  return std::string(s);
}

}  // namespace

Status CurrentExceptionStatus(std::string_view what) {
  std::string prefix = std::string(what) + ": ";
  try {
    throw;
  } catch (const pqxx::in_doubt_error& e) {
    return UnavailableError(prefix +
                            "the connection broke while committing, so the outcome is "
                            "unknown (retry with the same idempotency key): " +
                            Trimmed(e.what()));
  } catch (const pqxx::broken_connection& e) {
    return UnavailableError(prefix + "connection lost: " + Trimmed(e.what()));
  } catch (const pqxx::transaction_rollback& e) {
    return UnavailableError(prefix + "rolled back by the server: " + Trimmed(e.what()));
  } catch (const pqxx::sql_error& e) {
    const std::string& state = e.sqlstate();
    std::string message = prefix + Trimmed(e.what());
    if (!state.empty()) message += " (SQLSTATE " + state + ")";
    std::string_view cls =
        std::string_view(state).substr(0, std::min<std::size_t>(2, state.size()));
    if (state == kFencedSqlState) {
      return UnavailableError(prefix + "refused by the leader lease: " + Trimmed(e.what()));
    }
    if (cls == "08" || cls == "40" || cls == "53" || cls == "57" || state == "55P03") {
      return UnavailableError(std::move(message));
    }
    return InternalError(std::move(message));
  } catch (const std::exception& e) {
    return InternalError(prefix + Trimmed(e.what()));
  } catch (...) {
    return InternalError(prefix + "unknown exception");
  }
}

}  // namespace baton::server
