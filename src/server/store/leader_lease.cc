#include "server/store/leader_lease.h"

#include <cmath>
#include <pqxx/pqxx>
#include <utility>

#include "server/store/postgres_errors.h"
#include "server/store/postgres_job_store.h"

namespace baton::server {
namespace {

// Taken, for its transaction only, while the lease table is created, so that replicas starting
// together do not race on the DDL ("baton-ls" in ASCII; the store's daemon lock is "baton").
constexpr std::int64_t kSchemaLockKey = 0x626174'6f6e2d6c;

// The lease table and the fence. Created when missing, never altered: their shape is part of the
// wire between baton versions that may run side by side during an upgrade.
constexpr const char* kSchema = R"sql(
  CREATE TABLE IF NOT EXISTS baton_leader (
    id integer PRIMARY KEY CHECK (id = 1),
    holder text NOT NULL,
    url text NOT NULL,
    epoch bigint NOT NULL,
    expires_at timestamptz NOT NULL
  );
  INSERT INTO baton_leader VALUES (1, '', '', 0, '-infinity') ON CONFLICT (id) DO NOTHING;
  CREATE OR REPLACE FUNCTION baton_fence(mine bigint) RETURNS void LANGUAGE plpgsql AS $$
  DECLARE
    current bigint;
  BEGIN
    -- FOR SHARE: a takeover (which updates the row) waits for this transaction to end, or this
    -- transaction waits for the takeover and then reads its epoch. Either way no write of the
    -- old epoch commits after the new leader has read the store.
    SELECT epoch INTO current FROM baton_leader WHERE id = 1 FOR SHARE;
    IF current IS DISTINCT FROM mine THEN
      RAISE EXCEPTION 'this daemon''s leadership (epoch %) was superseded by epoch %', mine,
        current USING ERRCODE = 'BTF01';
    END IF;
  END $$;
)sql";

}  // namespace

struct LeaderLease::Connection {
  pqxx::connection conn;
  explicit Connection(const std::string& url) : conn(url) {}
};

LeaderLease::LeaderLease(LeaderLeaseOptions options) : options_(std::move(options)) {}
LeaderLease::~LeaderLease() = default;

template <typename Fn>
auto LeaderLease::Run(std::string_view what, Fn&& fn) {
  using R = decltype(fn(std::declval<pqxx::connection&>()));
  try {
    if (conn_ == nullptr || !conn_->conn.is_open()) {
      conn_ = std::make_unique<Connection>(options_.url);
    }
    return fn(conn_->conn);
  } catch (...) {
    Status s = CurrentExceptionStatus(std::string("leader lease: ") + std::string(what));
    conn_.reset();  // reconnect on the next call rather than trust this connection
    return R(std::move(s));
  }
}

Result<std::unique_ptr<LeaderLease>> LeaderLease::Open(const LeaderLeaseOptions& options) {
  if (!IsPostgresUrl(options.url)) {
    return InvalidArgumentError("leader lease: the store must be a postgresql:// URL");
  }
  if (options.holder.empty()) return InvalidArgumentError("leader lease: empty holder name");
  if (!(options.ttl.value() >= 1)) return InvalidArgumentError("leader lease: TTL below 1 s");
  std::unique_ptr<LeaderLease> lease(new LeaderLease(options));
  RETURN_IF_ERROR(lease->Run("create its table", [&](pqxx::connection& c) -> Status {
    pqxx::work tx(c);
    tx.exec_params("SELECT pg_advisory_xact_lock($1)", kSchemaLockKey);
    tx.exec0(kSchema);
    tx.commit();
    return Status::Ok();
  }));
  return lease;
}

Result<std::optional<std::int64_t>> LeaderLease::TryAcquire() {
  const auto start = std::chrono::steady_clock::now();
  return Run("acquire", [&](pqxx::connection& c) -> Result<std::optional<std::int64_t>> {
    pqxx::work tx(c);
    pqxx::result r = tx.exec_params(
        "UPDATE baton_leader SET holder = $1, url = $2, epoch = epoch + 1, "
        "expires_at = clock_timestamp() + make_interval(secs => $3) "
        "WHERE id = 1 AND (expires_at < clock_timestamp() OR holder = $1) RETURNING epoch",
        options_.holder, options_.advertise_url, options_.ttl.value());
    tx.commit();
    if (r.empty()) return std::optional<std::int64_t>();
    held_until_ = start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                              std::chrono::duration<double>(options_.ttl.value()));
    return std::optional<std::int64_t>(r[0][0].as<std::int64_t>());
  });
}

Result<bool> LeaderLease::Renew(std::int64_t epoch) {
  const auto start = std::chrono::steady_clock::now();
  return Run("renew", [&](pqxx::connection& c) -> Result<bool> {
    pqxx::work tx(c);
    pqxx::result r = tx.exec_params(
        "UPDATE baton_leader SET expires_at = clock_timestamp() + make_interval(secs => $3) "
        "WHERE id = 1 AND epoch = $1 AND holder = $2",
        epoch, options_.holder, options_.ttl.value());
    tx.commit();
    if (r.affected_rows() != 1) return false;
    held_until_ = start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                              std::chrono::duration<double>(options_.ttl.value()));
    return true;
  });
}

Status LeaderLease::Release(std::int64_t epoch) {
  held_until_ = {};
  return Run("release", [&](pqxx::connection& c) -> Status {
    pqxx::work tx(c);
    tx.exec_params(
        "UPDATE baton_leader SET expires_at = '-infinity' WHERE id = 1 AND epoch = $1 AND "
        "holder = $2",
        epoch, options_.holder);
    tx.commit();
    return Status::Ok();
  });
}

Result<LeaseState> LeaderLease::Read() {
  return Run("read", [&](pqxx::connection& c) -> Result<LeaseState> {
    pqxx::nontransaction q(c);
    pqxx::row r = q.exec1(
        "SELECT holder, url, epoch, expires_at >= clock_timestamp() FROM baton_leader "
        "WHERE id = 1");
    LeaseState s;
    s.holder = r[0].as<std::string>();
    s.url = r[1].as<std::string>();
    s.epoch = r[2].as<std::int64_t>();
    s.live = r[3].as<bool>();
    return s;
  });
}

}  // namespace baton::server
