#include "sched/actions/internal.h"

namespace baton::sched::internal {

bool OldEnough(Session& s, const JobInfo& v) {
  const TimePoint eligible = v.start + s.config().tenancy.min_run_time;
  if (eligible <= s.now()) return true;
  s.WakeAt(eligible);
  return false;
}

bool VictimAllowed(Session& s, const JobInfo& job, const JobInfo& v) {
  return s.config().tenancy.MayPreempt(job.spec.tenant, v.spec.tenant) && OldEnough(s, v);
}

bool BlockedByRoom(const Session& s, const PluginStatus& st) {
  return st.kind() == StatusKind::kUnschedulable &&
         st.plugin() == s.plugins().placement.plugin->Name();
}

bool PlaceOrWait(Session& s, JobInfo& job, const Session::ExtraFilter& extra) {
  Statement stmt(&s.state());
  Placement p;
  PluginStatus st = s.TryPlace(job, &stmt, extra, &p);
  if (st.ok()) {
    s.Bind(job, std::move(p), &stmt);
    return false;
  }
  if (st.kind() == StatusKind::kUnresolvable) {
    s.Reject(job.spec.id, st.plugin(), st.reason());
    return false;
  }
  const bool blocked = BlockedByRoom(s, st);
  s.Wait(job, std::move(st));
  return blocked;
}

bool LowestFirst::operator()(const JobInfo* a, const JobInfo* b) const {
  if (a->spec.priority != b->spec.priority) return a->spec.priority < b->spec.priority;
  const double la = s->LostGpuSeconds(*a);
  const double lb = s->LostGpuSeconds(*b);
  if (la != lb) return la < lb;
  return a->spec.id < b->spec.id;
}

}  // namespace baton::sched::internal
