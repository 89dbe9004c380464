#include "topology/gpu.h"

#include <gtest/gtest.h>

namespace baton::topo {
namespace {

TEST(GpuCatalogTest, HasTheSevenIssueTypes) {
  for (const char* name : {"A100-40GB", "A100-80GB", "H100-SXM", "H800", "H200", "B200", "GB200"}) {
    auto g = FindGpu(name);
    ASSERT_TRUE(g.ok()) << name;
    EXPECT_EQ((*g)->name, name);
    EXPECT_GT((*g)->bf16.value(), 0);
    EXPECT_GT((*g)->hbm.value(), 0);
    EXPECT_GT((*g)->nvlink_per_direction.value(), 0);
    EXPECT_NE((*g)->family, GpuFamily::kUnknown) << name;
    EXPECT_GT((*g)->sm_count, 0) << name;
  }
}

TEST(GpuCatalogTest, FamiliesAndSmCounts) {
  const struct {
    const char* gpu;
    GpuFamily family;
    int sms;
  } kCases[] = {{"A100-80GB", GpuFamily::kAmpere, 108},
                {"H100-SXM", GpuFamily::kHopper, 132},
                {"H200", GpuFamily::kHopper, 132},
                {"B200", GpuFamily::kBlackwell, 148}};
  for (const auto& c : kCases) {
    const GpuSpec& g = **FindGpu(c.gpu);
    EXPECT_EQ(g.family, c.family) << c.gpu;
    EXPECT_EQ(g.sm_count, c.sms) << c.gpu;
    EXPECT_EQ(*ParseGpuFamily(GpuFamilyName(c.family)), c.family);
  }
  EXPECT_EQ(*ParseGpuFamily(" Hopper"), GpuFamily::kHopper);
  EXPECT_EQ(GpuFamilyName(GpuFamily::kUnknown), "unknown");
  auto bad = ParseGpuFamily("volta");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'volta'"), std::string::npos);
  EXPECT_NE(bad.status().message().find("ampere, hopper or blackwell"), std::string::npos);
  // A GPU declared outside the catalogue has no family until it says one.
  EXPECT_EQ(GpuSpec{}.family, GpuFamily::kUnknown);
}

TEST(GpuCatalogTest, AliasesAndPeaks) {
  EXPECT_EQ((*FindGpu("a100-sxm4-80gb"))->name, "A100-80GB");
  EXPECT_EQ((*FindGpu("h100"))->name, "H100-SXM");
  EXPECT_EQ((*FindGpu("NVIDIA-H100-80GB-HBM3"))->name, "H100-SXM");
  const GpuSpec& h100 = **FindGpu("H100-SXM");
  EXPECT_NEAR(ToTFlops(h100.Peak(Dtype::kBf16)), 989.4, 0.1);
  EXPECT_NEAR(ToTFlops(h100.Peak(Dtype::kFp8)), 1978.9, 0.1);
  EXPECT_EQ(h100.Peak(Dtype::kFp16), h100.Peak(Dtype::kBf16));
  EXPECT_EQ((*FindGpu("A100-80GB"))->Peak(Dtype::kFp8).value(), 0);
  EXPECT_NEAR(ToGBps((*FindGpu("H800"))->nvlink_per_direction), 200, 1e-9);
}

TEST(GpuCatalogTest, UnknownTypeNamesTheKnownOnes) {
  auto g = FindGpu("TPUv5");
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("unknown GPU type 'TPUv5'"), std::string::npos);
  EXPECT_NE(g.status().message().find("H100-SXM"), std::string::npos);
  EXPECT_FALSE(ParseDtype("int4").ok());
  EXPECT_EQ(*ParseDtype("BF16"), Dtype::kBf16);
}

}  // namespace
}  // namespace baton::topo
