// RunReplica: the daemon on a PostgreSQL store that several daemons share (docs/operations.md).
//
// Each replica binds its port, then competes for the leader lease (store/leader_lease.h):
//  * A standby answers GET /healthz ({"role": "standby", "leader": URL, "epoch": N}) and
//    redirects every other request (307, method and body kept) to the URL of the leader the lease
//    names, or answers 503 with Retry-After while no live lease names one. It tries to take the
//    lease every lease_renew.
//  * The replica that takes it becomes the daemon (Server::Create with its epoch): the store
//    fences every write by the epoch, the executor fences launches, the controller reloads the
//    store and adopts what runs. A keeper thread renews the lease every lease_renew.
//  * A leader that cannot renew for lease_ttl (counted from the start of its last renewal), or
//    finds the lease taken, is deposed: its store refuses writes at once, it stops scheduling and
//    serving, leaves running jobs to the next leader, and returns kUnavailable (the process exits;
//    a supervisor restarts it as a standby). Should the shutdown hang (a connection the network
//    holds), the process exits after 2 x lease_ttl anyway.
//  * SIGTERM or SIGINT: a standby stops; a leader shuts down, then expires its lease so that a
//    standby takes over at once.
#pragma once

#include "core/status.h"
#include "server/controller.h"
#include "server/server.h"

namespace baton::server {

// Blocks SIGTERM and SIGINT like RunServer (call it from main() before other threads start).
Status RunReplica(const ServerOptions& options, Controller* controller);

}  // namespace baton::server
