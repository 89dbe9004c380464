// libFuzzer target for the job-spec parsers (JSON and YAML request bodies → validated JobSpec).
// The first input byte picks the format; the rest is the body. Besides "no crash, no sanitizer
// report", it checks that an accepted spec is in range and that its canonical JSON parses back
// to the same canonical JSON.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "server/http/job_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace baton::server;
  if (size == 0) return 0;
  BodyFormat format = (data[0] & 1) != 0 ? BodyFormat::kYaml : BodyFormat::kJson;
  std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  baton::Result<JobSpec> spec = ParseJobSpec(body, format);
  if (!spec.ok()) return 0;
  if (spec->gpus < 1 || spec->gpus > kMaxJobGpus || spec->name.empty()) __builtin_trap();
  std::string canonical = CanonicalJson(*spec);
  baton::Result<JobSpec> again = ParseJobSpec(canonical, BodyFormat::kJson);
  if (!again.ok() || CanonicalJson(*again) != canonical) __builtin_trap();
  return 0;
}
