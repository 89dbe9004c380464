// The factories of the trace readers in this folder, one per format, for the registry in
// trace_formats.cc (not a public API: use OpenTrace or MakeTraceReader from trace.h).
#pragma once

#include <istream>
#include <memory>
#include <string>

#include "sim/workload/trace.h"

namespace baton::sim {

std::unique_ptr<TraceReader> MakeItpReader(std::istream& in, std::string name,
                                           const TraceOptions& options);
std::unique_ptr<TraceReader> MakePhillyReader(std::istream& in, std::string name,
                                              const TraceOptions& options);
std::unique_ptr<TraceReader> MakeSwfReader(std::istream& in, std::string name,
                                           const TraceOptions& options);
std::unique_ptr<TraceReader> MakeOpenbReader(std::istream& in, std::string name,
                                             const TraceOptions& options);
std::unique_ptr<TraceReader> MakeJsonlReader(std::istream& in, std::string name,
                                             const TraceOptions& options);

}  // namespace baton::sim
