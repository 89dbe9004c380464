// What the PostgreSQL code of the store (postgres_job_store.cc, leader_lease.cc) shares: URLs
// fit for messages and libpqxx exceptions turned into Status values.
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"

namespace baton::server {

// The URL as it may appear in messages and logs: any password replaced by "***", in the URI's
// user info ("postgresql://user:secret@host") or as a "password=" parameter.
std::string WithoutPassword(std::string url);

// The SQLSTATE of the fence (leader_lease.h): a write transaction of a leader whose epoch is no
// longer the lease's. CurrentExceptionStatus makes it kUnavailable: another replica leads now.
inline constexpr std::string_view kFencedSqlState = "BTF01";

// Turns the exception being handled into a Status; call only from a catch block. Connection
// trouble, rollbacks the server chose (serialization, deadlock), resource shortages and operator
// intervention are kUnavailable (worth retrying); everything else is kInternal.
Status CurrentExceptionStatus(std::string_view what);

}  // namespace baton::server
