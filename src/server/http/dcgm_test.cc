#include "server/http/dcgm.h"

#include <gtest/gtest.h>

namespace baton::server {
namespace {

TEST(DcgmScrape, TakesTheWorstValuePerHostnameAndField) {
  constexpr std::string_view kText = R"(# HELP DCGM_FI_DEV_GPU_TEMP GPU temperature (in C).
# TYPE DCGM_FI_DEV_GPU_TEMP gauge
DCGM_FI_DEV_GPU_TEMP{gpu="0",UUID="GPU-1",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="node001"} 61
DCGM_FI_DEV_GPU_TEMP{gpu="1",UUID="GPU-2",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",Hostname="node001"} 93
DCGM_FI_DEV_XID_ERRORS{gpu="3",UUID="GPU-4",Hostname="node002",err_code="79"} 79 1700000000000
DCGM_FI_DEV_SM_CLOCK{gpu="0",Hostname="node001"} 1980
DCGM_FI_DEV_PCIE_REPLAY_COUNTER{gpu="0"} 5
DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL{gpu="0",Hostname="node002"} not-a-number
)";
  Result<DcgmScrape> s = ParseDcgmScrape(kText);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->samples, 3);
  EXPECT_EQ(s->skipped, 2);  // no Hostname; a bad value
  ASSERT_EQ(s->nodes.size(), 2u);
  EXPECT_EQ(s->nodes["node001"].at("DCGM_FI_DEV_GPU_TEMP"), 93);
  EXPECT_EQ(s->nodes["node002"].at("DCGM_FI_DEV_XID_ERRORS"), 79);
  EXPECT_FALSE(s->nodes["node001"].contains("DCGM_FI_DEV_SM_CLOCK"));
}

TEST(DcgmScrape, RejectsABodyWithoutHealthFields) {
  for (std::string_view text : {"", "# only comments\n", "up 1\n", "{}"}) {
    EXPECT_EQ(ParseDcgmScrape(text).status().code(), StatusCode::kInvalidArgument) << text;
  }
}

TEST(DcgmScrape, AMetricNameAloneIsSkippedNotACrash) {
  // Found by fuzz_dcgm: a line with a health field's name and nothing after it threw
  // std::out_of_range from substr, which aborted the daemon's worker.
  constexpr std::string_view kText =
      "DCGM_FI_DEV_GPU_TEMP\n"
      "DCGM_FI_DEV_GPU_TEMP{gpu=\"0\",Hostname=\"node001\"} 61\n";
  Result<DcgmScrape> s = ParseDcgmScrape(kText);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->samples, 1);
  EXPECT_EQ(s->skipped, 1);
}

TEST(DcgmScrape, UnescapesLabelValues) {
  Result<DcgmScrape> s =
      ParseDcgmScrape("DCGM_FI_DEV_GPU_TEMP{note=\"a \\\"b\\\", c\",Hostname=\"n1\"} 40\n");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->nodes["n1"].at("DCGM_FI_DEV_GPU_TEMP"), 40);
}

}  // namespace
}  // namespace baton::server
